import type { RunnerTestCase, RunnerTestFile } from 'vitest';
import type { Reporter, Vitest } from 'vitest/node';

/**
 * Counts a test file that fails to load as one failed test, for Stryker (vitest.mutation.config.ts).
 *
 * Stryker's vitest runner (9.6.1 through 10.1) builds a mutant's result from the tests vitest
 * collected, and a file whose import throws collects none, so a mutant that stops a module from
 * loading is reported as survived (stryker-js#6150). A machine's config is evaluated at import:
 * `initial: ''`, a target or a state emptied makes `createMachine` throw, and every test file that
 * imports the machine fails — a mutant the tests do catch. This reporter runs before the runner
 * reads the results (vitest awaits `onTestRunEnd`) and gives each such file one failed test that
 * carries its load error. A file that loaded is left as it is.
 */
export class UnloadableFileAsFailedTest implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(): void {
    for (const file of this.vitest?.state.getFiles() ?? []) {
      if (file.result?.state !== 'fail' || file.tasks.length > 0) continue;
      file.tasks.push(loadFailure(file));
    }
  }
}

function loadFailure(file: RunnerTestFile): RunnerTestCase {
  const test: Omit<RunnerTestCase, 'context'> = {
    type: 'test',
    id: `${file.id}_load`,
    name: 'the file loads',
    fullName: `${file.name} > the file loads`,
    fullTestName: 'the file loads',
    mode: 'run',
    meta: {},
    file,
    suite: file,
    timeout: 0,
    annotations: [],
    artifacts: [],
    benchmarks: [],
    result: { state: 'fail', errors: file.result?.errors ?? [] },
  };
  // The test context is built by vitest's runner for a test it runs; nothing reads it once the run
  // has finished, and this test never ran.
  return test as RunnerTestCase;
}
