/**
 * The retry-and-fallback machine over every path of the long chains: 2 and 3 providers under
 * retry-then-fallback (28 305 and 47 968 paths, about 100 s on the shared machine). Same walk and oracle as
 * fallback.graph.test.ts (fallback-walk.ts); part of `npm test`, left out of the mutation group `fallback`
 * (the narrow chains kill the same mutants: docs/testing.md).
 */
import { describe, it } from 'vitest';
import type { FallbackPolicy } from '../../src/actors/types.js';
import type { ErrorClass } from '../../src/errors/index.js';
import { representativeClasses, twoProviderClasses, walkCase } from './fallback-walk.js';

describe('retry-and-fallback machine, over every path of the long chains', () => {
  const cases: [number, FallbackPolicy, string, readonly ErrorClass[], number][] = [
    [2, 'retry-then-fallback', 'one or two classes per policy row', twoProviderClasses, 28305],
    [3, 'retry-then-fallback', 'one class per policy row', representativeClasses, 47968],
  ];

  it.each(cases)(
    '%i provider(s), %s, %s: retries only what the table allows, ends final, accounts for every call',
    { timeout: 900_000 },
    (providers, policy, _label, classes, expectedPaths) =>
      walkCase(providers, policy, classes, expectedPaths),
  );
});
