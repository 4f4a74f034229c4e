/**
 * The error taxonomy of ../shared/ERRORS.md as one discriminated union and one policy table.
 * Every failed provider call is classified into exactly one class before anything else sees it;
 * the breaker, the retry policy and the fallback policy read only the class (and this table).
 */

/** Failures caused by the provider: the only ones that count toward its breaker. */
export const countedErrorClasses = ['server_error', 'overloaded', 'timeout', 'connection'] as const;
export type CountedErrorClass = (typeof countedErrorClasses)[number];

/** Failures that are the user's state (their key, their quota, their request) or nobody's. */
export const ignoredErrorClasses = [
  'auth',
  'permission',
  'quota_exhausted',
  'rate_limited',
  'bad_request',
  'context_too_long',
  'not_found',
  'aborted',
  'invalid_output',
  'circuit_open',
] as const;
export type IgnoredErrorClass = (typeof ignoredErrorClasses)[number];

export const errorClasses = [...countedErrorClasses, ...ignoredErrorClasses] as const;
export type ErrorClass = CountedErrorClass | IgnoredErrorClass;

/** What a class does. `retry: 'once'` is the single re-ask after `invalid_output`. */
export interface ErrorPolicy {
  readonly countsTowardBreaker: boolean;
  readonly retry: 'no' | 'yes' | 'once';
  readonly fallback: boolean;
}

/** ERRORS.md's B / R / F columns, as data. Nothing else in the code decides these. */
export const errorPolicy: Readonly<Record<ErrorClass, ErrorPolicy>> = {
  auth: { countsTowardBreaker: false, retry: 'no', fallback: true },
  permission: { countsTowardBreaker: false, retry: 'no', fallback: true },
  quota_exhausted: { countsTowardBreaker: false, retry: 'no', fallback: true },
  rate_limited: { countsTowardBreaker: false, retry: 'no', fallback: true },
  bad_request: { countsTowardBreaker: false, retry: 'no', fallback: false },
  context_too_long: { countsTowardBreaker: false, retry: 'no', fallback: true },
  not_found: { countsTowardBreaker: false, retry: 'no', fallback: true },
  server_error: { countsTowardBreaker: true, retry: 'yes', fallback: true },
  overloaded: { countsTowardBreaker: true, retry: 'yes', fallback: true },
  timeout: { countsTowardBreaker: true, retry: 'yes', fallback: true },
  connection: { countsTowardBreaker: true, retry: 'yes', fallback: true },
  aborted: { countsTowardBreaker: false, retry: 'no', fallback: false },
  invalid_output: { countsTowardBreaker: false, retry: 'once', fallback: true },
  circuit_open: { countsTowardBreaker: false, retry: 'no', fallback: true },
};

export function isCountedErrorClass(errorClass: ErrorClass): errorClass is CountedErrorClass {
  return errorPolicy[errorClass].countsTowardBreaker;
}

/**
 * A classified provider failure. `message` is already scrubbed of anything key-like.
 * `retryAfterMs` keeps the upstream's `retry-after` / `retry-after-ms` when it gave one.
 */
export interface ProviderFailure {
  readonly errorClass: ErrorClass;
  readonly message: string;
  readonly httpStatus?: number;
  readonly retryAfterMs?: number;
  /** Validation errors of an `invalid_output`, fed back to the model in the re-ask. */
  readonly validationErrors?: readonly string[];
}
