/**
 * The bench children run as compiled JavaScript, as `npm start` runs the service: under tsx the
 * service's heap is ~60 MiB larger (tsx keeps the transformed sources of big dependencies such as
 * pdf-parse in memory) and errors pay for source maps, which would misstate RSS and CPU.
 * src/ and bench/support/ are compiled with tsc into dist/bench-build/ once per change (a stamp of
 * the newest source modification time), so the second bench of a run reuses the build.
 * BENCH_TSX=1 runs the children under tsx instead.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const supportDirectory = fileURLToPath(new URL('.', import.meta.url));
const root = resolve(supportDirectory, '..', '..');
export const buildDirectory = join(root, 'dist', 'bench-build');
const stampFile = join(buildDirectory, '.stamp');

function newestModification(directory: string): number {
  let newest = 0;
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestModification(path));
    else if (entry.name.endsWith('.ts') || entry.name.endsWith('.json')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

let compiled: boolean | undefined;

/** True when the children can run from dist/bench-build (compiling first if the sources changed). */
export function ensureCompiled(): boolean {
  if (compiled !== undefined) return compiled;
  if (process.env.BENCH_TSX === '1') return (compiled = false);
  const stamp = String(Math.max(newestModification(join(root, 'src')), newestModification(supportDirectory)));
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return (compiled = true);
  process.stdout.write('compiling src/ and bench/support/ into dist/bench-build (tsc) …\n');
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  // Type errors in files still being written elsewhere do not stop the emit; a missing output does.
  spawnSync(process.execPath, [tsc, '-p', join(supportDirectory, 'tsconfig.children.json')], { stdio: 'ignore' });
  compiled = existsSync(join(buildDirectory, 'bench', 'support', 'service.child.js'));
  if (compiled) writeFileSync(stampFile, stamp);
  else process.stdout.write('tsc produced no build: the children run under tsx (heap and CPU figures include tsx)\n');
  return compiled;
}

/** The file to fork for `entry` (a .ts name under bench/support) and the exec arguments it needs. */
export function childEntry(entry: string): { file: string; execArgv: string[] } {
  if (ensureCompiled()) return { file: join(buildDirectory, 'bench', 'support', entry.replace(/\.ts$/, '.js')), execArgv: [] };
  return { file: join(supportDirectory, entry), execArgv: ['--import', 'tsx'] };
}
