/**
 * The test oracle: docs/errors.md's rows (columns B, R, F) and docs/api.md's "When every provider fails" table,
 * written out literally from the two documents. The graph tests judge with these rows, never with the
 * table in src/errors (which test/core/error-table.test.ts pins to these rows).
 */
import { errorPolicy, type ErrorClass, type ErrorRow, type ErrorTable } from '../../src/errors/index.js';

export interface DocumentRow {
  /** B: counts toward the provider's breaker. */
  readonly B: boolean;
  /** R: retry the same provider (`once`: the single re-ask after invalid output). */
  readonly R: 'no' | 'yes' | 'once';
  /** F: fall back to the next provider. */
  readonly F: boolean;
  /** docs/api.md: status and code when every attempt ended in this class. */
  readonly status: number;
  readonly code: string;
}

// prettier-ignore
export const errorsMd: Readonly<Record<ErrorClass, DocumentRow>> = {
  auth:             { B: false, R: 'no',   F: true,  status: 401, code: 'PROVIDER_AUTH_FAILED' },
  permission:       { B: false, R: 'no',   F: true,  status: 403, code: 'PROVIDER_PERMISSION_DENIED' },
  quota_exhausted:  { B: false, R: 'no',   F: true,  status: 402, code: 'PROVIDER_QUOTA_EXHAUSTED' },
  rate_limited:     { B: false, R: 'no',   F: true,  status: 429, code: 'PROVIDER_RATE_LIMITED' },
  bad_request:      { B: false, R: 'no',   F: false, status: 400, code: 'PROVIDER_BAD_REQUEST' },
  context_too_long: { B: false, R: 'no',   F: true,  status: 413, code: 'DOCUMENT_TOO_LONG' },
  not_found:        { B: false, R: 'no',   F: true,  status: 404, code: 'PROVIDER_MODEL_NOT_FOUND' },
  server_error:     { B: true,  R: 'yes',  F: true,  status: 503, code: 'PROVIDERS_UNAVAILABLE' },
  overloaded:       { B: true,  R: 'yes',  F: true,  status: 503, code: 'PROVIDERS_UNAVAILABLE' },
  timeout:          { B: true,  R: 'yes',  F: true,  status: 503, code: 'PROVIDERS_UNAVAILABLE' },
  connection:       { B: true,  R: 'yes',  F: true,  status: 503, code: 'PROVIDERS_UNAVAILABLE' },
  aborted:          { B: false, R: 'no',   F: false, status: 499, code: 'REQUEST_ABORTED' },
  invalid_output:   { B: false, R: 'once', F: true,  status: 502, code: 'INVALID_PROVIDER_OUTPUT' },
  circuit_open:     { B: false, R: 'no',   F: true,  status: 503, code: 'PROVIDERS_UNAVAILABLE' },
};

/** docs/errors.md's classes, in its order. */
export const documentClasses = [
  'auth', 'permission', 'quota_exhausted', 'rate_limited', 'bad_request', 'context_too_long', 'not_found',
  'server_error', 'overloaded', 'timeout', 'connection', 'aborted', 'invalid_output', 'circuit_open',
] as const satisfies readonly ErrorClass[];

/** docs/api.md: "any provider-side class (server_error, overloaded, timeout, connection, circuit_open)". */
export const providerSideClasses: readonly ErrorClass[] = [
  'server_error', 'overloaded', 'timeout', 'connection', 'circuit_open',
];

/**
 * A kept mutant's table: the production table with one row changed. Injected into a machine
 * (`createProviderMachine(table)`, `createFallbackMachine(table)`), it must turn a graph test red.
 */
export function withRow(errorClass: ErrorClass, change: Partial<ErrorRow>): ErrorTable {
  return { ...errorPolicy, [errorClass]: { ...errorPolicy[errorClass], ...change } };
}
