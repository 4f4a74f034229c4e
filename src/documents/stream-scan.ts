/**
 * A pass over a PDF's raw bytes before pdf.js reads it, bounding what pdf.js would decompress and
 * counting the page objects the file really holds (a page tree's /Count is only a claim).
 *
 * pdf.js keeps a decoded stream whole in memory (every layer of its filter chain), and a worker's
 * heap limit does not bound ArrayBuffers, so a decompression bomb must be refused before pdf.js sees
 * it. Streams are found by pdf.js's own rules (stream-locate.ts): every `stream` keyword after a
 * dictionary, its data after the end of that line (spaces before the line break included), its
 * /Length direct or indirect, and when /Length is wrong up to `endstream`; streams inside object
 * streams too. Each is decoded through its whole filter chain (/Filter, or /F as pdf.js also reads it,
 * names direct or indirect) with the decoders of stream-filters.ts, chunk by chunk: every layer's
 * output is counted into one budget for the whole file as it passes and dropped, so memory stays at a
 * few 64 KiB chunks a layer whatever the stream expands to, and past `maxDecodedBytes` the PDF is
 * refused. Image-codec layers are counted from their headers (image-estimate.ts), not decoded. Flate
 * is counted as pdf.js's own decoder would produce it (stream-filters.ts), and the streams of an
 * encrypted PDF that opens without a password are decrypted first as pdf.js does (pdf-decrypt.ts); one
 * that needs a password is never decoded by pdf.js. Whatever a bomb might still find is bounded by the
 * extraction process's own memory ceiling (extract-pool.ts).
 */
import { PdfRejectedError } from './errors.js';
import { estimateImageBytes, imageFilters, imageHeaderBytes } from './image-estimate.js';
import { nameOf, type PdfDict, type PdfValue } from './pdf-syntax.js';
import { chunkBytes, ascii85, asciiHex, inflate, lzw, predictor, runLength, type Decoder } from './stream-filters.js';
import { ObjectTable, locateStreams, objectIdOf, objectStreamEntries, streamData, type LocatedStream } from './stream-locate.js';
import { emptyPasswordDecryptor, type StreamDecryptor } from './pdf-decrypt.js';
import { parseDict, PdfSyntaxError, stringOf } from './pdf-syntax.js';

/** What the scan found. */
export interface StreamScan {
  /** Bytes the streams decode to (all layers of every stream), at most the limit. */
  decodedBytes: number;
  /** `/Type /Page` dictionaries in the raw bytes and in decoded streams (object streams included). */
  pageObjects: number;
  /** The trailer names an /Encrypt dictionary. */
  encrypted: boolean;
  /** The streams were decrypted (with the empty user password, as pdf.js opens the file) before they were measured. */
  decrypted: boolean;
}

/** Limits of one scan. */
export interface StreamScanLimits {
  /** Total decoded bytes allowed; above it the PDF is refused as PDF_DECOMPRESSION_LIMIT. */
  maxDecodedBytes: number;
}

/** Filters in one stream's chain at most (no real PDF uses more than three). */
const maxFilterChain = 16;

const pageObjectPattern = /\/Type\s*\/Page(?![A-Za-z0-9#])/gu;

/** Scans `bytes`; throws PdfRejectedError('PDF_DECOMPRESSION_LIMIT') when the streams decode past the limit. */
export async function scanPdfStreams(bytes: Uint8Array, limits: StreamScanLimits): Promise<StreamScan> {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const budget = new DecodeBudget(limits.maxDecodedBytes);
  const table = new ObjectTable();
  table.indexFile(buffer);
  let pageObjects = countPageObjects(buffer.toString('latin1', 0, buffer.length));
  const pending = locateStreams(buffer, table);
  const trailer = trailerDict(buffer, pending, table);
  const decryption = streamDecryptor(trailer, table);
  // Object streams first: objects they hold can be the /Filter or /Length of other streams.
  pending.sort((a, b) => Number(isObjectStream(b, table)) - Number(isObjectStream(a, table)));
  const done = new Set<string>();
  while (pending.length > 0) {
    const stream = pending.shift();
    if (stream === undefined || done.has(stream.key)) continue;
    done.add(stream.key);
    const keep = isObjectStream(stream, table);
    const decoded = await decodeStream(stream, table, budget, keep, decryption);
    pageObjects += decoded.pageObjects;
    if (keep && decoded.bytes !== undefined) {
      const entries = objectStreamEntries(decoded.bytes, stream.dict, table);
      table.addObjectStream(decoded.bytes, entries);
      pending.unshift(...locateStreams(decoded.bytes, table, entries, stream.key));
    }
  }
  return {
    decodedBytes: budget.used,
    pageObjects,
    encrypted: trailer?.has('Encrypt') === true || /\/Encrypt[\s/<[0-9]/u.test(trailerOf(buffer)),
    decrypted: decryption !== undefined,
  };
}

/**
 * The dictionary pdf.js takes the file's /Encrypt and /ID from: the last `trailer`, else the last
 * cross-reference stream's dictionary.
 */
function trailerDict(buffer: Buffer, streams: readonly LocatedStream[], table: ObjectTable): PdfDict | undefined {
  const at = buffer.lastIndexOf('trailer');
  if (at >= 0) {
    try {
      return parseDict(buffer, buffer.indexOf('<<', at)).value;
    } catch (error) {
      if (!(error instanceof PdfSyntaxError)) throw error;
    }
  }
  return streams.findLast((stream) => nameOf(table.resolve(stream.dict.get('Type'))) === 'XRef')?.dict;
}

/** How this file's streams are decrypted (with the empty password), and whether its metadata is in clear. */
interface Decryption {
  decrypt: StreamDecryptor;
  metadataInClear: boolean;
}

/** How pdf.js decrypts this file's streams with the empty password, if it is encrypted and that opens it. */
function streamDecryptor(trailer: PdfDict | undefined, table: ObjectTable): Decryption | undefined {
  const encrypt = table.resolve(trailer?.get('Encrypt'));
  if (!(encrypt instanceof Map)) return undefined;
  const ids = table.resolve(trailer?.get('ID'));
  const fileId = Array.isArray(ids) ? (stringOf(table.resolve(ids[0])) ?? new Uint8Array(0)) : new Uint8Array(0);
  const decrypt = emptyPasswordDecryptor(encrypt, fileId, (value) => table.resolve(value));
  if (decrypt === undefined) return undefined;
  return { decrypt, metadataInClear: table.resolve(encrypt.get('EncryptMetadata')) === false };
}

function isObjectStream(stream: LocatedStream, table: ObjectTable): boolean {
  return nameOf(table.resolve(stream.dict.get('Type'))) === 'ObjStm';
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

function trailerOf(buffer: Buffer): string {
  return buffer.toString('latin1', Math.max(0, buffer.length - 4096), buffer.length);
}

/** One filter of a chain, its /DecodeParms resolved. */
interface FilterStep {
  name: string;
  params: PdfDict | undefined;
}

/** The filter chain as pdf.js reads it: /F before /Filter, /DP before /DecodeParms, references followed. */
function filterChain(dict: PdfDict, table: ObjectTable): FilterStep[] {
  const filter = table.resolve(dict.get('F') ?? dict.get('Filter'));
  const params = table.resolve(dict.get('DP') ?? dict.get('DecodeParms'));
  const single = nameOf(filter);
  if (single !== undefined) return [{ name: single, params: asDict(params) }];
  if (!Array.isArray(filter)) return [];
  if (filter.length > maxFilterChain) {
    throw new PdfRejectedError(
      'PDF_DECOMPRESSION_LIMIT',
      `A stream of the PDF has ${filter.length} filters; more than ${maxFilterChain} are refused (it looks like a decompression bomb).`,
    );
  }
  const steps: FilterStep[] = [];
  for (const [index, entry] of filter.entries()) {
    const name = nameOf(table.resolve(entry));
    // pdf.js fails the whole stream on a filter that is not a name: nothing after it is decoded.
    if (name === undefined) break;
    const param = Array.isArray(params) ? table.resolve(params[index]) : undefined;
    steps.push({ name, params: asDict(param) });
  }
  return steps;
}

function asDict(value: PdfValue): PdfDict | undefined {
  return value instanceof Map ? value : undefined;
}

function decoderFor(step: FilterStep): Decoder[] {
  const predicted = (decoder: Decoder): Decoder[] => {
    const after = predictor(step.params);
    return after === undefined ? [decoder] : [decoder, after];
  };
  switch (step.name) {
    case 'FlateDecode':
    case 'Fl':
      return predicted(inflate);
    case 'LZWDecode':
    case 'LZW': {
      const early = step.params?.get('EarlyChange');
      return predicted(lzw(typeof early === 'number' ? early : 1));
    }
    case 'ASCIIHexDecode':
    case 'AHx':
      return [asciiHex];
    case 'ASCII85Decode':
    case 'A85':
      return [ascii85];
    case 'RunLengthDecode':
    case 'RL':
      return [runLength];
    default:
      // Crypt and names pdf.js does not know pass the data through unchanged.
      return [];
  }
}

interface Decoded {
  pageObjects: number;
  /** The decoded bytes, when asked to keep them (object streams). */
  bytes: Uint8Array | undefined;
}

/** Decodes one stream through its chain, counting every layer into `budget`. */
async function decodeStream(
  stream: LocatedStream,
  table: ObjectTable,
  budget: DecodeBudget,
  keep: boolean,
  decryption: Decryption | undefined,
): Promise<Decoded> {
  const steps = filterChain(stream.dict, table);
  const data = decrypted(stream, table, streamData(stream, table), decryption);
  if (steps.length === 0 || data.length === 0) {
    // Unfiltered: pdf.js reads it in place; its size is the file's.
    return { pageObjects: 0, bytes: keep ? data : undefined };
  }
  let source: AsyncIterable<Uint8Array> = chunksOf(data);
  let sizeOfInput = data.length;
  for (const step of steps) {
    if (imageFilters.has(step.name)) {
      await countImageLayer(step, source, sizeOfInput, stream.dict, budget);
      return { pageObjects: 0, bytes: undefined };
    }
    for (const decoder of decoderFor(step)) source = counted(decoder(source), budget);
    sizeOfInput = -1;
  }
  const pages = new PageCounter();
  const kept: Uint8Array[] = [];
  for await (const chunk of source) {
    pages.add(chunk);
    if (keep) kept.push(new Uint8Array(chunk));
  }
  return { pageObjects: pages.count, bytes: keep ? new Uint8Array(Buffer.concat(kept)) : undefined };
}

/**
 * The stream's data as pdf.js decodes it: decrypted with its object's key in an encrypted file, except
 * cross-reference streams and, under `/EncryptMetadata false`, metadata streams (pdf.js reads both in
 * clear). A stream of a decoded object stream was decrypted with that stream.
 */
function decrypted(stream: LocatedStream, table: ObjectTable, data: Uint8Array, decryption: Decryption | undefined): Uint8Array {
  if (decryption === undefined || data.length === 0) return data;
  const type = nameOf(table.resolve(stream.dict.get('Type')));
  if (type === 'XRef' || (type === 'Metadata' && decryption.metadataInClear)) return data;
  const id = objectIdOf(stream, table);
  return id === undefined ? data : decryption.decrypt(data, id.num, id.gen);
}

/**
 * An image codec's layer: its input is drained (the layers before it are counted as it passes), and
 * what the codec would decode to is counted from the header, unless the stream is an image XObject
 * (`/Subtype /Image`), which text extraction never decodes.
 */
async function countImageLayer(
  step: FilterStep,
  input: AsyncIterable<Uint8Array>,
  knownSize: number,
  dict: PdfDict,
  budget: DecodeBudget,
): Promise<void> {
  const header: Uint8Array[] = [];
  let headerLength = 0;
  let total = 0;
  for await (const chunk of input) {
    total += chunk.length;
    if (headerLength < imageHeaderBytes) {
      header.push(new Uint8Array(chunk));
      headerLength += chunk.length;
    }
  }
  if (dict.get('Subtype') !== undefined && nameOf(dict.get('Subtype')) === 'Image') return;
  budget.take(estimateImageBytes(step.name, Buffer.concat(header), knownSize >= 0 ? knownSize : total, step.params, dict));
}

/** `data` in pieces of `chunkBytes` (the first decoder never gets a megabyte at once). */
async function* chunksOf(data: Uint8Array): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < data.length; at += chunkBytes) yield data.subarray(at, Math.min(data.length, at + chunkBytes));
}

/** The chunks of `source`, each taken from the budget as it passes. */
async function* counted(source: AsyncGenerator<Uint8Array>, budget: DecodeBudget): AsyncGenerator<Uint8Array> {
  try {
    for await (const chunk of source) {
      budget.take(chunk.length);
      yield chunk;
    }
  } finally {
    await source.return(undefined);
  }
}

/** Counts `/Type /Page` across chunk boundaries (a match cut in two is found in the carried tail). */
class PageCounter {
  count = 0;
  private tail = '';

  add(chunk: Uint8Array): void {
    const text = this.tail + Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('latin1');
    this.count += countPageObjects(text);
    // Keep enough to complete a match cut at the end, but never a whole match (it would count twice).
    const keep = text.slice(-24);
    const lastMatch = keep.lastIndexOf('/Type');
    this.tail = lastMatch >= 0 && countPageObjects(keep.slice(lastMatch)) > 0 ? '' : keep;
  }
}

