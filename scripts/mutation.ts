/**
 * `npm run test:mutation [-- <group>...]`: Stryker over the resilience core, one group at a time
 * (stryker.config.mjs names the groups, their files and the tests that judge them), never two
 * Stryker processes at once. Then prints the per-file table of docs/benchmarks.md and writes it to
 * reports/mutation/summary.md. `-- --summary` only prints the table of the reports already there;
 * `-- --force` runs each group without reusing earlier results (Stryker's `--force`).
 * Reports (HTML, JSON, incremental state) go to reports/mutation/<group>/, which git ignores.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const reportRoot = join(projectRoot, 'reports', 'mutation');

interface MutantResult {
  readonly status: string;
}

interface MutationReport {
  readonly files: Readonly<Record<string, { readonly mutants: readonly MutantResult[] }>>;
}

/** One row of the table: a mutated file's mutants by outcome. */
export interface FileScore {
  readonly file: string;
  readonly killed: number;
  readonly timedOut: number;
  readonly survived: number;
  readonly noCoverage: number;
  /** Killed or timed out, over every mutant some test ran (Stryker's "score of covered code"). */
  readonly coveredScore: number;
}

/** The table's row for one file of a Stryker JSON report. */
export function scoreOf(file: string, mutants: readonly MutantResult[]): FileScore {
  const count = (status: string) => mutants.filter((mutant) => mutant.status === status).length;
  const killed = count('Killed');
  const timedOut = count('Timeout');
  const survived = count('Survived');
  const covered = killed + timedOut + survived;
  return {
    file,
    killed,
    timedOut,
    survived,
    noCoverage: count('NoCoverage'),
    coveredScore: covered === 0 ? 100 : (100 * (killed + timedOut)) / covered,
  };
}

async function groupNames(): Promise<string[]> {
  const config = (await import(pathToFileURL(join(projectRoot, 'stryker.config.mjs')).href)) as {
    mutationGroups: Record<string, unknown>;
  };
  return [...Object.keys(config.mutationGroups), 'others'];
}

async function table(groups: readonly string[]): Promise<string> {
  const rows: FileScore[] = [];
  for (const group of groups) {
    const path = join(reportRoot, group, 'mutation.json');
    if (!existsSync(path)) continue;
    const report = JSON.parse(await readFile(path, 'utf8')) as MutationReport;
    for (const [file, { mutants }] of Object.entries(report.files)) rows.push(scoreOf(file, mutants));
  }
  rows.sort((a, b) => a.file.localeCompare(b.file));
  const lines = [
    '| file | killed | timed out | survived | no coverage | covered killed |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (row) =>
        `| \`${row.file}\` | ${row.killed} | ${row.timedOut} | ${row.survived} | ${row.noCoverage} | ${row.coveredScore.toFixed(1)} % |`,
    ),
  ];
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const all = await groupNames();
  const summaryOnly = args.includes('--summary');
  const chosen = args.filter((arg) => !arg.startsWith('--'));
  const unknown = chosen.filter((group) => !all.includes(group));
  if (unknown.length > 0)
    throw new Error(`Unknown mutation group(s) ${unknown.join(', ')}; groups: ${all.join(', ')}`);
  const groups = chosen.length > 0 ? chosen : all;
  // `--force` (no reused results: after adding tests, stryker-js#6119) goes on to each Stryker run.
  const strykerArgs = args.includes('--force') ? ['--force'] : [];
  if (!summaryOnly) {
    for (const group of groups) {
      console.log(`\n== mutation group ${group} ==`);
      const started = Date.now();
      const result = spawnSync('npx', ['stryker', 'run', ...strykerArgs], {
        cwd: projectRoot,
        stdio: 'inherit',
        env: { ...process.env, MUTATION_GROUP: group },
      });
      console.log(
        `== ${group}: exit ${String(result.status)} after ${Math.round((Date.now() - started) / 1000)} s ==`,
      );
      if (result.status !== 0) process.exitCode = 1;
    }
  }
  const summary = await table(all);
  await mkdir(reportRoot, { recursive: true });
  await writeFile(join(reportRoot, 'summary.md'), summary);
  console.log(`\n${summary}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
