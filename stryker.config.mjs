// @ts-check
/**
 * Mutation testing of the resilience core (`npm run test:mutation`; not part of `npm test`).
 * docs/testing.md ("Mutation testing") explains the selection, the goal and the last table.
 * One file or folder at a time: `npm run test:mutation -- --mutate src/machines/breaker.machine.ts`.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
const config = {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts', related: false },
  coverageAnalysis: 'perTest',
  mutate: [
    'src/machines/**/*.ts',
    'src/errors/**/*.ts',
    'src/providers/classify-common.ts',
    'src/providers/claude.ts',
    'src/providers/gpt.ts',
    'src/providers/timelygpt/classify.ts',
    '!src/**/index.ts',
  ],
  // The machine is shared (2 cores, several sessions): one or two test processes at a time.
  concurrency: 2,
  timeoutMS: 20_000,
  incremental: true,
  incrementalFile: 'reports/mutation/stryker-incremental.json',
  reporters: ['html', 'json', 'clear-text', 'progress'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  clearTextReporter: { reportMutants: false, reportTests: false },
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
  thresholds: { high: 90, low: 80, break: null },
};

export default config;
