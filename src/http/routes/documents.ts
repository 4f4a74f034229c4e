import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import multipart from '@fastify/multipart';
import type { FastifyPluginAsync } from 'fastify';
import { type ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  addressShareKey,
  createPdfExtractor,
  looksLikePdf,
  PdfExtractorBusyError,
  PdfRejectedError,
  pdfLimits,
  type ExtractOptions,
  type ExtractReservation,
  type PdfExtractorOptions,
  type DocumentStore,
  type PdfExtractor,
  type StoredDocument,
} from '../../documents/index.js';
import { ApiError } from '../errors.js';
import { errorBodySchema } from '../schemas.js';
import { routeRateLimit } from '../rate-limit.js';
import { safeSegment } from '../../security/safe-url.js';
import type { RouteRateLimit } from '../rate-limit.js';
import type { UploadShare } from '../upload-share.js';
import { createSpoolFolder, removeSpoolFolder, spoolUpload, type SpooledUpload } from './upload-spool.js';
import { mebibyte } from '../../units.js';

/** Options of the documents plugin. */
export interface DocumentsRoutesOptions {
  store: DocumentStore;
  /** MAX_UPLOAD_MB: bigger uploads are refused (413) while they stream in. */
  maxUploadMb: number;
  /** MAX_PDF_PAGES: pages past it are left out with a warning. */
  maxPdfPages: number;
  /** PDF_MAX_DECODED_MB, the page bound and PDF_MAX_TEXT_MB (defaults: src/documents/extract-text.ts). */
  pdfLimits?: Pick<ExtractOptions, 'maxDecodedBytes' | 'maxTotalPages' | 'maxTextBytes'>;
  /** The pool of the default extractor: PDF_WORKERS, its queue, PDF_TIMEOUT_MS, PDF_WORKER_MEMORY_MB. */
  extractorOptions?: PdfExtractorOptions;
  /** Defaults to a worker-pool extractor owned (and closed) by the plugin. */
  extractor?: PdfExtractor;
  /** Uploads per client (remote address) per window (RATE_LIMIT_UPLOADS); none when absent. */
  rateLimit?: Pick<RouteRateLimit, 'max' | 'windowSeconds' | 'salt'>;
  /**
   * Each address's share of upload body bytes (UPLOAD_MB_PER_SECOND: upload-share.ts), and the time an
   * upload has to arrive once admitted (the request deadline less the headers'); unpaced when absent.
   */
  uploadShare?: { readonly share: UploadShare; readonly timeLeftMs: number };
}

/** The multipart form around the file: the fields and part headers @fastify/multipart lets through (below), rounded up. */
const formSlackBytes = 2 * mebibyte;

/** The largest body `POST /v1/documents` takes: the file at MAX_UPLOAD_MB and its form. */
function uploadBodyLimit(maxUploadMb: number): number {
  return Math.floor(maxUploadMb * mebibyte) + formSlackBytes;
}

/**
 * The body of an upload of a file at MAX_UPLOAD_MB as a browser or client library sends it (the file, its
 * part's headers and a boundary or two): what the upload share counts a body of unknown length at, and
 * what it always lets one idle address send in time.
 */
export function largestUploadBytes(maxUploadMb: number): number {
  return Math.floor(maxUploadMb * mebibyte) + 64 * 1024;
}

/** `content-length` as a number; undefined when absent (chunked) or not a plain decimal. */
function declaredLength(header: string | undefined): number | undefined {
  return header !== undefined && /^\d+$/u.test(header) ? Number(header) : undefined;
}

/** The form of `POST /v1/documents`, for the OpenAPI document only: @fastify/multipart reads it, not the validator. */
const uploadFormSchema = z.object({
  file: z.file().describe('The PDF (one file, at most MAX_UPLOAD_MB); other fields are ignored.'),
});

/** The 201 body of `POST /v1/documents` (docs/api.md). */
const documentUploadResponseSchema = z.object({
  documentId: z.string(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/u),
  fileName: z.string(),
  pageCount: z.number().int().nonnegative(),
  pagesUsed: z.number().int().nonnegative(),
  wordCount: z.number().int().nonnegative(),
  charCount: z.number().int().nonnegative(),
  warnings: z.array(z.string()),
  outline: z
    .array(z.object({ title: z.string(), page: z.number().int().min(1), level: z.number().int().min(1) }))
    .describe("The PDF's bookmarks, depth first (level 1 = top, page 1-based, at most 500); [] when it has none."),
}).meta({ id: 'Document', description: 'An uploaded PDF: its id for generations and jobs, and what was extracted.' });

/**
 * `POST /v1/documents`: a PDF as multipart field `file` → text extracted and stored. Encapsulated:
 * it registers @fastify/multipart for itself, so the app only registers this plugin.
 */
export const documentsRoutes: FastifyPluginAsync<DocumentsRoutesOptions> = async (fastify, options) => {
  const maxBytes = Math.floor(options.maxUploadMb * mebibyte);
  const bodyLimit = uploadBodyLimit(options.maxUploadMb);
  await fastify.register(multipart, {
    // busboy stops taking file bytes past fileSize: an oversize upload is never held in memory.
    limits: { fileSize: maxBytes, files: 1, fields: 20, fieldSize: 64 * 1024, parts: 40 },
    throwFileSizeLimit: true,
  });
  const extractor = options.extractor ?? createPdfExtractor(options.extractorOptions);
  const extractOptions: ExtractOptions = { maxPdfPages: options.maxPdfPages, ...options.pdfLimits };
  if (options.extractor === undefined) fastify.addHook('onClose', async () => extractor.close());
  // Uploads stream to files here on their way to the extractor (upload-spool.ts), made on first use.
  const spoolFolder = createSpoolFolder();
  spoolFolder.catch(() => {});
  fastify.addHook('onClose', async () => removeSpoolFolder(await spoolFolder));

  fastify.withTypeProvider<ZodTypeProvider>().post(
    '/v1/documents',
    {
      config: {
        rateLimit:
          options.rateLimit === undefined
            ? false
            : routeRateLimit({ ...options.rateLimit, what: 'uploads', variable: 'RATE_LIMIT_UPLOADS', client: 'byAddress' }),
      },
      schema: {
        summary: 'Upload a PDF; its text is extracted and kept for DOCUMENT_TTL_SECONDS',
        tags: ['documents'],
        consumes: ['multipart/form-data'],
        documentedBody: uploadFormSchema,
        response: {
          201: documentUploadResponseSchema,
          400: errorBodySchema,
          413: errorBodySchema,
          415: errorBodySchema,
          422: errorBodySchema,
          429: errorBodySchema,
          503: errorBodySchema,
        },
      },
      // Refuse anything but multipart before a body parser reads a byte of it.
      onRequest: async (request) => {
        const contentType = request.headers['content-type'] ?? '';
        if (!/^multipart\/form-data\s*(?:;|$)/iu.test(contentType)) {
          throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Send the PDF as multipart/form-data in the field "file".');
        }
      },
    },
    async (request, reply) => {
      const client = addressShareKey(request.ip);
      // A body declared larger than any upload the route takes is refused on its headers, unread.
      const declared = declaredLength(request.headers['content-length']);
      if (declared !== undefined && declared > bodyLimit) {
        throw new ApiError('FILE_TOO_LARGE', `The upload is larger than MAX_UPLOAD_MB (${options.maxUploadMb} MB).`, { maxUploadMb: options.maxUploadMb });
      }
      // The address's byte share paces the body from here (refused 429 if it could not arrive in time);
      // then the place in the extractor is held before a byte of the body is read: a full queue, or an
      // address past its share, is refused while the client is still sending. A paced upload's place can be
      // taken by another address's upload (the extractor's displacement): it is then answered 503 at once.
      const released = options.uploadShare?.share.admit(request.raw, client, declared ?? largestUploadBytes(options.maxUploadMb), options.uploadShare.timeLeftMs);
      let reservation: ExtractReservation | undefined;
      let upload: SpooledUpload | undefined;
      try {
        reservation = reserveOrThrow(extractor, client);
        upload = await spoolUpload(fastify, request, {
          folder: await spoolFolder,
          maxBytes,
          maxUploadMb: options.maxUploadMb,
          ...(reservation === undefined ? {} : { signal: reservation.signal }),
        });
        // The body is read: it no longer draws on the address's share (nor does one refused or abandoned, below).
        released?.();
        if (!looksLikePdf(upload.head)) {
          throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The file is not a PDF: its first 1024 bytes hold no %PDF- header.');
        }
        const input = { path: upload.path };
        // The wait queue is shared by address (TRUST_PROXY decides request.ip), IPv6 by /64, so one
        // address cannot fill the extract workers while others wait.
        const extracted = await extractOrThrow(
          reservation === undefined ? extractor.extract(input, extractOptions, client) : reservation.extract(input, extractOptions),
        );
        const document: StoredDocument = {
          documentId: randomUUID(),
          sha256: upload.sha256,
          fileName: upload.fileName,
          ...extracted,
          createdAt: Date.now(),
        };
        await options.store.put(document);
        const { text: _text, createdAt: _createdAt, pageStarts: _pageStarts, ...summary } = document;
        return reply.code(201).send({ ...summary, outline: extracted.outline });
      } catch (error) {
        throw toExtractorApiError(error);
      } finally {
        released?.();
        reservation?.release();
        if (upload !== undefined) await rm(upload.path, { force: true });
      }
    },
  );
};

/** A place in the extractor for `client`, or 503 PDF_EXTRACTOR_BUSY; none for an extractor that cannot hold one. */
function reserveOrThrow(extractor: PdfExtractor, client: string): ExtractReservation | undefined {
  try {
    return extractor.reserve?.(client);
  } catch (error) {
    throw toExtractorApiError(error);
  }
}

async function extractOrThrow(extraction: ReturnType<PdfExtractor['extract']>): ReturnType<PdfExtractor['extract']> {
  try {
    return await extraction;
  } catch (error) {
    throw toExtractorApiError(error);
  }
}

/** The extractor's refusals as the contract's errors; anything else unchanged. */
function toExtractorApiError(error: unknown): unknown {
  if (error instanceof PdfRejectedError) {
    switch (error.code) {
      case 'INVALID_PDF':
      case 'ENCRYPTED_PDF':
      case 'NO_EXTRACTABLE_TEXT':
        return new ApiError(error.code, error.message);
      default:
        // A hostile PDF: one contract code, the limit it broke named (docs/api.md).
        return new ApiError('PDF_TOO_COMPLEX', error.message, { limit: pdfLimits[error.code] });
    }
  }
  // The error handler mirrors retryAfterSeconds in a Retry-After header.
  if (error instanceof PdfExtractorBusyError) {
    return new ApiError(
      'PDF_EXTRACTOR_BUSY',
      error.message,
      { retryAfterSeconds: error.retryAfterSeconds },
      { limit: error.scope === 'address' ? 'address_share' : 'queue', what: 'pdf_extractions' },
    );
  }
  return error;
}

/** The stored document, or 404 DOCUMENT_NOT_FOUND when the id is unknown or expired. */
export async function loadDocumentOrThrow(store: DocumentStore, documentId: string): Promise<StoredDocument> {
  const document = await store.get(documentId);
  if (document === undefined) {
    throw new ApiError('DOCUMENT_NOT_FOUND', `No document ${JSON.stringify(safeSegment(documentId.slice(0, 100)))}: it is unknown or has expired (DOCUMENT_TTL_SECONDS).`);
  }
  return document;
}
