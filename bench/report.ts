/**
 * Shared by every bench/*.bench.ts: the machine a figure was measured on, simple statistics, and
 * writing one bench's own section of docs/benchmarks.md (between its markers) without touching the
 * sections other benches own.
 */
import { execFileSync } from 'node:child_process';
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

/**
 * The commit the figures were measured on ("e4726f0", "e4726f0+changes" when the work tree differs from it),
 * or "unknown commit" outside a git checkout.
 */
export function codeVersion(): string {
  try {
    const git = (...args: string[]): string => execFileSync('git', args, { encoding: 'utf8' }).trim();
    const commit = git('rev-parse', '--short', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no') === '' ? commit : `${commit}+changes`;
  } catch {
    return 'unknown commit';
  }
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

What each bench measures, its latest results and the goals it guards: \`npm run bench -- <name>\` runs one and
rewrites its section (\`npm run bench\` runs all). Each section's first line says when,
under what load average (start → end) and where; on 2 shared CPUs the benches alternate variants per round and
report medians, so compare ratios within a run, not across runs. What the figures mean: [performance.md](performance.md).
`;

/**
 * A section should fit on one screen: a heading, one line of context, one results table, its goals.
 * Longer sections are still written, with a warning, so a bench's analysis goes to docs/performance.md.
 */
const sectionLineBudget = 24;

/** Replaces (or appends) the section of \`name\` in docs/benchmarks.md. */
export function writeBenchmarkSection(name: string, markdown: string): void {
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  const section = `${start}\n${markdown.trimEnd()}\n${end}`;
  const lines = markdown.trimEnd().split('\n').length;
  if (lines > sectionLineBudget) {
    process.stderr.write(
      `bench ${name}: its section is ${lines} lines (budget ${sectionLineBudget}); keep one table and its goals\n`,
    );
  }
  const current = existsSync(benchmarksFile) ? readFileSync(benchmarksFile, 'utf8') : header;
  const from = current.indexOf(start);
  const to = current.indexOf(end);
  const next =
    from >= 0 && to > from
      ? `${current.slice(0, from)}${section}${current.slice(to + end.length)}`
      : `${current.trimEnd()}\n\n${section}\n`;
  writeFileSync(benchmarksFile, next);
}

/** One goal a bench guards, as it is judged in this run. */
export interface BenchGoal {
  /** The rule, e.g. "B/A ≥ 0.90 at 50 connections, upstream 50 ms". */
  readonly rule: string;
  readonly met: boolean;
  /** What this run measured against it, e.g. "0.99×". */
  readonly measured: string;
}

/** A bench's section of docs/benchmarks.md in the house shape (see {@link renderBenchSection}). */
export interface BenchSection {
  /** The bench's name: \`npm run bench -- <name>\`. */
  readonly bench: string;
  readonly title: string;
  /** The bench's settings worth repeating, e.g. "\`BENCH_ROUNDS\`=15". */
  readonly settings?: string;
  /** The load average when the run started ({@link loadAverage}); the end's is read when rendering. */
  readonly loadAtStart?: string;
  /** One sentence: what was measured and how to read the table. */
  readonly measures: string;
  /** The results table: its header, then its rows; every column after the first is right-aligned. */
  readonly columns: readonly string[];
  readonly rows: ReadonlyArray<ReadonlyArray<string | number>>;
  readonly goals?: readonly BenchGoal[];
  /** At most one more line, e.g. an image or what limits the figures. */
  readonly note?: string;
}

/** The run's context in one line: command, date, commit, load, machine. */
export function runContext(bench: string, settings?: string, loadAtStart?: string): string {
  const measured = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const load = loadAtStart === undefined ? loadAverage() : `${loadAtStart} → ${loadAverage()}`;
  const command = `\`npm run bench -- ${bench}\`${settings === undefined ? '' : ` (${settings})`}`;
  return `${command} · ${measured} UTC · commit ${codeVersion()} · load ${load} · ${machineInfo()}`;
}

/** A markdown table; every column after the first right-aligned. */
function markdownTable(
  columns: readonly string[],
  rows: ReadonlyArray<ReadonlyArray<string | number>>,
): string {
  const line = (cells: ReadonlyArray<string | number>): string => `| ${cells.join(' | ')} |`;
  const align = columns.map((_, index) => (index === 0 ? '---' : '---:'));
  return [line(columns), line(align), ...rows.map(line)].join('\n');
}

/** The section's markdown: heading, context line, what it measures, the table, the goals. */
export function renderBenchSection(section: BenchSection): string {
  const goals = (section.goals ?? []).map(
    (goal) => `- ${goal.rule} — **${goal.met ? 'met' : 'missed'}** (${goal.measured})`,
  );
  return [
    `## ${section.title}`,
    runContext(section.bench, section.settings, section.loadAtStart),
    section.measures,
    '',
    markdownTable(section.columns, section.rows),
    ...(goals.length > 0 ? ['', ...goals] : []),
    ...(section.note === undefined ? [] : ['', section.note]),
  ].join('\n');
}

/** Renders \`section\` and writes it between its bench's markers; returns the markdown. */
export function writeBenchSection(section: BenchSection): string {
  const markdown = renderBenchSection(section);
  writeBenchmarkSection(section.bench, markdown);
  return markdown;
}
