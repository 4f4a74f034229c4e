/**
 * The parts of classification every provider shares: HTTP statuses, `retry-after` headers and
 * the failures that arrive raw from undici/fetch instead of as SDK errors (docs/errors.md).
 */
import { invalidOutputMessage, ownClasses, type ErrorClass, type ProviderFailure } from '../errors/index.js';
import { scrubSecrets } from '../security/redact.js';
import { knownKeysOf } from './scrub.js';
import {
  AnswerTooLongError,
  IncompleteStreamError,
  UnexpectedResponseError,
  UpstreamAbortError,
} from './upstream-errors.js';

/** A failure with its message scrubbed of key-like text. */
export function failure(
  errorClass: ErrorClass,
  error: unknown,
  message: string,
  extra: { httpStatus?: number | undefined; retryAfterMs?: number | undefined } = {},
): ProviderFailure {
  return {
    errorClass,
    message: scrubSecrets(message, knownKeysOf(error)),
    ...(extra.httpStatus === undefined ? {} : { httpStatus: extra.httpStatus }),
    ...(extra.retryAfterMs === undefined ? {} : { retryAfterMs: extra.retryAfterMs }),
  };
}

/** docs/errors.md's class for a status when the body says nothing more specific. */
export function classOfStatus(status: number): ErrorClass {
  if (status === 401) return 'auth';
  if (status === 402) return 'quota_exhausted';
  if (status === 403) return 'permission';
  if (status === 404) return 'not_found';
  if (status === 408 || status === 504) return 'timeout';
  if (status === 413) return 'context_too_long';
  if (status === 429) return 'rate_limited';
  if (status === 529) return 'overloaded';
  if (status >= 500) return 'server_error';
  return 'bad_request';
}

interface HeaderReader {
  get(name: string): string | null;
}

function isHeaderReader(value: unknown): value is HeaderReader {
  return (
    typeof value === 'object' && value !== null && typeof (value as { get?: unknown }).get === 'function'
  );
}

/** `retry-after-ms` (milliseconds) or `retry-after` (seconds or an HTTP date), as milliseconds. */
export function retryAfterMsOf(headers: unknown, now: number = Date.now()): number | undefined {
  if (!isHeaderReader(headers)) return undefined;
  const milliseconds = headers.get('retry-after-ms');
  if (milliseconds !== null && milliseconds.trim() !== '') {
    const value = Number(milliseconds);
    if (Number.isFinite(value) && value >= 0) return Math.round(value);
  }
  const retryAfter = headers.get('retry-after');
  if (retryAfter === null || retryAfter.trim() === '') return undefined;
  const seconds = Number(retryAfter);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  const date = Date.parse(retryAfter);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

const connectionCodes = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);
const timeoutCodes = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** Every `code` and `name` along an error's `cause` chain. */
function causeChain(error: unknown): { codes: string[]; names: string[]; messages: string[] } {
  const codes: string[] = [];
  const names: string[] = [];
  const messages: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 6 && typeof current === 'object' && current !== null; depth += 1) {
    const record = current as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown };
    if (typeof record.code === 'string') codes.push(record.code);
    if (typeof record.name === 'string') names.push(record.name);
    if (typeof record.message === 'string') messages.push(record.message);
    current = record.cause;
  }
  return { codes, names, messages };
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === 'string' ? error : 'unknown upstream failure';
}

/**
 * Failures that are not SDK status errors: our own wrappers, aborts, timeouts and sockets that
 * broke, from fetch/undici directly (e.g. `TypeError: terminated` when a body is cut).
 * Undefined when the error is none of these.
 */
export function classifyTransportError(error: unknown): ProviderFailure | undefined {
  if (error instanceof UpstreamAbortError)
    return failure(error.timedOut ? 'timeout' : 'aborted', error, error.message);
  // An answer past the call's ceiling: `invalid_output` with its reason, as validation would say it.
  if (error instanceof AnswerTooLongError) {
    const reasons = [error.message];
    return {
      ...failure(ownClasses.invalidOutput, error, invalidOutputMessage(reasons)),
      validationErrors: reasons,
    };
  }
  if (error instanceof UnexpectedResponseError) {
    return failure('server_error', error, error.message, { httpStatus: error.httpStatus });
  }
  // A stream that ended before the provider's end-of-stream event: cut, like a body cut midway.
  if (error instanceof IncompleteStreamError) return failure('connection', error, error.message);
  // A 2xx whose body claimed JSON but was not, or a stream chunk that is not JSON.
  if (error instanceof SyntaxError)
    return failure('server_error', error, `The response was not valid JSON: ${error.message}`);
  const { codes, names, messages } = causeChain(error);
  const first = names[0];
  if (first === 'TimeoutError') return failure('timeout', error, messageOf(error));
  if (first === 'AbortError') return failure('aborted', error, messageOf(error));
  if (codes.some((code) => timeoutCodes.has(code))) return failure('timeout', error, messageOf(error));
  if (codes.some((code) => connectionCodes.has(code))) return failure('connection', error, messageOf(error));
  if (
    error instanceof TypeError &&
    messages.some((message) => /terminated|fetch failed|other side closed|socket/i.test(message))
  ) {
    return failure('connection', error, messageOf(error));
  }
  return undefined;
}

/** The last resort: something unknown went wrong talking to the provider. */
export function classifyUnknown(error: unknown): ProviderFailure {
  return failure('server_error', error, `Unexpected upstream failure: ${messageOf(error)}`);
}
