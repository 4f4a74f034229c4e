/**
 * The error taxonomy of docs/errors.md as ONE typed table: for each class what the breaker, the
 * retry policy and the fallback policy do, and what the HTTP API answers when every attempt ended in it
 * (docs/api.md "When every provider fails"). Everything else — the counted/ignored class types, the failure
 * verdict, the HTTP registry's statuses, the fleet's Lua script — is derived from this table, so changing
 * a row (say, "429 counts") is a one-line change that every layer follows.
 */

/** What the API answers for a class (the HTTP registry in src/http/errors.ts holds the same code). */
interface ApiAnswer {
  readonly status: number;
  readonly code: string;
  readonly message: string;
}

/** One row of docs/errors.md: columns B (breaker), R (retry), F (fallback), and the API's answer. */
export interface ErrorRow {
  /** B: a failure of this class counts toward the provider's breaker (it is the provider's fault). */
  readonly breaker: 'counts' | 'ignored';
  /** R: retry the same provider; `once` is the single re-ask after `invalid_output`. */
  readonly retry: 'no' | 'yes' | 'once';
  /** F: fall back to the next provider. */
  readonly fallback: boolean;
  /**
   * K: what the class says of the caller's key (per-key health, docs/api.md "key health"): `quarantine` it
   * for KEY_QUARANTINE_MS, `cool` it until the upstream's `Retry-After` (or KEY_COOLING_MS), or `none`.
   */
  readonly key: KeyVerdict;
  readonly api: ApiAnswer;
}

/** Column K's values: the key is refused for a long time, for a short time, or the class says nothing of it. */
export type KeyVerdict = 'quarantine' | 'cool' | 'none';

/** The answer for provider-side failures and open breakers (docs/api.md: 503, `Retry-After` when known). */
const providersUnavailable = {
  status: 503,
  code: 'PROVIDERS_UNAVAILABLE',
  message: 'No provider could answer.',
} as const satisfies ApiAnswer;

/** docs/errors.md's rows, in its order. Nothing else in the code decides these. */
export const errorTable = {
  auth: {
    breaker: 'ignored',
    retry: 'no',
    fallback: true,
    key: 'quarantine',
    api: { status: 401, code: 'PROVIDER_AUTH_FAILED', message: 'The provider refused the API key.' },
  },
  permission: {
    breaker: 'ignored',
    retry: 'no',
    fallback: true,
    key: 'quarantine',
    api: {
      status: 403,
      code: 'PROVIDER_PERMISSION_DENIED',
      message: 'The API key is not permitted to use this model or region.',
    },
  },
  quota_exhausted: {
    breaker: 'ignored',
    retry: 'no',
    fallback: true,
    key: 'quarantine',
    api: {
      status: 402,
      code: 'PROVIDER_QUOTA_EXHAUSTED',
      message: 'The API key has no credit or has reached its spend limit.',
    },
  },
  rate_limited: {
    breaker: 'ignored',
    retry: 'no',
    fallback: true,
    key: 'cool',
    api: { status: 429, code: 'PROVIDER_RATE_LIMITED', message: 'The API key is rate limited.' },
  },
  bad_request: {
    breaker: 'ignored',
    retry: 'no',
    fallback: false,
    key: 'none',
    api: {
      status: 400,
      code: 'PROVIDER_BAD_REQUEST',
      message: 'The provider refused the request as malformed.',
    },
  },
  context_too_long: {
    breaker: 'ignored',
    retry: 'no',
    fallback: true,
    key: 'none',
    api: { status: 413, code: 'DOCUMENT_TOO_LONG', message: 'The document is too long for the model.' },
  },
  not_found: {
    breaker: 'ignored',
    retry: 'no',
    fallback: true,
    key: 'none',
    api: { status: 404, code: 'PROVIDER_MODEL_NOT_FOUND', message: 'The provider does not know the model.' },
  },
  server_error: { breaker: 'counts', retry: 'yes', fallback: true, key: 'none', api: providersUnavailable },
  overloaded: { breaker: 'counts', retry: 'yes', fallback: true, key: 'none', api: providersUnavailable },
  timeout: { breaker: 'counts', retry: 'yes', fallback: true, key: 'none', api: providersUnavailable },
  connection: { breaker: 'counts', retry: 'yes', fallback: true, key: 'none', api: providersUnavailable },
  aborted: {
    breaker: 'ignored',
    retry: 'no',
    fallback: false,
    key: 'none',
    api: { status: 499, code: 'REQUEST_ABORTED', message: 'The request was cancelled.' },
  },
  invalid_output: {
    breaker: 'ignored',
    retry: 'once',
    fallback: true,
    key: 'none',
    api: {
      status: 502,
      code: 'INVALID_PROVIDER_OUTPUT',
      message: 'The model answered, but its output failed validation.',
    },
  },
  circuit_open: {
    breaker: 'ignored',
    retry: 'no',
    fallback: true,
    key: 'none',
    api: { ...providersUnavailable, message: 'Every provider is unavailable (circuit open).' },
  },
} as const satisfies Record<string, ErrorRow>;

type Table = typeof errorTable;

export type ErrorClass = keyof Table;
/** Failures caused by the provider: the only ones that count toward its breaker (derived from column B). */
export type CountedErrorClass = {
  [C in ErrorClass]: Table[C]['breaker'] extends 'counts' ? C : never;
}[ErrorClass];
/** Failures that are the user's state (their key, their quota, their request) or nobody's. */
export type IgnoredErrorClass = Exclude<ErrorClass, CountedErrorClass>;

/** A table with docs/errors.md's shape; the production one is `errorTable` (tests inject flipped rows). */
export type ErrorTable = Readonly<Record<ErrorClass, ErrorRow>>;

/**
 * The production table, typed as a table of this shape (what the machines' factories take).
 * @alias of `errorTable`, whose type keeps each row's literal values.
 */
export const errorPolicy: ErrorTable = errorTable;

function isErrorClass(name: string): name is ErrorClass {
  return Object.hasOwn(errorTable, name);
}

/** Every class, in docs/errors.md's order. */
export const errorClasses: readonly ErrorClass[] = Object.keys(errorTable).filter(isErrorClass);

/** Column K of a table: what a failure of this class does to the caller's key. */
export function keyVerdictInTable(table: ErrorTable, errorClass: ErrorClass): KeyVerdict {
  return table[errorClass].key;
}

/** Column B of a table: a failure of this class counts toward the provider's breaker. */
export function countsInTable(table: ErrorTable, errorClass: ErrorClass): boolean {
  return table[errorClass].breaker === 'counts';
}

/** Column B of the production table, as a type guard. */
function isCountedErrorClass(errorClass: ErrorClass): errorClass is CountedErrorClass {
  return countsInTable(errorTable, errorClass);
}

/**
 * Column B of `table` as a type guard. Exact for the production table, from which the counted type is
 * derived; a test's table with a flipped row makes it admit that class on purpose (a kept mutant).
 */
export function countedClassGuard(
  table: ErrorTable,
): (errorClass: ErrorClass) => errorClass is CountedErrorClass {
  return (errorClass: ErrorClass): errorClass is CountedErrorClass => countsInTable(table, errorClass);
}

function isIgnoredErrorClass(errorClass: ErrorClass): errorClass is IgnoredErrorClass {
  return !isCountedErrorClass(errorClass);
}

export const countedErrorClasses: readonly CountedErrorClass[] = errorClasses.filter(isCountedErrorClass);
export const ignoredErrorClasses: readonly IgnoredErrorClass[] = errorClasses.filter(isIgnoredErrorClass);

/**
 * The classes our own code gives to what is not an upstream error: the caller went away, our deadline
 * fired, the answer failed validation, the breaker refused the call. They are rows of the table too.
 */
export const ownClasses = {
  callerAborted: 'aborted',
  deadlineFired: 'timeout',
  invalidOutput: 'invalid_output',
  breakerRefused: 'circuit_open',
} as const satisfies Record<string, ErrorClass>;

/**
 * A class that says "the provider could not answer" (docs/api.md: 503 when one is in the mix): a counted
 * class, or the breaker's refusal.
 */
export function isProviderSideIn(table: ErrorTable, errorClass: ErrorClass): boolean {
  return countsInTable(table, errorClass) || errorClass === ownClasses.breakerRefused;
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
