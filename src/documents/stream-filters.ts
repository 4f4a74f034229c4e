/**
 * The PDF standard filters as incremental decoders for the stream scan (stream-scan.ts): each turns a
 * stream of chunks into a stream of chunks of at most `chunkBytes`, so a layer that expands a
 * thousandfold (a Flate, LZW or RunLength bomb) never holds more than a chunk, and the scan counts
 * every layer's output into its budget as it passes, stopping the moment the budget is spent.
 * They follow pdf.js's decoders (src/core/*_stream.js) where a hostile file could tell them apart:
 * where each stops, what it skips. A corrupt stream ends its output where pdf.js's decoder ends it.
 */
import { Readable } from 'node:stream';
import { constants, createInflate } from 'node:zlib';
import { inflateAsPdfJs } from './flate-lenient.js';
import type { PdfDict } from './pdf-syntax.js';

/** Chunks in, chunks out. */
export type Decoder = (input: AsyncIterable<Uint8Array>) => AsyncGenerator<Uint8Array>;

/** Largest chunk a decoder emits. */
export const chunkBytes = 64 * 1024;

/** Collects output bytes and hands them over a chunk at a time. */
class Output {
  private buffer = new Uint8Array(chunkBytes);
  length = 0;

  get full(): boolean {
    return this.length === chunkBytes;
  }

  push(byte: number): void {
    this.buffer[this.length] = byte;
    this.length += 1;
  }

  take(): Uint8Array {
    const chunk = this.buffer.subarray(0, this.length);
    this.buffer = new Uint8Array(chunkBytes);
    this.length = 0;
    return chunk;
  }
}

/**
 * FlateDecode, counted as pdf.js decodes it. zlib's streaming inflate is the fast path (nothing is
 * inflated ahead of the reader); where zlib stops on a corrupt stream pdf.js does not (a back-reference
 * "too far back" is read as zeros, a wrong checksum ignored), so the rest is decoded by a port of pdf.js's
 * own decoder (flate-lenient.ts) from the start, the bytes zlib already gave skipped. The compressed
 * input is held for that: the stream's own bytes for a first filter, a counted layer's output otherwise.
 */
export async function* inflate(input: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const compressed: Uint8Array[] = [];
  for await (const chunk of input) compressed.push(chunk);
  let produced = 0;
  let strictFailed = false;
  const source = Readable.from(compressed, { objectMode: false });
  const inflater = createInflate({ finishFlush: constants.Z_SYNC_FLUSH, chunkSize: chunkBytes });
  source.on('error', (error) => inflater.destroy(error));
  source.pipe(inflater);
  try {
    for await (const chunk of inflater) {
      produced += (chunk as Buffer).length;
      yield chunk as Buffer;
    }
  } catch {
    strictFailed = true;
  } finally {
    source.destroy();
    inflater.destroy();
  }
  if (!strictFailed) return;
  const whole = compressed.length === 1 && compressed[0] !== undefined ? compressed[0] : Buffer.concat(compressed);
  let skip = produced;
  for (const chunk of inflateAsPdfJs(whole, chunkBytes)) {
    if (skip >= chunk.length) {
      skip -= chunk.length;
      continue;
    }
    yield skip > 0 ? chunk.subarray(skip) : chunk;
    skip = 0;
  }
}

/** ASCIIHexDecode: hex digits in pairs, anything else skipped, `>` ends (pdf.js AsciiHexStream). */
export async function* asciiHex(input: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const out = new Output();
  let high = -1;
  for await (const chunk of input) {
    for (const byte of chunk) {
      if (byte === 0x3e) {
        if (high >= 0) out.push(high << 4);
        if (out.length > 0) yield out.take();
        return;
      }
      const digit = hexDigit(byte);
      if (digit < 0) continue;
      if (high < 0) high = digit;
      else {
        out.push((high << 4) | digit);
        high = -1;
        if (out.full) yield out.take();
      }
    }
  }
  if (high >= 0) out.push(high << 4);
  if (out.length > 0) yield out.take();
}

function hexDigit(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if ((byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)) return (byte & 0x0f) + 9;
  return -1;
}

/** ASCII85Decode: `z` is four zeros, white space skipped, `~` ends (pdf.js Ascii85Stream). */
export async function* ascii85(input: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const out = new Output();
  const group: number[] = [];
  const flushGroup = (): void => {
    const count = group.length;
    if (count < 2) return;
    while (group.length < 5) group.push(84);
    let value = 0;
    for (const digit of group) value = value * 85 + digit;
    for (let index = 0; index < count - 1; index += 1) out.push((value >>> (24 - 8 * index)) & 0xff);
    group.length = 0;
  };
  for await (const chunk of input) {
    for (const byte of chunk) {
      if (byte === 0x7e) {
        flushGroup();
        if (out.length > 0) yield out.take();
        return;
      }
      if (byte === 0x7a && group.length === 0) {
        for (let index = 0; index < 4; index += 1) {
          out.push(0);
          if (out.full) yield out.take();
        }
        continue;
      }
      if (byte < 0x21 || byte > 0x75) continue;
      group.push(byte - 0x21);
      if (group.length === 5) {
        flushGroup();
        if (out.length > chunkBytes - 8) yield out.take();
      }
    }
  }
  flushGroup();
  if (out.length > 0) yield out.take();
}

/** RunLengthDecode: n < 128 copies n + 1 bytes, n > 128 repeats the next byte 257 − n times, 128 ends. */
export async function* runLength(input: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const out = new Output();
  let literal = 0;
  let repeat = 0;
  for await (const chunk of input) {
    for (const byte of chunk) {
      if (literal > 0) {
        out.push(byte);
        literal -= 1;
        if (out.full) yield out.take();
      } else if (repeat > 0) {
        for (let index = 0; index < repeat; index += 1) {
          out.push(byte);
          if (out.full) yield out.take();
        }
        repeat = 0;
      } else if (byte === 128) {
        if (out.length > 0) yield out.take();
        return;
      } else if (byte < 128) literal = byte + 1;
      else repeat = 257 - byte;
    }
  }
  if (out.length > 0) yield out.take();
}

/**
 * LZWDecode, a port of pdf.js's LZWStream loop: 9–12-bit codes, 256 clears, 257 ends, `earlyChange` as
 * in /DecodeParms. Like pdf.js, a code past the table repeats the last string one byte longer, with no
 * end: a run of such codes grows quadratically (a few KB make gigabytes in pdf.js), which is why this
 * decoder counts what pdf.js would produce rather than trusting the 4096-entry table to bound it.
 */
export function lzw(earlyChange: number): Decoder {
  return async function* lzwDecode(input) {
    const out = new Output();
    const values = new Uint8Array(4096);
    const lengths = new Uint16Array(4096);
    const previousCodes = new Uint16Array(4096);
    const sequence = new Uint8Array(4096);
    for (let code = 0; code < 256; code += 1) {
      values[code] = code;
      lengths[code] = 1;
    }
    let sequenceLength = 0;
    let nextCode = 258;
    let codeLength = 9;
    let previous = 0;
    let bits = 0;
    let bitCount = 0;
    for await (const chunk of input) {
      for (const byte of chunk) {
        bits = ((bits << 8) | byte) & 0xffffff;
        bitCount += 8;
        if (bitCount < codeLength) continue;
        bitCount -= codeLength;
        const code = (bits >>> bitCount) & ((1 << codeLength) - 1);
        const hasPrevious = sequenceLength > 0;
        if (code < 256) {
          sequence[0] = code;
          sequenceLength = 1;
        } else if (code >= 258) {
          if (code < nextCode) {
            sequenceLength = lengths[code] ?? 0;
            for (let index = sequenceLength - 1, at = code; index >= 0; index -= 1) {
              sequence[index] = values[at] ?? 0;
              at = previousCodes[at] ?? 0;
            }
          } else {
            if (sequenceLength < sequence.length) sequence[sequenceLength] = sequence[0] ?? 0;
            sequenceLength += 1;
          }
        } else if (code === 256) {
          codeLength = 9;
          nextCode = 258;
          sequenceLength = 0;
          continue;
        } else {
          if (out.length > 0) yield out.take();
          return;
        }
        if (hasPrevious) {
          if (nextCode < 4096) {
            previousCodes[nextCode] = previous;
            lengths[nextCode] = (lengths[previous] ?? 0) + 1;
            values[nextCode] = sequence[0] ?? 0;
          }
          nextCode += 1;
          const grown = nextCode + earlyChange;
          if ((grown & (grown - 1)) === 0) codeLength = Math.min(Math.floor(Math.log2(grown) + 1), 12);
        }
        previous = code;
        for (let index = 0; index < sequenceLength; index += 1) {
          out.push(sequence[index] ?? 0);
          if (out.full) yield out.take();
        }
      }
    }
    if (out.length > 0) yield out.take();
  };
}

/**
 * The PNG (10–15) and TIFF (2, 8-bit) predictors of /DecodeParms, as pdf.js's PredictorStream applies
 * them after Flate or LZW. Output is never larger than input; it is decoded (not just counted) because a
 * further filter in the chain reads it.
 */
export function predictor(params: PdfDict | undefined): Decoder | undefined {
  const kind = numberParam(params, 'Predictor', 1);
  if (kind <= 1) return undefined;
  const colors = numberParam(params, 'Colors', 1);
  const bitsPerComponent = numberParam(params, 'BitsPerComponent', 8);
  const columns = numberParam(params, 'Columns', 1);
  const pixelBytes = Math.max(1, Math.ceil((colors * bitsPerComponent) / 8));
  const rowBytes = Math.ceil((colors * bitsPerComponent * columns) / 8);
  if (rowBytes <= 0 || rowBytes > 1 << 24) return undefined;
  if (kind === 2) return bitsPerComponent === 8 ? tiffPredictor(rowBytes, pixelBytes) : undefined;
  return pngPredictor(rowBytes, pixelBytes);
}

function numberParam(params: PdfDict | undefined, key: string, fallback: number): number {
  const value = params?.get(key);
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : fallback;
}

function pngPredictor(rowBytes: number, pixelBytes: number): Decoder {
  return async function* png(input) {
    let previousRow = new Uint8Array(rowBytes);
    let row = new Uint8Array(rowBytes);
    let filter = -1;
    let filled = 0;
    for await (const chunk of input) {
      for (const byte of chunk) {
        if (filter < 0) {
          filter = byte;
          continue;
        }
        const left = filled >= pixelBytes ? (row[filled - pixelBytes] ?? 0) : 0;
        const up = previousRow[filled] ?? 0;
        const upLeft = filled >= pixelBytes ? (previousRow[filled - pixelBytes] ?? 0) : 0;
        row[filled] = (byte + pngPrediction(filter, left, up, upLeft)) & 0xff;
        filled += 1;
        if (filled === rowBytes) {
          yield row;
          previousRow = row;
          row = new Uint8Array(rowBytes);
          filled = 0;
          filter = -1;
        }
      }
    }
    if (filled > 0) yield row.subarray(0, filled);
  };
}

function pngPrediction(filter: number, left: number, up: number, upLeft: number): number {
  if (filter === 1) return left;
  if (filter === 2) return up;
  if (filter === 3) return (left + up) >> 1;
  if (filter === 4) {
    const estimate = left + up - upLeft;
    const toLeft = Math.abs(estimate - left);
    const toUp = Math.abs(estimate - up);
    const toUpLeft = Math.abs(estimate - upLeft);
    if (toLeft <= toUp && toLeft <= toUpLeft) return left;
    return toUp <= toUpLeft ? up : upLeft;
  }
  return 0;
}

function tiffPredictor(rowBytes: number, pixelBytes: number): Decoder {
  return async function* tiff(input) {
    let row = new Uint8Array(rowBytes);
    let filled = 0;
    for await (const chunk of input) {
      for (const byte of chunk) {
        row[filled] = (byte + (filled >= pixelBytes ? (row[filled - pixelBytes] ?? 0) : 0)) & 0xff;
        filled += 1;
        if (filled === rowBytes) {
          yield row;
          row = new Uint8Array(rowBytes);
          filled = 0;
        }
      }
    }
    if (filled > 0) yield row.subarray(0, filled);
  };
}
