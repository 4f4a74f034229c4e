import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Attempt } from '../../src/actors/types.js';
import { errorClasses, type ErrorClass } from '../../src/errors/index.js';
import { errorCodes } from '../../src/http/errors.js';
import { failureVerdict } from '../../src/machines/failure-verdict.js';
import { providerIds, type ProviderId } from '../../src/machines/types.js';

function attempt(provider: ProviderId, errorClass: ErrorClass): Attempt {
  if (errorClass === 'circuit_open') {
    return {
      provider,
      model: `${provider}-model`,
      outcome: 'skipped',
      errorClass,
      reason: 'circuit_open',
      countedByBreaker: false,
      retry: 0,
      durationMs: 0,
    };
  }
  return {
    provider,
    model: `${provider}-model`,
    outcome: 'failed',
    errorClass,
    countedByBreaker: false,
    retry: 0,
    durationMs: 5,
  };
}

/** One attempt per provider, in chain order. */
function run(...classes: ErrorClass[]): Attempt[] {
  return classes.map((errorClass, index) =>
    attempt(providerIds[index % providerIds.length] ?? 'claude', errorClass),
  );
}

/** docs/api.md "When every provider fails", row by row. */
describe('failure verdict: docs/api.md table rows', () => {
  it.each<[string, Attempt[], number[], { httpStatus: number; code: string; retryAfterSeconds?: number }]>([
    [
      'every attempt auth',
      run('auth', 'auth', 'auth'),
      [],
      { httpStatus: 401, code: 'PROVIDER_AUTH_FAILED' },
    ],
    [
      'every attempt permission',
      run('permission', 'permission'),
      [],
      { httpStatus: 403, code: 'PROVIDER_PERMISSION_DENIED' },
    ],
    [
      'every attempt quota_exhausted',
      run('quota_exhausted'),
      [],
      { httpStatus: 402, code: 'PROVIDER_QUOTA_EXHAUSTED' },
    ],
    [
      'every attempt rate_limited (+ Retry-After, rounded up)',
      run('rate_limited', 'rate_limited'),
      [7000, 3001],
      { httpStatus: 429, code: 'PROVIDER_RATE_LIMITED', retryAfterSeconds: 4 },
    ],
    [
      'every attempt rate_limited, no hint',
      run('rate_limited'),
      [],
      { httpStatus: 429, code: 'PROVIDER_RATE_LIMITED' },
    ],
    [
      'every attempt context_too_long',
      run('context_too_long', 'context_too_long'),
      [],
      { httpStatus: 413, code: 'DOCUMENT_TOO_LONG' },
    ],
    [
      'every attempt invalid_output',
      run('invalid_output', 'invalid_output'),
      [],
      { httpStatus: 502, code: 'INVALID_PROVIDER_OUTPUT' },
    ],
    [
      'every provider skipped with circuit_open (+ seconds to the earliest half-open)',
      run('circuit_open', 'circuit_open', 'circuit_open'),
      [42_000, 12_500, 60_000],
      { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE', retryAfterSeconds: 13 },
    ],
    [
      'a server_error in the mix',
      run('auth', 'server_error'),
      [],
      { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
    ],
    [
      'an overloaded in the mix',
      run('overloaded', 'rate_limited'),
      [],
      { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
    ],
    [
      'a timeout in the mix',
      run('quota_exhausted', 'invalid_output', 'timeout'),
      [],
      { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
    ],
    [
      'a connection in the mix',
      run('permission', 'connection'),
      [],
      { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
    ],
    [
      'a circuit_open in the mix',
      run('auth', 'circuit_open'),
      [],
      { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
    ],
    [
      'every attempt provider-side',
      run('server_error', 'timeout'),
      [],
      { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
    ],
    [
      'any other mix: the first provider is auth',
      run('auth', 'rate_limited'),
      [],
      { httpStatus: 401, code: 'PROVIDER_AUTH_FAILED' },
    ],
    [
      'any other mix: the first provider is rate_limited',
      run('rate_limited', 'quota_exhausted'),
      [5000],
      { httpStatus: 429, code: 'PROVIDER_RATE_LIMITED', retryAfterSeconds: 5 },
    ],
    [
      'any other mix: the first provider is invalid_output',
      run('invalid_output', 'auth'),
      [],
      { httpStatus: 502, code: 'INVALID_PROVIDER_OUTPUT' },
    ],
    [
      'any other mix: the first provider is bad_request',
      run('bad_request'),
      [],
      { httpStatus: 400, code: 'PROVIDER_BAD_REQUEST' },
    ],
    [
      'any other mix: the first provider is not_found',
      run('not_found', 'auth'),
      [],
      { httpStatus: 404, code: 'PROVIDER_MODEL_NOT_FOUND' },
    ],
  ])('%s', (_row, attempts, hints, expected) => {
    const verdict = failureVerdict(attempts, hints);
    expect(verdict).toMatchObject(expected);
    if (expected.retryAfterSeconds === undefined) expect(verdict.retryAfterSeconds).toBeUndefined();
  });

  it('never answers Retry-After on a status other than 429 or 503', () => {
    expect(failureVerdict(run('auth', 'auth'), [9000]).retryAfterSeconds).toBeUndefined();
  });

  it('answers at least 1 second for a sub-second hint', () => {
    expect(failureVerdict(run('rate_limited'), [200]).retryAfterSeconds).toBe(1);
  });
});

// ---- An oracle written from the table's text alone, not from the implementation. ----

const providerSide: ReadonlySet<ErrorClass> = new Set([
  'server_error',
  'overloaded',
  'timeout',
  'connection',
  'circuit_open',
]);

/** Status and code per class: the table's "every attempt X" rows, and the registry for the rest. */
const rowOf: Readonly<Record<ErrorClass, { httpStatus: number; code: string }>> = {
  auth: { httpStatus: 401, code: 'PROVIDER_AUTH_FAILED' },
  permission: { httpStatus: 403, code: 'PROVIDER_PERMISSION_DENIED' },
  quota_exhausted: { httpStatus: 402, code: 'PROVIDER_QUOTA_EXHAUSTED' },
  rate_limited: { httpStatus: 429, code: 'PROVIDER_RATE_LIMITED' },
  context_too_long: { httpStatus: 413, code: 'DOCUMENT_TOO_LONG' },
  invalid_output: { httpStatus: 502, code: 'INVALID_PROVIDER_OUTPUT' },
  bad_request: { httpStatus: 400, code: 'PROVIDER_BAD_REQUEST' },
  not_found: { httpStatus: 404, code: 'PROVIDER_MODEL_NOT_FOUND' },
  aborted: { httpStatus: 499, code: 'REQUEST_ABORTED' },
  server_error: { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
  overloaded: { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
  timeout: { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
  connection: { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
  circuit_open: { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE' },
};

function oracle(
  attempts: readonly Attempt[],
  hints: readonly number[],
): { httpStatus: number; code: string; retryAfterSeconds?: number } {
  const classes = attempts
    .filter((a) => a.outcome !== 'succeeded')
    .map((a): ErrorClass => (a.outcome === 'skipped' ? 'circuit_open' : (a.errorClass ?? 'circuit_open')));
  let row: { httpStatus: number; code: string };
  if (classes.length === 0) row = rowOf.circuit_open;
  else if (classes.some((c) => providerSide.has(c))) row = rowOf.server_error;
  else row = rowOf[classes[0] as ErrorClass];
  const known = hints.filter((ms) => ms > 0 && Number.isFinite(ms));
  if ((row.httpStatus === 429 || row.httpStatus === 503) && known.length > 0) {
    return { ...row, retryAfterSeconds: Math.max(1, Math.ceil(Math.min(...known) / 1000)) };
  }
  return row;
}

const attemptArbitrary = fc
  .record({
    provider: fc.constantFrom(...providerIds),
    errorClass: fc.constantFrom(...errorClasses),
    retry: fc.nat({ max: 3 }),
  })
  .map(({ provider, errorClass, retry }) => ({ ...attempt(provider, errorClass), retry }));

describe('failure verdict: property against the table oracle', () => {
  it('agrees with the oracle on every run of failed and skipped attempts', () => {
    fc.assert(
      fc.property(
        fc.array(attemptArbitrary, { minLength: 1, maxLength: 8 }),
        fc.array(
          fc.oneof(fc.integer({ min: -1000, max: 120_000 }), fc.constant(Number.NaN), fc.constant(Infinity)),
          {
            maxLength: 4,
          },
        ),
        (attempts, hints) => {
          const verdict = failureVerdict(attempts, hints);
          const expected = oracle(attempts, hints);
          expect({
            httpStatus: verdict.httpStatus,
            code: verdict.code,
            retryAfterSeconds: verdict.retryAfterSeconds,
          }).toEqual({
            retryAfterSeconds: undefined,
            ...expected,
          });
          expect(errorCodes[verdict.code as keyof typeof errorCodes]?.status).toBe(verdict.httpStatus);
          expect(verdict.message.length).toBeGreaterThan(0);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('answers a uniform run with its own row, whichever class it is', () => {
    fc.assert(
      fc.property(fc.constantFrom(...errorClasses), fc.integer({ min: 1, max: 6 }), (errorClass, count) => {
        const verdict = failureVerdict(run(...Array.from({ length: count }, () => errorClass)), []);
        expect({ httpStatus: verdict.httpStatus, code: verdict.code }).toEqual(rowOf[errorClass]);
      }),
    );
  });
});

/** An attempt whose answer failed validation, with the attempt message the provider actor writes. */
function invalid(provider: ProviderId, message: string | undefined): Attempt {
  return { ...attempt(provider, 'invalid_output'), ...(message === undefined ? {} : { message }) };
}

const invalidBase = 'The model answered, but its output failed validation.';

describe('failure verdict: the messages, written out', () => {
  it.each<[string, Attempt[], string]>([
    ['every attempt auth', run('auth'), 'The provider refused the API key.'],
    ['every attempt rate_limited', run('rate_limited', 'rate_limited'), 'The API key is rate limited.'],
    ['every provider skipped', run('circuit_open', 'circuit_open'), 'Every provider is unavailable (circuit open).'],
    ['a provider-side class in a mix', run('auth', 'timeout'), 'No provider could answer.'],
    ['an open circuit in a mix', run('circuit_open', 'auth'), 'No provider could answer.'],
    ['every attempt invalid_output, no reasons', run('invalid_output', 'invalid_output'), invalidBase],
  ])('%s', (_row, attempts, message) => {
    expect(failureVerdict(attempts, []).message).toBe(message);
  });

  it("names each provider's validation reasons after the 502's message, in chain order", () => {
    const verdict = failureVerdict(
      [
        invalid('claude', 'The output failed validation: questions[0].answer is missing'),
        invalid('gpt', 'The output failed validation: not JSON; too few questions'),
      ],
      [],
    );
    expect(verdict.message).toBe(
      `${invalidBase} claude: questions[0].answer is missing | gpt: not JSON; too few questions`,
    );
  });

  it("keeps a provider's last reasons when it was asked again", () => {
    const verdict = failureVerdict(
      [invalid('claude', 'The output failed validation: first'), invalid('claude', 'The output failed validation: second')],
      [],
    );
    expect(verdict.message).toBe(`${invalidBase} claude: second`);
  });

  it('names no reasons of an attempt that is not invalid_output, nor of one without reasons', () => {
    const verdict = failureVerdict(
      [
        invalid('claude', 'The output failed validation.'),
        invalid('gpt', undefined),
        { ...attempt('timelygpt', 'auth'), message: 'The output failed validation: not a reason' },
      ],
      [],
    );
    expect(verdict.message).toBe(invalidBase);
  });

  it('caps the reasons at 960 characters (twice one summary), ending in an ellipsis', () => {
    const long = 'r'.repeat(480);
    const verdict = failureVerdict(
      providerIds.map((provider) => invalid(provider, `The output failed validation: ${long}`)),
      [],
    );
    const reasons = verdict.message.slice(invalidBase.length + 1);
    expect(verdict.message.startsWith(`${invalidBase} claude: rrr`)).toBe(true);
    expect(reasons).toHaveLength(960);
    expect(reasons.endsWith('r…')).toBe(true);
  });

  it('answers no Retry-After for a zero, negative, NaN or infinite hint', () => {
    for (const hint of [0, -5, Number.NaN, Infinity]) {
      expect(failureVerdict(run('rate_limited'), [hint]).retryAfterSeconds).toBeUndefined();
    }
    expect(failureVerdict(run('circuit_open'), [Infinity, 1500]).retryAfterSeconds).toBe(2);
  });

  it('answers an empty run (no attempt at all) as every provider skipped, with no Retry-After field', () => {
    expect(failureVerdict([], [])).toStrictEqual({
      httpStatus: 503,
      code: 'PROVIDERS_UNAVAILABLE',
      message: 'Every provider is unavailable (circuit open).',
    });
  });
});

describe('failure verdict: what it reads', () => {
  it('judges only the attempts that did not succeed', () => {
    const answered: Attempt = { provider: 'claude', model: 'claude-model', outcome: 'succeeded', countedByBreaker: false, retry: 0, durationMs: 5 };
    expect(failureVerdict([answered, attempt('gpt', 'auth')], [])).toMatchObject({ httpStatus: 401, code: 'PROVIDER_AUTH_FAILED' });
  });

  it('adds validation reasons to the 502 only, never to another answer', () => {
    const verdict = failureVerdict([attempt('claude', 'auth'), invalid('gpt', 'The output failed validation: not JSON')], []);
    expect(verdict).toStrictEqual({ httpStatus: 401, code: 'PROVIDER_AUTH_FAILED', message: 'The provider refused the API key.' });
  });
});
