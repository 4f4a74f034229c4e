/**
 * Where a PDF's streams are, found by the rules pdf.js's Parser.makeStream follows (stream-scan.ts
 * decodes them): a `stream` keyword after a dictionary; the data starts after the end of that line
 * (Lexer.skipToNextLine: anything up to the first CR, LF or CRLF is skipped, so `stream   \n` and
 * `stream\r` both work); /Length, direct or an indirect reference, is believed only when `endstream`
 * follows the data, else the data runs to the first `endstream` (or its truncations pdf.js accepts).
 * A stream found in the raw bytes or inside an object stream, whatever the cross-reference table says:
 * pdf.js may reach any object through it or through its own reconstruction of a broken table.
 */
import { isRegular, isWhiteSpace, parseDict, parseObject, PdfSyntaxError, refOf, skipSpace, type PdfDict, type PdfValue } from './pdf-syntax.js';

/** A stream found: its dictionary and where its data starts. */
export interface LocatedStream {
  /** Unique within a scan (where it was found). */
  key: string;
  /** The bytes it was found in (the file, or a decoded object stream). */
  bytes: Uint8Array;
  dict: PdfDict;
  /** Offset of the first data byte in `bytes`. */
  dataStart: number;
}

/** An object inside a decoded object stream: its number and offset. */
export interface ObjectStreamEntry {
  num: number;
  at: number;
}

const streamKeyword = Buffer.from('stream', 'latin1');
const objKeyword = Buffer.from('obj', 'latin1');
const endKeyword = Buffer.from('endstream', 'latin1');
/** How far back a dictionary is looked for when no `obj` header parses (a hostile `<<` in a string). */
const backwardWindow = 64 * 1024;
const maxResolveDepth = 8;
/** Bytes all backward walks of one pass may examine together. */
const maxBackwardWalkBytes = 32 * 1024 * 1024;

/** The file's objects by `num gen`, for following references (/Length, /Filter, /DecodeParms, /Type). */
export class ObjectTable {
  private readonly places = new Map<string, { bytes: Uint8Array; at: number }>();
  private readonly parsed = new Map<string, PdfValue>();
  /** Offsets just after each `N G obj` of the file, ascending. */
  headers: number[] = [];

  /**
   * Finds every `N G obj` header of the raw file (the last definition of a number wins, as in an
   * update). Each `obj` is found with indexOf and its numbers read backwards, so the pass is linear
   * (a regular expression starting at every digit of a long run of digits is quadratic).
   */
  indexFile(buffer: Buffer): void {
    for (let at = buffer.indexOf(objKeyword); at >= 0; at = buffer.indexOf(objKeyword, at + objKeyword.length)) {
      const end = at + objKeyword.length;
      if (isRegular(buffer[end])) continue;
      const gen = digitsBefore(buffer, at);
      if (gen === undefined) continue;
      const num = digitsBefore(buffer, gen.start);
      if (num === undefined) continue;
      this.places.set(`${num.value} ${gen.value}`, { bytes: buffer, at: end });
      this.headers.push(end);
    }
  }

  /** Objects of a decoded object stream (generation 0); a number the file defines itself keeps that. */
  addObjectStream(bytes: Uint8Array, entries: readonly ObjectStreamEntry[]): void {
    for (const entry of entries) {
      const key = `${entry.num} 0`;
      if (!this.places.has(key)) this.places.set(key, { bytes, at: entry.at });
    }
  }

  /** `value` with references followed (a missing or unreadable object is undefined, as pdf.js's null). */
  resolve(value: PdfValue, depth = 0): PdfValue {
    const ref = refOf(value);
    if (ref === undefined) return value;
    if (depth >= maxResolveDepth) return undefined;
    const key = `${ref.num} ${ref.gen}`;
    if (!this.parsed.has(key)) {
      const place = this.places.get(key);
      let target: PdfValue;
      if (place !== undefined) {
        try {
          target = parseObject(place.bytes, place.at).value;
        } catch (error) {
          if (!(error instanceof PdfSyntaxError)) throw error;
        }
      }
      // Only cache what was found: an object stream decoded later may still define it.
      if (place === undefined) return undefined;
      this.parsed.set(key, target);
    }
    return this.resolve(this.parsed.get(key), depth + 1);
  }
}

/**
 * The streams in `bytes`: every `stream` keyword that follows a dictionary. `entries` are the object
 * offsets of a decoded object stream (there objects have no `obj` header).
 */
export function locateStreams(
  bytes: Uint8Array,
  table: ObjectTable,
  entries?: readonly ObjectStreamEntry[],
  parentKey = 'file',
): LocatedStream[] {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const starts = entries === undefined ? table.headers : entries.map((entry) => entry.at).sort((a, b) => a - b);
  const search = new DictSearch(bytes, starts);
  const found: LocatedStream[] = [];
  for (let at = view.indexOf(streamKeyword); at >= 0; at = view.indexOf(streamKeyword, at + streamKeyword.length)) {
    if (isRegular(bytes[at - 1]) || isRegular(bytes[at + streamKeyword.length])) continue;
    const dict = search.dictBefore(at);
    if (dict === undefined) continue;
    found.push({ key: `${parentKey}:${at}`, bytes, dict, dataStart: afterLine(bytes, at + streamKeyword.length) });
  }
  return found;
}

/**
 * The integer that ends, after white space, right before `at` (at least one white-space byte between),
 * starting after a non-regular byte; at most 10 digits are read.
 */
function digitsBefore(bytes: Uint8Array, at: number): { value: number; start: number } | undefined {
  let pos = at - 1;
  if (!isWhiteSpace(bytes[pos])) return undefined;
  while (pos >= 0 && isWhiteSpace(bytes[pos])) pos -= 1;
  const last = pos;
  while (pos >= 0 && last - pos < 10 && (bytes[pos] ?? 0) >= 0x30 && (bytes[pos] ?? 0) <= 0x39) pos -= 1;
  if (pos === last || isRegular(bytes[pos])) return undefined;
  const digits = Buffer.from(bytes.buffer, bytes.byteOffset + pos + 1, last - pos).toString('latin1');
  return { value: Number(digits), start: pos + 1 };
}

/** pdf.js Lexer.skipToNextLine: past the first CR, LF or CRLF. */
function afterLine(bytes: Uint8Array, from: number): number {
  for (let pos = from; pos < bytes.length; pos += 1) {
    if (bytes[pos] === 0x0d) return bytes[pos + 1] === 0x0a ? pos + 2 : pos + 1;
    if (bytes[pos] === 0x0a) return pos + 1;
  }
  return bytes.length;
}

/**
 * Finds the dictionary that ends right before a `stream` keyword: parsed from the nearest object starts
 * before it (each start parsed once, however many keywords follow it), else from a `<<` found walking
 * back over nested `<<`/`>>` (a few tries, so a `<<` inside a string cannot hide the real one). The
 * walks share one budget of bytes, so a file of `>> stream` repeated cannot make the pass quadratic.
 */
class DictSearch {
  private readonly parsedAt = new Map<number, { dict: PdfDict; end: number } | undefined>();
  private walkBudget = maxBackwardWalkBytes;

  constructor(
    private readonly bytes: Uint8Array,
    private readonly starts: readonly number[],
  ) {}

  dictBefore(at: number): PdfDict | undefined {
    const nearest = lastBefore(this.starts, at);
    for (let index = nearest; index >= 0 && index > nearest - 4; index -= 1) {
      const parsed = this.parse(this.starts[index] ?? 0);
      if (parsed !== undefined && skipSpace(this.bytes, parsed.end) === at) return parsed.dict;
    }
    if (this.walkBudget <= 0) return undefined;
    const walk = dictStartsBackward(this.bytes, at);
    this.walkBudget -= walk.walked;
    for (const start of walk.starts) {
      const parsed = this.parse(start);
      if (parsed !== undefined && skipSpace(this.bytes, parsed.end) === at) return parsed.dict;
    }
    return undefined;
  }

  private parse(start: number): { dict: PdfDict; end: number } | undefined {
    if (this.parsedAt.has(start)) return this.parsedAt.get(start);
    let parsed: { dict: PdfDict; end: number } | undefined;
    try {
      const result = parseDict(this.bytes, start);
      parsed = { dict: result.value, end: result.end };
    } catch (error) {
      if (!(error instanceof PdfSyntaxError)) throw error;
    }
    this.parsedAt.set(start, parsed);
    return parsed;
  }
}

/** Index of the last value of ascending `values` below `limit`, or −1. */
function lastBefore(values: readonly number[], limit: number): number {
  let low = 0;
  let high = values.length - 1;
  let best = -1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if ((values[middle] ?? 0) < limit) {
      best = middle;
      low = middle + 1;
    } else high = middle - 1;
  }
  return best;
}

/** Candidate `<<` offsets of the dictionary ending before `at`, nearest first, at most 8; and the bytes walked. */
function dictStartsBackward(bytes: Uint8Array, at: number): { starts: number[]; walked: number } {
  let pos = at - 1;
  while (pos >= 0 && isWhiteSpace(bytes[pos])) pos -= 1;
  if (bytes[pos] !== 0x3e || bytes[pos - 1] !== 0x3e) return { starts: [], walked: at - pos };
  const starts: number[] = [];
  let depth = 0;
  const floor = Math.max(0, at - backwardWindow);
  while (pos > floor && starts.length < 8) {
    if (bytes[pos] === 0x3e && bytes[pos - 1] === 0x3e) {
      depth += 1;
      pos -= 2;
    } else if (bytes[pos] === 0x3c && bytes[pos - 1] === 0x3c) {
      depth -= 1;
      if (depth <= 0) {
        starts.push(pos - 1);
        depth = 1;
      }
      pos -= 2;
    } else pos -= 1;
  }
  return { starts, walked: at - pos };
}

/** The stream's data as pdf.js delimits it. */
export function streamData(stream: LocatedStream, table: ObjectTable): Uint8Array {
  const { bytes, dataStart } = stream;
  const length = table.resolve(stream.dict.get('Length'));
  if (typeof length === 'number' && Number.isInteger(length) && length >= 0 && dataStart + length <= bytes.length) {
    const after = skipSpace(bytes, dataStart + length);
    if (startsWith(bytes, after, endKeyword) && !isRegular(bytes[after + endKeyword.length])) {
      return bytes.subarray(dataStart, dataStart + length);
    }
  }
  return bytes.subarray(dataStart, findEndstream(bytes, dataStart));
}

/**
 * pdf.js Parser.#findStreamLength: the first `endstream`, or `endsteam`/`endstrea` followed by white
 * space; without one the data runs to the end (pdf.js fails the object; counting it all is safe).
 */
function findEndstream(bytes: Uint8Array, from: number): number {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let best = bytes.length;
  const full = view.indexOf(endKeyword, from);
  if (full >= 0) best = full;
  for (const partial of ['endsteam', 'endstrea']) {
    const needle = Buffer.from(partial, 'latin1');
    for (let at = view.indexOf(needle, from); at >= 0 && at < best; at = view.indexOf(needle, at + 1)) {
      if (isWhiteSpace(bytes[at + needle.length])) {
        best = at;
        break;
      }
    }
  }
  return best;
}

function startsWith(bytes: Uint8Array, at: number, prefix: Uint8Array): boolean {
  if (at + prefix.length > bytes.length) return false;
  for (let index = 0; index < prefix.length; index += 1) if (bytes[at + index] !== prefix[index]) return false;
  return true;
}

/** The `N` (number, offset) pairs at the head of a decoded object stream, offsets made absolute by /First. */
export function objectStreamEntries(decoded: Uint8Array, dict: PdfDict, table: ObjectTable): ObjectStreamEntry[] {
  const count = table.resolve(dict.get('N'));
  const first = table.resolve(dict.get('First'));
  if (typeof count !== 'number' || typeof first !== 'number' || !Number.isInteger(first) || first < 0) return [];
  const entries: ObjectStreamEntry[] = [];
  let pos = 0;
  try {
    for (let index = 0; index < Math.min(count, 1_000_000); index += 1) {
      const num = parseObject(decoded, pos);
      const offset = parseObject(decoded, num.end);
      if (typeof num.value !== 'number' || typeof offset.value !== 'number') break;
      entries.push({ num: num.value, at: first + offset.value });
      pos = offset.end;
    }
  } catch (error) {
    if (!(error instanceof PdfSyntaxError)) throw error;
  }
  return entries;
}

/**
 * The `num gen` of the object a stream of the file belongs to: the nearest `N G obj` header before its
 * data (pdf.js decrypts a stream with the key of the object it fetched). Undefined for a stream of a
 * decoded object stream (encrypted with that stream, not by itself) or one before any header.
 */
export function objectIdOf(stream: LocatedStream, table: ObjectTable): { num: number; gen: number } | undefined {
  if (!stream.key.startsWith('file:')) return undefined;
  const header = table.headers[lastBefore(table.headers, stream.dataStart)];
  if (header === undefined) return undefined;
  const gen = digitsBefore(stream.bytes, header - objKeyword.length);
  const num = gen === undefined ? undefined : digitsBefore(stream.bytes, gen.start);
  return gen === undefined || num === undefined ? undefined : { num: num.value, gen: gen.value };
}
