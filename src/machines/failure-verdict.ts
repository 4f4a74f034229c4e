import type { ErrorClass } from '../errors/index.js';
import { isCountedErrorClass } from '../errors/index.js';
import type { Attempt } from '../actors/types.js';

/** How a run where every provider failed is answered (API.md "When every provider fails"). */
export interface FailureVerdict {
  readonly httpStatus: number;
  readonly code: string;
  readonly message: string;
  readonly retryAfterSeconds?: number;
}

const verdictByClass: Readonly<Record<ErrorClass, Omit<FailureVerdict, 'retryAfterSeconds'>>> = {
  auth: { httpStatus: 401, code: 'PROVIDER_AUTH_FAILED', message: 'The provider refused the API key.' },
  permission: {
    httpStatus: 403,
    code: 'PROVIDER_PERMISSION_DENIED',
    message: 'The API key is not permitted to use this model or region.',
  },
  quota_exhausted: {
    httpStatus: 402,
    code: 'PROVIDER_QUOTA_EXHAUSTED',
    message: 'The API key has no credit or has reached its spend limit.',
  },
  rate_limited: { httpStatus: 429, code: 'PROVIDER_RATE_LIMITED', message: 'The API key is rate limited.' },
  context_too_long: {
    httpStatus: 413,
    code: 'DOCUMENT_TOO_LONG',
    message: 'The document is too long for the model.',
  },
  invalid_output: {
    httpStatus: 502,
    code: 'INVALID_PROVIDER_OUTPUT',
    message: 'The model answered, but its output failed validation.',
  },
  bad_request: {
    httpStatus: 400,
    code: 'PROVIDER_BAD_REQUEST',
    message: 'The provider refused the request as malformed.',
  },
  not_found: {
    httpStatus: 404,
    code: 'PROVIDER_MODEL_NOT_FOUND',
    message: 'The provider does not know the model.',
  },
  aborted: { httpStatus: 499, code: 'REQUEST_ABORTED', message: 'The request was cancelled.' },
  server_error: { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE', message: 'No provider could answer.' },
  overloaded: { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE', message: 'No provider could answer.' },
  timeout: { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE', message: 'No provider could answer.' },
  connection: { httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE', message: 'No provider could answer.' },
  circuit_open: {
    httpStatus: 503,
    code: 'PROVIDERS_UNAVAILABLE',
    message: 'Every provider is unavailable (circuit open).',
  },
};

/** The class an attempt stands for; a skip is `circuit_open`. */
function classOf(attempt: Attempt): ErrorClass {
  return attempt.errorClass ?? 'circuit_open';
}

/**
 * API.md's table: one class everywhere → its row; any provider-side class or an open circuit in the
 * mix → 503; any other mix → the first provider's class. `retryAfterMs` are the hints known
 * (upstream `retry-after`, time to the earliest half-open), of which the earliest is answered.
 */
export function failureVerdict(
  attempts: readonly Attempt[],
  retryAfterMs: readonly number[],
): FailureVerdict {
  const failed = attempts.filter((attempt) => attempt.outcome !== 'succeeded');
  const classes = failed.map(classOf);
  const first = classes[0] ?? 'circuit_open';
  const uniform = classes.every((errorClass) => errorClass === first);
  const providerSide = classes.some(
    (errorClass) => errorClass === 'circuit_open' || isCountedErrorClass(errorClass),
  );
  const base = uniform
    ? verdictByClass[first]
    : providerSide
      ? verdictByClass.server_error
      : verdictByClass[first];
  const hints = retryAfterMs.filter((ms) => Number.isFinite(ms) && ms > 0);
  const retryAfterSeconds = hints.length > 0 ? Math.max(1, Math.ceil(Math.min(...hints) / 1000)) : undefined;
  const answersRetryAfter = base.httpStatus === 429 || base.httpStatus === 503;
  return answersRetryAfter && retryAfterSeconds !== undefined ? { ...base, retryAfterSeconds } : base;
}
