import { defineConfig } from 'vitest/config';

/**
 * The tests Stryker runs against each mutant (stryker.config.mjs): the ones that judge the mutated
 * files (machines, error table, classifiers, failure verdict), without the HTTP, documents and
 * multi-process suites, so one run stays under 30 minutes on two cores.
 */
export default defineConfig({
  test: {
    include: [
      'test/core/**/*.test.ts',
      'test/providers/**/*.test.ts',
      'test/jobs/job-machine.test.ts',
      'test/fleet/conformance.test.ts',
      'test/fleet/breaker-script.test.ts',
    ],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
