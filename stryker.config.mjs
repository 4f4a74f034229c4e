// @ts-check
import { readFileSync } from 'node:fs';
/**
 * Mutation testing of the resilience core (`npm run test:mutation`, scripts/mutation.ts; not part
 * of `npm test`). docs/testing.md ("Mutation testing") explains the goal, the groups and the table.
 *
 * The files are mutated in groups, one Stryker process at a time, each group against the tests that
 * judge it (MUTATION_GROUP picks one; without it every group's files against every group's tests).
 * Static mutants (in a machine's config, evaluated at import) re-run the group's whole selection, so
 * a selection that stays small and fast keeps a run under 30 minutes on two shared cores.
 * One group: `MUTATION_GROUP=breaker npx stryker run`; one file: `... npx stryker run --mutate <file>`.
 * @type {Record<string, { mutate: string[]; tests: string[] }>}
 */
/**
 * The classifier part of an adapter file (a Stryker mutation range, lines `from`-`to`): from the
 * first line matching `from` to the closing brace of the function named `classifier`. The adapters'
 * SDK plumbing around it is exercised by the over-the-wire tests, not judged here.
 * @param {string} file
 * @param {RegExp} from
 * @param {string} classifier
 */
function classifierRange(file, from, classifier) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const start = lines.findIndex((line) => from.test(line));
  const declaration = lines.findIndex((line) => line.startsWith(`export function ${classifier}(`));
  const end = lines.findIndex((line, index) => index > declaration && line === '}');
  if (start === -1 || declaration === -1 || end === -1)
    throw new Error(`${file}: no ${classifier} to mutate`);
  return `${file}:${start + 1}-${end + 1}`;
}

export const mutationGroups = {
  errors: {
    mutate: ['src/errors/**/*.ts', '!src/errors/index.ts', '!src/errors/failure-verdict.ts'],
    tests: [
      'test/core/validation-reasons.test.ts',
      'test/core/error-table.test.ts',
      'test/core/failure-verdict.test.ts',
      'test/core/breaker.test.ts',
      'test/core/fallback.behaviour.test.ts',
      'test/core/provider.graph.test.ts',
      'test/core/gateway.test.ts',
      'test/core/breaker.graph.test.ts',
      'test/providers/raw-failures.test.ts',
    ],
  },
  breaker: {
    mutate: ['src/machines/breaker*.ts', 'src/machines/recovery-rule.ts'],
    tests: [
      'test/core/breaker.rules.test.ts',
      'test/core/breaker.test.ts',
      'test/core/breaker.fleet-sync.test.ts',
      'test/core/breaker-open-period.graph.test.ts',
      'test/core/breaker-quorum.graph.test.ts',
      'test/core/breaker.graph.test.ts',
      'test/fleet/breaker.fleet-graph.test.ts',
      'test/core/provider.behaviour.test.ts',
      'test/core/provider.graph.test.ts',
      'test/core/gateway.test.ts',
    ],
  },
  provider: {
    mutate: [
      'src/machines/provider*.ts',
      'src/machines/gateway*.ts',
      'src/machines/fleet-link*.ts',
      'src/machines/attempt*.ts',
    ],
    tests: [
      'test/core/provider.lifecycle.test.ts',
      'test/core/provider.keys.test.ts',
      'test/core/attempt.graph.test.ts',
      'test/core/provider.behaviour.test.ts',
      'test/core/fallback.behaviour.test.ts',
      'test/core/provider.graph.test.ts',
      'test/core/gateway.test.ts',
    ],
  },
  fallback: {
    mutate: ['src/machines/fallback*.ts'],
    tests: [
      'test/core/fallback.rules.test.ts',
      'test/core/fallback.actor.test.ts',
      'test/core/mid-stream.graph.test.ts',
      'test/core/fallback.behaviour.test.ts',
      'test/core/fallback.graph.test.ts',
      'test/core/gateway.test.ts',
    ],
  },
  keys: {
    mutate: ['src/machines/key-*.ts'],
    tests: [
      'test/core/key-health.rules.test.ts',
      'test/core/key-book.test.ts',
      'test/core/key-health.graph.test.ts',
    ],
  },
  verdict: {
    mutate: ['src/machines/failure-verdict.ts'],
    tests: ['test/core/failure-verdict.test.ts', 'test/core/gateway.test.ts'],
  },
  job: {
    mutate: ['src/machines/job*.ts'],
    tests: ['test/jobs/job.rules.test.ts', 'test/jobs/job-machine.test.ts'],
  },
  timelygpt: {
    mutate: ['src/machines/timelygpt*.ts', 'src/providers/timelygpt/classify.ts'],
    tests: [
      'test/providers/timelygpt-session.graph.test.ts',
      'test/providers/timelygpt.test.ts',
      'test/providers/classification-rules.test.ts',
    ],
  },
  classifiers: {
    mutate: [
      'src/providers/classify-common.ts',
      classifierRange('src/providers/claude.ts', /^const spendLimitCodes/, 'classifyClaudeError'),
      classifierRange('src/providers/gpt.ts', /^function isQuotaCode/, 'classifyGptError'),
    ],
    tests: [
      'test/providers/classification-rules.test.ts',
      'test/providers/claude.classification.test.ts',
      'test/providers/gpt.classification.test.ts',
      'test/providers/raw-failures.test.ts',
      // The in-band errors of a stream (an APIError without a status), over the wire.
      'test/providers/streaming.test.ts',
    ],
  },
};

/** Machines this table does not name yet (a new or moved machine): every group's tests judge them. */
const named = Object.values(mutationGroups).flatMap((group) =>
  group.mutate.filter((glob) => !glob.startsWith('!')),
);
const others = { mutate: ['src/machines/**/*.ts', ...named.map((glob) => `!${glob}`)], tests: [] };

const groupName = process.env.MUTATION_GROUP;
const group =
  groupName === undefined
    ? {
        mutate: [...new Set(Object.values(mutationGroups).flatMap((g) => g.mutate)), 'src/machines/**/*.ts'],
        tests: [...new Set(Object.values(mutationGroups).flatMap((g) => g.tests))],
      }
    : groupName === 'others'
      ? { ...others, tests: [...new Set(Object.values(mutationGroups).flatMap((g) => g.tests))] }
      : mutationGroups[groupName];
if (group === undefined) throw new Error(`MUTATION_GROUP ${groupName}: no such group`);
// Read by vitest.mutation.config.ts in the test runner processes (forked with this environment).
process.env.MUTATION_TESTS = group.tests.join(',');
const reportDir = `reports/mutation/${groupName ?? 'all'}`;

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
const config = {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts', related: false },
  coverageAnalysis: 'perTest',
  mutate: group.mutate,
  // The machine is shared (2 cores, several sessions): two test processes at most.
  concurrency: 2,
  timeoutMS: 10_000,
  incremental: true,
  incrementalFile: `${reportDir}/stryker-incremental.json`,
  reporters: ['html', 'json', 'clear-text', 'progress'],
  htmlReporter: { fileName: `${reportDir}/mutation.html` },
  jsonReporter: { fileName: `${reportDir}/mutation.json` },
  clearTextReporter: { reportMutants: false, reportTests: false },
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
  thresholds: { high: 90, low: 80, break: null },
};

export default config;
