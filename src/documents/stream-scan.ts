/**
 * A pass over a PDF's raw bytes before pdf.js reads it, bounding what pdf.js would decompress and
 * counting the page objects the file really holds (a page tree's /Count is only a claim).
 *
 * pdf.js keeps a decoded stream whole in memory, and a worker's `resourceLimits` do not bound
 * ArrayBuffers, so a FlateDecode bomb (1 MB of compressed zeros → 1 GB) must be refused before pdf.js
 * sees it. Every stream that starts with a zlib header is inflated here, piece by piece, counting and
 * dropping the output; a zlib stream inside a zlib stream (`/Filter [/FlateDecode /FlateDecode]`) is
 * inflated too. Memory stays at a few 64 KiB chunks whatever the stream expands to; past
 * `maxDecodedBytes` in total the PDF is refused.
 * Nothing is read from the dictionaries: a filter can be an indirect reference, and a stream marked
 * `/Subtype /Image` (which text extraction never decodes) is still decoded when a page names it as
 * its content, so images count too. Not covered: streams of an encrypted PDF (ciphertext here) and
 * LZW / RunLength streams (rare; bounded by the extraction deadline only) — docs/documents.md says so.
 */
import { Readable } from 'node:stream';
import { constants, createInflate } from 'node:zlib';
import { PdfRejectedError } from './errors.js';

/** What the scan found. */
export interface StreamScan {
  /** Bytes the zlib streams decompress to (all layers), at most the limit. */
  decodedBytes: number;
  /** `/Type /Page` dictionaries in the raw bytes and in decompressed streams (object streams included). */
  pageObjects: number;
  /** The trailer names an /Encrypt dictionary: streams are ciphertext and were not measured. */
  encrypted: boolean;
}

/** Limits of one scan. */
export interface StreamScanLimits {
  /** Total decompressed bytes allowed; above it the PDF is refused as PDF_DECOMPRESSION_LIMIT. */
  maxDecodedBytes: number;
}

const streamKeyword = Buffer.from('stream', 'latin1');
const pageObjectPattern = /\/Type\s*\/Page(?![A-Za-z0-9#])/gu;

/** Scans `bytes`; throws PdfRejectedError('PDF_DECOMPRESSION_LIMIT') when the streams expand past the limit. */
export async function scanPdfStreams(bytes: Uint8Array, limits: StreamScanLimits): Promise<StreamScan> {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const budget = new DecodeBudget(limits.maxDecodedBytes);
  let pageObjects = countPageObjects(buffer.toString('latin1', 0, buffer.length));
  let from = 0;
  for (;;) {
    const at = buffer.indexOf(streamKeyword, from);
    if (at < 0) break;
    from = at + streamKeyword.length;
    if (isEndStream(buffer, at)) continue;
    const start = dataStart(buffer, from);
    if (!hasZlibHeader(buffer, start)) continue;
    pageObjects += await inflateCounting(buffer.subarray(start), budget);
  }
  return { decodedBytes: budget.used, pageObjects, encrypted: /\/Encrypt[\s/<[0-9]/u.test(trailerOf(buffer)) };
}

class DecodeBudget {
  used = 0;

  constructor(private readonly limit: number) {}

  take(bytes: number): void {
    this.used += bytes;
    if (this.used > this.limit) {
      throw new PdfRejectedError(
        'PDF_DECOMPRESSION_LIMIT',
        `The PDF's streams decompress to more than ${formatMb(this.limit)} (PDF_MAX_DECODED_MB); it looks like a decompression bomb.`,
      );
    }
  }
}

function formatMb(bytes: number): string {
  return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
}

function countPageObjects(text: string): number {
  let count = 0;
  pageObjectPattern.lastIndex = 0;
  while (pageObjectPattern.exec(text) !== null) count += 1;
  return count;
}

function isEndStream(buffer: Buffer, at: number): boolean {
  return at >= 3 && buffer.toString('latin1', at - 3, at) === 'end';
}

/** Stream data starts after `stream` and its end of line (CRLF or LF; a lone CR is tolerated). */
function dataStart(buffer: Buffer, afterKeyword: number): number {
  if (buffer[afterKeyword] === 0x0d) return buffer[afterKeyword + 1] === 0x0a ? afterKeyword + 2 : afterKeyword + 1;
  if (buffer[afterKeyword] === 0x0a) return afterKeyword + 1;
  return afterKeyword;
}

/** A zlib header as pdf.js's FlateStream accepts it: method 8, FCHECK valid, no preset dictionary. */
function hasZlibHeader(buffer: Uint8Array, at: number): boolean {
  const cmf = buffer[at];
  const flg = buffer[at + 1];
  if (cmf === undefined || flg === undefined) return false;
  return (cmf & 0x0f) === 8 && ((cmf << 8) | flg) % 31 === 0 && (flg & 0x20) === 0;
}

function trailerOf(buffer: Buffer): string {
  return buffer.toString('latin1', Math.max(0, buffer.length - 4096), buffer.length);
}

/**
 * Inflates a zlib stream (and a zlib stream it holds), counting output into `budget` and page objects
 * in it. zlib stops at the end of the deflate data, so the bytes after it (endstream, other objects)
 * are never read; a corrupt stream just ends the count (pdf.js fails on it too).
 */
async function inflateCounting(data: Uint8Array, budget: DecodeBudget): Promise<number> {
  const pages = new PageCounter();
  try {
    const outer = inflated([data]);
    const first = await outer.next();
    if (first.done === true) return 0;
    const layer = counted(first.value, outer, budget);
    const nested = hasZlibHeader(first.value, 0);
    for await (const chunk of nested ? inflated(layer) : layer) {
      if (nested) budget.take(chunk.length);
      pages.add(chunk);
    }
  } catch (error) {
    if (error instanceof PdfRejectedError) throw error;
  }
  return pages.count;
}

/** The output of inflating `source`, chunk by chunk (backpressure: nothing is inflated ahead of the reader). */
async function* inflated(source: Iterable<Uint8Array> | AsyncIterable<Uint8Array>): AsyncGenerator<Buffer> {
  const input = Readable.from(source, { objectMode: false });
  const inflater = createInflate({ finishFlush: constants.Z_SYNC_FLUSH });
  input.on('error', (error) => inflater.destroy(error));
  input.pipe(inflater);
  try {
    for await (const chunk of inflater) yield chunk as Buffer;
  } finally {
    input.destroy();
    inflater.destroy();
  }
}

/** `first` then the rest of `rest`, each chunk taken from the budget as it passes. */
async function* counted(first: Buffer, rest: AsyncGenerator<Buffer>, budget: DecodeBudget): AsyncGenerator<Buffer> {
  budget.take(first.length);
  yield first;
  for await (const chunk of rest) {
    budget.take(chunk.length);
    yield chunk;
  }
}

/** Counts `/Type /Page` across chunk boundaries (a match cut in two is found in the carried tail). */
class PageCounter {
  count = 0;
  private tail = '';

  add(chunk: Buffer): void {
    const text = this.tail + chunk.toString('latin1', 0, chunk.length);
    this.count += countPageObjects(text);
    // Keep enough to complete a match cut at the end, but never a whole match (it would count twice).
    const keep = text.slice(-24);
    const lastMatch = keep.lastIndexOf('/Type');
    this.tail = lastMatch >= 0 && countPageObjects(keep.slice(lastMatch)) > 0 ? '' : keep;
  }
}
