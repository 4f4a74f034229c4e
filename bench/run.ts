/**
 * `npm run bench [-- name ...]`: runs every bench/*.bench.ts in alphabetical order (or only the named
 * ones: `core` or `core.bench.ts`), each in its own Node process so one bench's JIT and heap do not
 * colour the next. Exits non-zero when a bench fails.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const benchDirectory = dirname(fileURLToPath(import.meta.url));
const available = readdirSync(benchDirectory)
  .filter((file) => file.endsWith('.bench.ts'))
  .sort();
const wanted = process.argv.slice(2).map((name) => (name.endsWith('.bench.ts') ? name : `${name}.bench.ts`));
const unknown = wanted.filter((file) => !available.includes(file));
if (unknown.length > 0) {
  process.stderr.write(`Unknown bench: ${unknown.join(', ')} (have: ${available.join(', ')})\n`);
  process.exit(2);
}

let failed = 0;
for (const file of wanted.length > 0 ? wanted : available) {
  process.stdout.write(`\n=== ${file} ===\n`);
  const result = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', join(benchDirectory, file)], {
    stdio: 'inherit',
  });
  if (result.status !== 0) {
    failed += 1;
    process.stderr.write(`${file} failed (exit ${String(result.status ?? result.signal)})\n`);
  }
}
process.exitCode = failed === 0 ? 0 : 1;
