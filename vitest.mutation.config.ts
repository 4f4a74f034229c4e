import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';
import { UnloadableFileAsFailedTest } from './test/mutation/unloadable-file-reporter.js';

/**
 * The tests Stryker runs against each mutant (stryker.config.mjs sets MUTATION_TESTS to the group's
 * selection, fastest and most direct first). Stryker stops a mutant's run at its first failing test,
 * so the files run in the listed order, not vitest's default (slowest first).
 */
const tests = (process.env.MUTATION_TESTS ?? 'test/core/**/*.test.ts,test/providers/**/*.test.ts')
  .split(',')
  .filter((glob) => glob.length > 0);

function rank(spec: TestSpecification): number {
  const index = tests.findIndex(
    (glob) => spec.moduleId.endsWith(glob) || spec.moduleId.includes(glob.split('*')[0] ?? glob),
  );
  return index === -1 ? tests.length : index;
}

class ListedOrder extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return [...files].sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    include: tests,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    sequence: { sequencer: ListedOrder },
    // A mutant that stops a module from loading fails the files importing it: a kill, not a survivor.
    reporters: ['default', new UnloadableFileAsFailedTest()],
  },
});
