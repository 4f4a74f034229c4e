/**
 * Shared by every bench/*.bench.ts: the machine a figure was measured on, simple statistics, and
 * writing one bench's own section of docs/benchmarks.md (between its markers) without touching the
 * sections other benches own.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const benchmarksFile = join(
  resolve(dirname(fileURLToPath(import.meta.url)), '..'),
  'docs',
  'benchmarks.md',
);

export function machineInfo(): string {
  let cpuModel = cpus()[0]?.model ?? 'unknown';
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line !== undefined) cpuModel = line.split(':').slice(1).join(':').trim();
  } catch {
    // Not Linux: os.cpus() is the best we have.
  }
  return `${cpus().length} CPU(s) (nproc), ${cpuModel}, Node ${process.version}, ${process.platform}/${process.arch}`;
}

/** The 1, 5 and 15 minute load averages now ("2.41 / 3.02 / 2.77"): with 2 shared cores, the context of every figure. */
export function loadAverage(): string {
  return loadavg()
    .map((value) => value.toFixed(2))
    .join(' / ');
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export function round(value: number, digits = 2): string {
  return value.toFixed(digits);
}

const header = `# Benchmarks

Measured with \`npm run bench\` (bench/run.ts runs every \`bench/*.bench.ts\` in turn, each in its own
process; \`npm run bench -- core\` runs one). Each section is rewritten by its own bench file.
The machine is shared by several engineers, so figures carry noise; every bench alternates its
variants (A/B) over several rounds and reports medians.
`;

/** Replaces (or appends) the section of `name` in docs/benchmarks.md. */
export function writeBenchmarkSection(name: string, markdown: string): void {
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  const section = `${start}\n${markdown.trimEnd()}\n${end}`;
  const current = existsSync(benchmarksFile) ? readFileSync(benchmarksFile, 'utf8') : header;
  const from = current.indexOf(start);
  const to = current.indexOf(end);
  const next =
    from >= 0 && to > from
      ? `${current.slice(0, from)}${section}${current.slice(to + end.length)}`
      : `${current.trimEnd()}\n\n${section}\n`;
  writeFileSync(benchmarksFile, next);
}
