/**
 * The uploaded file of `POST /v1/documents`, streamed to a file of its own as it arrives (hashed chunk
 * by chunk on the way), never held whole in the main process: 30 uploads of 20 MB held whole took the
 * process past 1.4 GB. The extract process reads the file from disk; the route deletes it whatever the
 * outcome.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';

/** An upload on disk. */
export interface SpooledUpload {
  /** The file holding the upload's bytes (mode 0600); the caller removes it. */
  path: string;
  fileName: string;
  /** Hex SHA-256 of the bytes, hashed chunk by chunk as they arrived. */
  sha256: string;
  /** The first bytes of the file (where a `%PDF-` header must be). */
  head: Buffer;
  byteLength: number;
}

/** Bytes of the file kept in memory for the PDF header check (`looksLikePdf`). */
const headBytes = 1024;

/** A folder of the process's own under the system's temporary folder, for uploads on their way to the extractor. */
export async function createSpoolFolder(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'study-helper-uploads-'));
}

/** Removes the spool folder and whatever is left in it (a closing app). */
export async function removeSpoolFolder(folder: string): Promise<void> {
  await rm(folder, { recursive: true, force: true });
}

/** Stops reading once `signal` aborts (the upload lost its place): its reason is thrown at once. */
export interface SpoolOptions {
  folder: string;
  maxBytes: number;
  maxUploadMb: number;
  signal?: AbortSignal;
}

/**
 * Reads the multipart body, the field `file` streamed to a new file in `folder`. Throws ApiError for
 * every refusal (413 past `maxBytes`, 400 for a malformed form, 415 for an empty file): past `maxBytes`, or
 * once `signal` aborts, at once, without reading the rest of the body; the file is removed on every failure.
 */
export async function spoolUpload(fastify: FastifyInstance, request: FastifyRequest, options: SpoolOptions): Promise<SpooledUpload> {
  const errors = fastify.multipartErrors;
  let upload: SpooledUpload | undefined;
  const path = join(options.folder, `${randomUUID()}.pdf`);
  let out: WriteStream | undefined;
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
      const head: Buffer[] = [];
      let length = 0;
      out = createWriteStream(path, { flags: 'wx', mode: 0o600 });
      // The disk's refusal, kept until the loop next looks (an 'error' nobody listens to would be thrown).
      let writeError: unknown;
      out.on('error', (error) => {
        writeError = error;
      });
      // Over MAX_UPLOAD_MB, or the place lost to another address (`signal`): the file stream is failed at
      // once, so the loop below throws and the route answers while the client is still sending. The rest of
      // the body is never read (the answer closes the connection: app.ts, pipelining.ts); read to its end, it
      // cost the main thread the whole body of every such upload, throwing it away.
      const file = part.file;
      const stop = (error: unknown): void => {
        file.destroy(error instanceof Error ? error : new Error(String(error)));
      };
      const tooLarge = (): void => stop(new errors.RequestFileTooLargeError());
      const lost = (): void => stop(options.signal?.reason);
      file.once('limit', tooLarge);
      options.signal?.addEventListener('abort', lost, { once: true });
      try {
        if (options.signal?.aborted === true) lost();
        for await (const chunk of file as AsyncIterable<Buffer>) {
          if (length < headBytes) head.push(chunk.subarray(0, headBytes - length));
          length += chunk.byteLength;
          if (length > options.maxBytes) throw new errors.RequestFileTooLargeError();
          hash.update(chunk);
          // Back-pressure: the socket is read no faster than the disk takes it.
          if (!out.write(chunk)) await settled(out, 'drain');
          if (writeError !== undefined) throw writeError;
        }
      } finally {
        file.removeListener('limit', tooLarge);
        options.signal?.removeEventListener('abort', lost);
      }
      out.end();
      await settled(out, 'finish');
      if (writeError !== undefined) throw writeError;
      if (file.truncated) throw new errors.RequestFileTooLargeError();
      upload = { path, fileName: cleanFileName(part.filename), sha256: hash.digest('hex'), head: Buffer.concat(head), byteLength: length };
    }
  } catch (error) {
    out?.destroy();
    await rm(path, { force: true });
    throw toApiError(errors, error, options.maxUploadMb);
  }
  if (upload === undefined) throw new ApiError('INVALID_REQUEST', 'The form has no file in the field "file".');
  if (upload.byteLength === 0) {
    await rm(path, { force: true });
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The file is empty, not a PDF.');
  }
  return upload;
}

/**
 * Resolves once `out` emits `event`, or closes (after an error, or destroyed). Not a race against a promise
 * of the stream's error: each race leaves a reaction on that promise, which never settles while the file is
 * written, so a long upload kept one per chunk alive (a paced one for minutes: old-generation garbage).
 */
function settled(out: WriteStream, event: 'drain' | 'finish'): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      out.removeListener(event, done);
      out.removeListener('close', done);
      resolve();
    };
    out.once(event, done);
    out.once('close', done);
  });
}

function toApiError(errors: FastifyInstance['multipartErrors'], error: unknown, maxUploadMb: number): unknown {
  if (error instanceof errors.RequestFileTooLargeError) {
    return new ApiError('FILE_TOO_LARGE', `The file is larger than MAX_UPLOAD_MB (${maxUploadMb} MB).`, { maxUploadMb });
  }
  if (error instanceof errors.FilesLimitError) return new ApiError('INVALID_REQUEST', 'Send exactly one file, in the field "file".');
  if (error instanceof errors.PartsLimitError || error instanceof errors.FieldsLimitError) {
    return new ApiError('INVALID_REQUEST', 'The form has too many parts; send only the field "file".');
  }
  if (error instanceof errors.InvalidMultipartContentTypeError) {
    return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Send the PDF as multipart/form-data in the field "file".');
  }
  if (error instanceof ApiError) return error;
  // The place was taken by another address (reservation aborted): the route answers it.
  if (error instanceof Error && error.name === 'PdfExtractorBusyError') return error;
  // The disk refused the file (ENOSPC, EACCES): not a fault of the request, so not a 400.
  if (error instanceof Error && 'syscall' in error) return error;
  return new ApiError('INVALID_REQUEST', `The multipart body could not be read: ${error instanceof Error ? error.message : String(error)}`);
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
