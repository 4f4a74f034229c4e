import { errorClasses, errorTable } from '../errors/index.js';

/**
 * The one registry of error codes the HTTP API answers with (docs/api.md). `docs/errors.md` lists every
 * code here; a test keeps the two in step. Body of every error: `{"error":{"code","message",…}}`.
 */
export const errorCodes = {
  INVALID_REQUEST: { status: 400, description: 'The request breaks the schema: malformed JSON, wrong or extra fields, unknown provider id or task, both or neither of text/documentId.' },
  NO_PROVIDER_KEY: { status: 400, description: 'No requested provider has a key header.' },
  NOT_FOUND: { status: 404, description: 'No such route.' },
  JOB_NOT_FOUND: { status: 404, description: 'Unknown or expired job id.' },
  JOB_FORBIDDEN: { status: 403, description: 'POST /v1/jobs/:id/resume without the key headers the job was created with (compared by salted fingerprints).' },
  JOB_NOT_RESUMABLE: { status: 409, description: 'POST /v1/jobs/:id/resume of a job that is not interrupted (queued, running, finished, or resumed by another request first).' },
  JOB_INTERRUPTED: { status: 503, description: 'Only in a job view\'s `error` (never an HTTP answer): the instance running the job stopped before it ended; `resumable: true`, POST /v1/jobs/:id/resume continues it.' },
  JOB_STORE_UNAVAILABLE: { status: 503, description: 'The shared job store (Redis) is unreachable and this instance holds no copy of the job, or it came back empty moments ago (within JOB_LEASE_MS) and its runner may not have written it again yet, so it could not be read (it may exist); Retry-After says when to try again.' },
  PROVIDER_NOT_FOUND: { status: 404, description: 'Unknown provider id in the path.' },
  DOCUMENT_NOT_FOUND: { status: 404, description: 'Unknown or expired document id.' },
  INVALID_PAGES: { status: 422, description: 'A `pages` range that cannot be used: outside the document, `from` after `to`, pages past `pagesUsed` (left out at upload), `pages` without `documentId`, or a range of pages without text.' },
  DOCUMENT_STORE_UNAVAILABLE: { status: 503, description: 'The shared document store (Redis) is unreachable, so the document could not be read (it may exist); Retry-After says when to try again.' },
  STORAGE_UNAVAILABLE: { status: 503, description: 'The service cannot store what the request would create (an uploaded document, the records of a new job): a full disk, a read-only JOBS_DIR, or the store refusing writes. Nothing was kept; `/readyz` names the cause. Retry-After says when to try again.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, description: 'The upload is not a PDF by its bytes, or the request is not multipart/form-data.' },
  FILE_TOO_LARGE: { status: 413, description: 'The upload is over MAX_UPLOAD_MB: declared so (refused unread) or found so while streaming (answered at once, the rest unread).' },
  INVALID_PDF: { status: 400, description: 'The PDF is corrupt.' },
  ENCRYPTED_PDF: { status: 400, description: 'The PDF needs a password.' },
  NO_EXTRACTABLE_TEXT: { status: 422, description: 'The PDF has no text layer (scanned).' },
  PDF_TOO_COMPLEX: { status: 422, description: 'The PDF breaks an extraction limit; `limit` says which: `time` (PDF_TIMEOUT_MS, its worker was stopped), `memory` (PDF_WORKER_MEMORY_MB, its worker was stopped), `decompressed_bytes` (PDF_MAX_DECODED_MB: a decompression bomb, refused before it is parsed) `pages` (more than 10 000 declared or held) or `text_bytes` (its text past PDF_MAX_TEXT_MB, or past 64 times the file: a PDF that multiplies its text). Other uploads are not affected.' },
  PDF_EXTRACTOR_BUSY: { status: 503, description: 'Every PDF worker (PDF_WORKERS) is busy and the wait queue (16 per worker) is full; Retry-After says when to retry.' },
  ADMIN_AUTH_REQUIRED: { status: 401, description: 'Missing or wrong admin bearer token.' },
  PROVIDER_AUTH_FAILED: { status: errorTable.auth.api.status, description: 'Every attempt failed with auth (the user key was refused).' },
  PROVIDER_PERMISSION_DENIED: { status: errorTable.permission.api.status, description: 'Every attempt failed with permission.' },
  PROVIDER_QUOTA_EXHAUSTED: { status: errorTable.quota_exhausted.api.status, description: 'Every attempt failed with quota_exhausted (credit balance, spend limit).' },
  PROVIDER_RATE_LIMITED: { status: errorTable.rate_limited.api.status, description: 'Every attempt was rate limited; Retry-After when the upstream gave one.' },
  DOCUMENT_TOO_LONG: { status: errorTable.context_too_long.api.status, description: 'Every attempt failed with context_too_long.' },
  INVALID_PROVIDER_OUTPUT: { status: errorTable.invalid_output.api.status, description: 'Every attempt answered output that failed validation.' },
  PROVIDERS_UNAVAILABLE: { status: errorTable.server_error.api.status, description: 'Provider-side failures or open breakers: no provider could answer. Retry-After when known.' },
  PROVIDER_BAD_REQUEST: { status: errorTable.bad_request.api.status, description: 'The provider refused the request as malformed (bad_request).' },
  PROVIDER_MODEL_NOT_FOUND: { status: errorTable.not_found.api.status, description: 'The configured model is unknown to the provider (not_found).' },
  TEXT_TOO_LONG: { status: 413, description: 'The `text` of POST /v1/generate is longer than MAX_TEXT_CHARS characters.' },
  BUDGET_EXCEEDED: { status: 422, description: "The next provider call's worst case (its input tokens and its max output tokens at its model's price) would take what the request or job spent past options.maxCostUsd, or its model has no price: the call was not made. A job ends failed with this code and keeps what it finished." },
  TOO_MANY_PARTS: { status: 413, description: 'The text would need more than MAX_TEXT_PARTS parts (each a provider call); refused before any call of that stage. For a document the message says how many pages fit.' },
  REQUEST_TOO_LARGE: { status: 413, description: "The JSON body is over its route's limit: POST /v1/generate (MAX_TEXT_CHARS and the longest notes, 6 bytes a character, plus 4 KiB; at most MAX_UPLOAD_MB), 16 KiB elsewhere." },
  TOO_MANY_JOBS: { status: 503, description: 'Every job slot (JOB_MAX_JOBS) is taken by a queued or running job; retry when one has finished. Retry-After.' },
  SERVER_BUSY: { status: 503, description: 'Every in-flight generation slot of this instance (MAX_INFLIGHT_GENERATIONS) is taken. Retry-After.' },
  TOO_MANY_REQUESTS: { status: 429, description: 'This client already holds its share (MAX_INFLIGHT_GENERATIONS_PER_CLIENT generation slots, one per 25 000 characters of text; JOB_MAX_JOBS_PER_CLIENT live jobs) or went past its rate (RATE_LIMIT_UPLOADS, RATE_LIMIT_JOBS, RATE_LIMIT_GENERATIONS, RATE_LIMIT_KEY_STATUS per RATE_LIMIT_WINDOW_SECONDS), or its address sent more JSON body bytes than its share (JSON_BODY_MB_PER_SECOND, JSON_BODY_BURST_MB), or the uploads of its address could not arrive within the request deadline at its upload share (UPLOAD_MB_PER_SECOND). Retry-After.' },
  SHUTTING_DOWN: { status: 503, description: 'The service is shutting down; retry against another instance.' },
  HEADERS_TOO_LARGE: { status: 431, description: "The request's headers are over Node's header size limit (16 KiB); the connection is closed." },
  REQUEST_TIMEOUT: { status: 408, description: 'The request headers (within 10 s) or the whole request (REQUEST_TIMEOUT_MS) did not arrive in time; the connection is closed.' },
  REQUEST_ABORTED: { status: errorTable.aborted.api.status, description: 'The caller went away before the answer (never sent to a live client).' },
  INTERNAL_ERROR: { status: 500, description: 'A bug: the service failed in a way it did not expect.' },
} as const satisfies Record<string, { status: number; description: string }>;

export type ErrorCode = keyof typeof errorCodes;

/**
 * The statuses of provider failures above are read from the error table (src/errors), which names the
 * code of each class; every code it names is in this registry (a type error otherwise).
 * @public A compile-time check, exported so that `tsc` keeps it.
 */
export const providerFailureCodes: readonly ErrorCode[] = errorClasses.map(
  (errorClass) => errorTable[errorClass].api.code,
);

/**
 * Which bound refused a request, for `studyhelper_refusals_total` (never in the body): `limit` is the kind
 * of bound (a client's share, an address's, the equal shares while busy, the instance's, a rate, the PDF
 * queue) and `what` what it bounds, in snake case (generations, event_streams, jobs, uploads, …).
 */
export interface Refusal {
  readonly limit: 'client_share' | 'address_share' | 'busy_share' | 'instance' | 'rate' | 'queue';
  readonly what: string;
}

/** An error the service answers with on purpose: a stable code, the registry's status, a clear message. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly statusCode: number;
  readonly details: Readonly<Record<string, unknown>>;
  /** Set on a refusal by one of the service's bounds (429, 503). */
  readonly refusal: Refusal | undefined;

  constructor(code: ErrorCode, message: string, details: Readonly<Record<string, unknown>> = {}, refusal?: Refusal) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.statusCode = errorCodes[code].status;
    this.details = details;
    this.refusal = refusal;
  }

  toBody(): { error: { code: ErrorCode; message: string } & Record<string, unknown> } {
    return { error: { code: this.code, message: this.message, ...this.details } };
  }
}
