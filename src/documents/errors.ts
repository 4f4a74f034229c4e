/**
 * Why a PDF was refused. The first three are codes of the HTTP registry (src/http/errors.ts); the four
 * limits answer 422 `PDF_TOO_COMPLEX` with the limit named (`pdfLimits`).
 */
const pdfRejectionCodes = [
  'INVALID_PDF',
  'ENCRYPTED_PDF',
  'NO_EXTRACTABLE_TEXT',
  'PDF_EXTRACTION_TIMEOUT',
  'PDF_MEMORY_LIMIT',
  'PDF_DECOMPRESSION_LIMIT',
  'PDF_TOO_MANY_PAGES',
] as const;

/** Why a PDF was refused. */
export type PdfRejectionCode = (typeof pdfRejectionCodes)[number];

/**
 * A PDF the service cannot or will not use: corrupt, locked by a password, without a text layer, or
 * hostile (too slow, too much memory, a decompression bomb, a page tree past the page cap).
 */
export class PdfRejectedError extends Error {
  readonly code: PdfRejectionCode;

  constructor(code: PdfRejectionCode, message: string) {
    super(message);
    this.name = 'PdfRejectedError';
    this.code = code;
  }
}

/** The limits a hostile PDF breaks, as `PDF_TOO_COMPLEX` names them in its `limit` field (docs/api.md). */
export const pdfLimits = {
  PDF_EXTRACTION_TIMEOUT: 'time',
  PDF_MEMORY_LIMIT: 'memory',
  PDF_DECOMPRESSION_LIMIT: 'decompressed_bytes',
  PDF_TOO_MANY_PAGES: 'pages',
} as const satisfies Partial<Record<PdfRejectionCode, string>>;

export type PdfLimit = (typeof pdfLimits)[keyof typeof pdfLimits];

/** True when `value` is one of the PDF rejection codes. */
export function isPdfRejectionCode(value: unknown): value is PdfRejectionCode {
  return pdfRejectionCodes.some((code) => code === value);
}

/** Every extraction worker is busy and the wait queue (16 per worker) is full: retry later. */
export class PdfExtractorBusyError extends Error {
  /** A hint for the Retry-After header. */
  readonly retryAfterSeconds: number;
  /** What was full: this address's share of the queue, or the whole queue. */
  readonly scope: 'address' | 'queue';

  constructor(message: string, retryAfterSeconds: number, scope: 'address' | 'queue' = 'queue') {
    super(message);
    this.name = 'PdfExtractorBusyError';
    this.retryAfterSeconds = retryAfterSeconds;
    this.scope = scope;
  }
}

/**
 * The shared document store (Redis) could not be read and this process holds no copy: the document
 * may well exist, so it is not "not found". Retry once the store is back.
 */
export class DocumentStoreUnavailableError extends Error {
  /** A hint for the Retry-After header. */
  readonly retryAfterSeconds: number;

  constructor(retryAfterSeconds: number) {
    super('The document store is unreachable; the document could not be read. Retry shortly.');
    this.name = 'DocumentStoreUnavailableError';
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/**
 * An uploaded document could not be stored (a full disk, a read-only folder, the store refusing writes):
 * nothing was kept, so the upload is not answered 201. `cause` is the store's error.
 */
export class DocumentStoreWriteError extends Error {
  /** A hint for the Retry-After header. */
  readonly retryAfterSeconds: number;

  constructor(cause: unknown, retryAfterSeconds = 30) {
    super('The document could not be stored (the service cannot write right now); nothing was kept. Retry later.', { cause });
    this.name = 'DocumentStoreWriteError';
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
