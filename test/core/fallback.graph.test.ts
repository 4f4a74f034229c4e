/**
 * The retry-and-fallback machine over every path of the narrow chains (one provider, every
 * fallback-first chain, two providers retried then fallen back with one class per F row), with the kept mutants: the mutation group `fallback` runs this file. The 2- and
 * 3-provider retry-then-fallback chains (76 000 paths, about 100 s here) are in fallback.graph-wide.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { FallbackPolicy } from '../../src/actors/types.js';
import type { ErrorClass } from '../../src/errors/index.js';
import { createFallbackMachine } from '../../src/machines/fallback.machine.js';
import { withRow } from './errors-md.js';
import {
  allUpstreamClasses,
  representativeClasses,
  twoProviderClasses,
  walkAllPaths,
  walkCase,
} from './fallback-walk.js';

describe('retry-and-fallback machine, over every path', () => {
  // The last column pins the number of complete paths explored.
  const cases: [number, FallbackPolicy, string, readonly ErrorClass[], number][] = [
    [1, 'retry-then-fallback', 'every class', allUpstreamClasses, 1227],
    [1, 'fallback-first', 'every class', allUpstreamClasses, 1227],
    [
      2,
      'retry-then-fallback',
      'one class per fallback row',
      ['server_error', 'rate_limited', 'bad_request'],
      1712,
    ],
    [2, 'fallback-first', 'one or two classes per policy row', twoProviderClasses, 1402],
    [3, 'fallback-first', 'one class per policy row', representativeClasses, 975],
  ];

  it.each(cases)(
    '%i provider(s), %s, %s: retries only what the table allows, ends final, accounts for every call',
    { timeout: 900_000 },
    (providers, policy, _label, classes, expectedPaths) =>
      walkCase(providers, policy, classes, expectedPaths),
  );
});

describe('retry-and-fallback machine, kept mutants: a flipped table row turns the walk red', () => {
  it('R: a table that retries auth', () => {
    const mutant = createFallbackMachine(withRow('auth', { retry: 'yes' }));
    expect(() => walkAllPaths(1, 'retry-then-fallback', ['auth'], mutant)).toThrow(/expected/);
  });

  it('R: a table that never retries timeout is caught by the path count', () => {
    const mutant = createFallbackMachine(withRow('timeout', { retry: 'no' }));
    expect(walkAllPaths(1, 'retry-then-fallback', ['timeout'], mutant).paths).not.toBe(
      walkAllPaths(1, 'retry-then-fallback', ['timeout']).paths,
    );
  });

  it('F: a table that falls back after bad_request', () => {
    const mutant = createFallbackMachine(withRow('bad_request', { fallback: true }));
    expect(() => walkAllPaths(2, 'fallback-first', ['bad_request'], mutant)).toThrow(/expected/);
  });

  it('F: a table that does not fall back after rate_limited', () => {
    const mutant = createFallbackMachine(withRow('rate_limited', { fallback: false }));
    expect(() => walkAllPaths(2, 'fallback-first', ['rate_limited'], mutant)).toThrow(/expected/);
  });

  it('API: a table that answers every-auth with 503', () => {
    const mutant = createFallbackMachine(
      withRow('auth', { api: { status: 503, code: 'PROVIDERS_UNAVAILABLE', message: 'mutant' } }),
    );
    expect(() => walkAllPaths(1, 'fallback-first', ['auth'], mutant)).toThrow(/expected/);
  });

  it('B: a table that counts rate_limited makes a mix with it answer 503', () => {
    const mutant = createFallbackMachine(withRow('rate_limited', { breaker: 'counts' }));
    expect(() => walkAllPaths(2, 'fallback-first', ['rate_limited', 'auth'], mutant)).toThrow(/expected/);
  });

  it('the production table walks the same small cases green', () => {
    expect(walkAllPaths(1, 'retry-then-fallback', ['auth', 'timeout']).paths).toBeGreaterThan(0);
    expect(walkAllPaths(2, 'fallback-first', ['bad_request', 'rate_limited', 'auth']).paths).toBeGreaterThan(
      0,
    );
  });
});
