/**
 * The one place an error becomes a response. Every answer has the contract body
 * `{"error":{"code","message",…}}` (docs/api.md): `ApiError`s render themselves, schema and parser failures
 * become 400 `INVALID_REQUEST` with a message saying what is wrong, anything unexpected is a logged
 * 500 `INTERNAL_ERROR` with a generic message. No framework default body ever leaves the service.
 */
import type { Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { DocumentStoreUnavailableError, DocumentStoreWriteError } from '../documents/index.js';
import { ApiError, type ErrorCode, type Refusal } from './errors.js';
import { scrubSecrets } from '../security/redact.js';
import { secretsOf } from './keys.js';
import { safeUrl } from './safe-url.js';

interface ValidationIssue {
  readonly instancePath?: string;
  readonly message?: string;
}

function hasValidation(error: unknown): error is { validation: readonly ValidationIssue[]; validationContext?: string } {
  return typeof error === 'object' && error !== null && Array.isArray((error as { validation?: unknown }).validation);
}

/** "body/options/count: Too big: expected number to be <=50; body: Unrecognized key: \"extra\"" */
function describeValidation(issues: readonly ValidationIssue[], context: string | undefined): string {
  const where = context ?? 'request';
  const parts = issues.slice(0, 5).map((issue) => {
    const path = issue.instancePath && issue.instancePath !== '/' ? `${where}${issue.instancePath}` : where;
    return `${path}: ${issue.message ?? 'is invalid'}`;
  });
  const more = issues.length > 5 ? ` (and ${issues.length - 5} more)` : '';
  return `${parts.join('; ')}${more}`;
}

function isDocumentsRoute(request: FastifyRequest): boolean {
  return request.routeOptions.url === '/v1/documents';
}

/**
 * Fastify's own errors (`FST_ERR_*`, carrying a 4xx `statusCode`) mapped to contract codes. Their messages
 * are replaced: a JSON parser message can quote the body it failed on.
 */
function frameworkError(error: FastifyError, request: FastifyRequest): ApiError | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      if (isDocumentsRoute(request)) {
        return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The upload must be multipart/form-data with a PDF in the field "file".');
      }
      return new ApiError('INVALID_REQUEST', 'Content-Type must be application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('INVALID_REQUEST', 'The JSON body is empty.');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError('INVALID_REQUEST', 'The body is not valid JSON.');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      if (isDocumentsRoute(request)) return new ApiError('FILE_TOO_LARGE', 'The upload is too large.');
      return new ApiError('REQUEST_TOO_LARGE', 'The request body is too large.');
    default:
      break;
  }
  if (error instanceof SyntaxError) return new ApiError('INVALID_REQUEST', 'The body is not valid JSON.');
  const status = error.statusCode;
  if (status === 413) {
    return isDocumentsRoute(request)
      ? new ApiError('FILE_TOO_LARGE', 'The upload is too large.')
      : new ApiError('REQUEST_TOO_LARGE', 'The request body is too large.');
  }
  if (status === 415) {
    return isDocumentsRoute(request)
      ? new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The upload must be multipart/form-data with a PDF in the field "file".')
      : new ApiError('INVALID_REQUEST', 'Content-Type must be application/json.');
  }
  if (status === 404) return new ApiError('NOT_FOUND', 'Not found.');
  if (status !== undefined && status >= 400 && status < 500) {
    // Other client errors of the framework (proto poisoning, bad content length, …): a refused request.
    return new ApiError('INVALID_REQUEST', 'The request is malformed.');
  }
  return undefined;
}

/** The error → response mapping, as a pure function the tests can read. */
function toApiError(error: unknown, request: FastifyRequest): ApiError | undefined {
  if (error instanceof ApiError) return error;
  if (error instanceof DocumentStoreWriteError) {
    return new ApiError('STORAGE_UNAVAILABLE', error.message, { retryAfterSeconds: error.retryAfterSeconds });
  }
  if (error instanceof DocumentStoreUnavailableError) {
    return new ApiError('DOCUMENT_STORE_UNAVAILABLE', error.message, { retryAfterSeconds: error.retryAfterSeconds });
  }
  if (hasValidation(error)) {
    return new ApiError('INVALID_REQUEST', describeValidation(error.validation, error.validationContext));
  }
  if (typeof error === 'object' && error !== null && 'statusCode' in error) {
    return frameworkError(error as FastifyError, request);
  }
  if (error instanceof SyntaxError) return new ApiError('INVALID_REQUEST', 'The body is not valid JSON.');
  return undefined;
}

export interface ErrorHandlerOptions {
  /**
   * How long a refusal of the client's own doing is held before it is sent (REFUSAL_DELAY_MS): 429
   * `TOO_MANY_REQUESTS` (over its share or its rate) and 413 `REQUEST_TOO_LARGE` (a body declared over
   * the route's limit, refused on its headers). A client that loops on such refusals then makes one
   * request per connection per delay instead of hundreds a second; for an oversized body the socket is
   * not read meanwhile, so the client also stops sending once the socket's buffers are full (it pushed
   * ~3 GB of 10 MB bodies over loopback in 8 s without the hold). Nothing else is ever delayed.
   */
  readonly refusalDelayMs: number;
  /** Told of each refusal by one of the service's bounds (`studyhelper_refusals_total`). */
  readonly onRefusal?: (refusal: Refusal) => void;
}

/** The refusals REFUSAL_DELAY_MS holds: a client looping on them is slowed, no one else. */
const heldRefusals: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['TOO_MANY_REQUESTS', 'REQUEST_TOO_LARGE']);

/** The error handler of the app (`app.setErrorHandler`). */
export function createErrorHandler(options: ErrorHandlerOptions): (error: unknown, request: FastifyRequest, reply: FastifyReply) => Promise<unknown> {
  return async (error, request, reply) => {
    const apiError = toApiError(error, request);
    if (apiError?.refusal !== undefined) options.onRefusal?.(apiError.refusal);
    if (apiError !== undefined && heldRefusals.has(apiError.code) && options.refusalDelayMs > 0) await delay(options.refusalDelayMs);
    return errorHandler(apiError ?? error, request, reply);
  };
}

/** The error handler without a refusal delay. */
export async function errorHandler(error: unknown, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const apiError = toApiError(error, request) ?? new ApiError('INTERNAL_ERROR', 'The service failed unexpectedly. This is a bug; it has been logged.');
  const secrets = secretsOf(request.headers);
  if (apiError.code === 'INTERNAL_ERROR') {
    const name = error instanceof Error ? error.name : typeof error;
    const message = error instanceof Error ? error.message : String(error);
    const stack = error instanceof Error ? (error.stack ?? '') : '';
    request.log.error({ error: { name, message: scrubSecrets(message, secrets), stack: scrubSecrets(stack, secrets) } }, 'unexpected error');
  } else if (apiError.statusCode >= 500) {
    request.log.warn({ code: apiError.code }, 'request failed');
  }
  const body = apiError.toBody();
  body.error.message = scrubSecrets(body.error.message, secrets);
  // Every refusal that says when to come back says it in the header too (RFC 9110 Retry-After).
  const retryAfter = apiError.details.retryAfterSeconds;
  if (typeof retryAfter === 'number' && reply.getHeader('retry-after') === undefined) void reply.header('retry-after', String(Math.ceil(retryAfter)));
  return reply.code(apiError.statusCode).type('application/json; charset=utf-8').send(body);
}

export async function notFoundHandler(request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  // The path as sent may hold a key (or kilobytes): repeated only without anything key-shaped, and bounded.
  const error = new ApiError('NOT_FOUND', `No route ${request.method} ${safeUrl(request.url.split('?')[0] ?? '', secretsOf(request.headers))}.`);
  return reply.code(error.statusCode).type('application/json; charset=utf-8').send(error.toBody());
}

/** Errors Fastify raises before routing (a malformed URL); same body as everything else. */
export function frameworkErrors(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const apiError = new ApiError('INVALID_REQUEST', error.code === 'FST_ERR_BAD_URL' ? 'The request URL is malformed.' : 'The request is malformed.');
  void reply.code(apiError.statusCode).type('application/json; charset=utf-8').send(apiError.toBody());
}

/** A request Node's HTTP parser could not read: answered on the socket with the contract body. */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    const timeout = JSON.stringify(new ApiError('REQUEST_TIMEOUT', 'The request did not arrive in time.').toBody());
    socket.end(
      `HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(timeout)}\r\n\r\n${timeout}`,
    );
    return;
  }
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const body = JSON.stringify((tooLarge ? new ApiError('HEADERS_TOO_LARGE', 'The request headers are too large.') : new ApiError('INVALID_REQUEST', 'The HTTP request is malformed.')).toBody());
  const status = tooLarge ? '431 Request Header Fields Too Large' : '400 Bad Request';
  socket.end(
    `HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
