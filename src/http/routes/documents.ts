import { createHash, randomUUID } from 'node:crypto';
import { basename } from 'node:path';
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
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
  type PdfExtractorOptions,
  type DocumentStore,
  type PdfExtractor,
  type StoredDocument,
} from '../../documents/index.js';
import { ApiError } from '../errors.js';
import { errorBodySchema } from '../schemas.js';
import { routeRateLimit } from '../rate-limit.js';
import { safeSegment } from '../safe-url.js';
import type { RouteRateLimit } from '../rate-limit.js';

/** Options of the documents plugin. */
export interface DocumentsRoutesOptions {
  store: DocumentStore;
  /** MAX_UPLOAD_MB: bigger uploads are refused (413) while they stream in. */
  maxUploadMb: number;
  /** MAX_PDF_PAGES: pages past it are left out with a warning. */
  maxPdfPages: number;
  /** PDF_MAX_DECODED_MB and the page bound (defaults: src/documents/extract-text.ts). */
  pdfLimits?: Pick<ExtractOptions, 'maxDecodedBytes' | 'maxTotalPages'>;
  /** The pool of the default extractor: PDF_WORKERS, its queue, PDF_TIMEOUT_MS, PDF_WORKER_MEMORY_MB. */
  extractorOptions?: PdfExtractorOptions;
  /** Defaults to a worker-pool extractor owned (and closed) by the plugin. */
  extractor?: PdfExtractor;
  /** Uploads per client (remote address) per window (RATE_LIMIT_UPLOADS); none when absent. */
  rateLimit?: Pick<RouteRateLimit, 'max' | 'windowSeconds' | 'salt'>;
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
  const maxBytes = Math.floor(options.maxUploadMb * 1024 * 1024);
  await fastify.register(multipart, {
    // busboy stops taking file bytes past fileSize: an oversize upload is never held in memory.
    limits: { fileSize: maxBytes, files: 1, fields: 20, fieldSize: 64 * 1024, parts: 40 },
    throwFileSizeLimit: true,
  });
  const extractor = options.extractor ?? createPdfExtractor(options.extractorOptions);
  const extractOptions: ExtractOptions = { maxPdfPages: options.maxPdfPages, ...options.pdfLimits };
  if (options.extractor === undefined) fastify.addHook('onClose', async () => extractor.close());

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
      const upload = await readUpload(fastify, request, maxBytes, options.maxUploadMb);
      if (!looksLikePdf(upload.bytes)) {
        throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The file is not a PDF: its first 1024 bytes hold no %PDF- header.');
      }
      const { sha256 } = upload;
      // The wait queue is shared by address (TRUST_PROXY decides request.ip), IPv6 by /64, so one
      // address cannot fill the extract workers while others wait.
      const extracted = await extractOrThrow(extractor, upload.bytes, extractOptions, addressShareKey(request.ip));
      const document: StoredDocument = {
        documentId: randomUUID(),
        sha256,
        fileName: upload.fileName,
        ...extracted,
        createdAt: Date.now(),
      };
      await options.store.put(document);
      const { text: _text, createdAt: _createdAt, pageStarts: _pageStarts, ...summary } = document;
      return reply.code(201).send({ ...summary, outline: extracted.outline });
    },
  );
};

interface Upload {
  bytes: Buffer;
  fileName: string;
  /** Of the bytes, hashed chunk by chunk as they arrived. */
  sha256: string;
}

async function readUpload(
  fastify: FastifyInstance,
  request: FastifyRequest,
  maxBytes: number,
  maxUploadMb: number,
): Promise<Upload> {
  const errors = fastify.multipartErrors;
  let upload: Upload | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type !== 'file') continue;
      if (part.fieldname !== 'file' || upload !== undefined) {
        part.file.resume();
        continue;
      }
      // Hashed chunk by chunk as it streams in: hashing a large file in one call would hold the event
      // loop for every such upload (docs/performance.md).
      const hash = createHash('sha256');
      const chunks: Buffer[] = [];
      let length = 0;
      let tooLarge = false;
      // Read to its end whatever happens (as the plugin's own toBuffer does): busboy stops feeding a
      // truncated file, and leaving the loop early would leave its stream to be cleaned up later.
      for await (const chunk of part.file as AsyncIterable<Buffer>) {
        length += chunk.byteLength;
        tooLarge ||= part.file.truncated || length > maxBytes;
        if (tooLarge) {
          chunks.length = 0;
          continue;
        }
        hash.update(chunk);
        chunks.push(chunk);
      }
      if (tooLarge || part.file.truncated) throw new errors.RequestFileTooLargeError();
      upload = { bytes: Buffer.concat(chunks, length), fileName: cleanFileName(part.filename), sha256: hash.digest('hex') };
    }
  } catch (error) {
    if (error instanceof errors.RequestFileTooLargeError) {
      throw new ApiError('FILE_TOO_LARGE', `The file is larger than MAX_UPLOAD_MB (${maxUploadMb} MB).`, { maxUploadMb });
    }
    if (error instanceof errors.FilesLimitError) {
      throw new ApiError('INVALID_REQUEST', 'Send exactly one file, in the field "file".');
    }
    if (error instanceof errors.PartsLimitError || error instanceof errors.FieldsLimitError) {
      throw new ApiError('INVALID_REQUEST', 'The form has too many parts; send only the field "file".');
    }
    if (error instanceof errors.InvalidMultipartContentTypeError) {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Send the PDF as multipart/form-data in the field "file".');
    }
    if (error instanceof ApiError) throw error;
    throw new ApiError('INVALID_REQUEST', `The multipart body could not be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (upload === undefined) throw new ApiError('INVALID_REQUEST', 'The form has no file in the field "file".');
  if (upload.bytes.byteLength === 0) throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The file is empty, not a PDF.');
  return upload;
}

async function extractOrThrow(
  extractor: PdfExtractor,
  bytes: Buffer,
  options: ExtractOptions,
  client: string,
): ReturnType<PdfExtractor['extract']> {
  try {
    return await extractor.extract(bytes, options, client);
  } catch (error) {
    if (error instanceof PdfRejectedError) {
      switch (error.code) {
        case 'INVALID_PDF':
        case 'ENCRYPTED_PDF':
        case 'NO_EXTRACTABLE_TEXT':
          throw new ApiError(error.code, error.message);
        default:
          // A hostile PDF: one contract code, the limit it broke named (docs/api.md).
          throw new ApiError('PDF_TOO_COMPLEX', error.message, { limit: pdfLimits[error.code] });
      }
    }
    // The error handler mirrors retryAfterSeconds in a Retry-After header.
    if (error instanceof PdfExtractorBusyError) {
      throw new ApiError(
        'PDF_EXTRACTOR_BUSY',
        error.message,
        { retryAfterSeconds: error.retryAfterSeconds },
        { limit: error.scope === 'address' ? 'address_share' : 'queue', what: 'pdf_extractions' },
      );
    }
    throw error;
  }
}

/** Longest file name kept, in UTF-8 bytes (what file systems allow): a longer name would be
 * stored and echoed back whole. */
const maxFileNameBytes = 255;

/** The client's file name without any path, control or bidi-override characters, cut to 255 UTF-8 bytes at a character boundary. */
function cleanFileName(fileName: string): string {
  // eslint-disable-next-line no-control-regex
  const bare = basename(fileName.replace(/\\/gu, '/')).replace(/[\u0000-\u001f\u007f\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu, '').trim();
  let name = '';
  let bytes = 0;
  for (const character of bare) {
    bytes += Buffer.byteLength(character);
    if (bytes > maxFileNameBytes) break;
    name += character;
  }
  return name.length > 0 ? name : 'document.pdf';
}

/** The stored document, or 404 DOCUMENT_NOT_FOUND when the id is unknown or expired. */
export async function loadDocumentOrThrow(store: DocumentStore, documentId: string): Promise<StoredDocument> {
  const document = await store.get(documentId);
  if (document === undefined) {
    throw new ApiError('DOCUMENT_NOT_FOUND', `No document ${JSON.stringify(safeSegment(documentId.slice(0, 100)))}: it is unknown or has expired (DOCUMENT_TTL_SECONDS).`);
  }
  return document;
}
