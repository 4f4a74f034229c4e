/**
 * Just enough PDF object syntax for the stream scan (stream-scan.ts) to read a stream's dictionary the
 * way pdf.js's Lexer and Parser do: names, numbers, references, strings, arrays, nested dictionaries,
 * comments, strings and booleans (the encryption dictionary needs them).
 * Parsing is linear in the bytes read and bounded by `maxItems` and `maxDepth`, so a hostile
 * dictionary cannot make it super-linear.
 */

/** A PDF value as the scan sees it. `null` and other keywords read as `undefined`. */
export type PdfValue = number | boolean | PdfName | PdfRef | PdfString | PdfValue[] | PdfDict | undefined;

/** `(…)` or `<…>`: its bytes (the encryption dictionary's /O, /U, the trailer's /ID). */
interface PdfString {
  kind: 'string';
  bytes: Uint8Array;
}

/** `/Name` (with `#xx` escapes decoded). */
interface PdfName {
  kind: 'name';
  name: string;
}

/** `num gen R`. */
export interface PdfRef {
  kind: 'ref';
  num: number;
  gen: number;
}

/** `<< … >>`: keys without the slash. */
export type PdfDict = Map<string, PdfValue>;

/** A parsed value and the offset just after it. */
export interface Parsed<T> {
  value: T;
  end: number;
}

const maxDepth = 32;
const maxItems = 100_000;

/** PDF white space (pdf.js `isWhiteSpace` plus NUL, as its Lexer skips it). */
export function isWhiteSpace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09 || byte === 0x0c || byte === 0x00;
}

/** A delimiter: ( ) < > [ ] { } / %. */
function isDelimiter(byte: number | undefined): boolean {
  return (
    byte === 0x28 || byte === 0x29 || byte === 0x3c || byte === 0x3e || byte === 0x5b || byte === 0x5d ||
    byte === 0x7b || byte === 0x7d || byte === 0x2f || byte === 0x25
  );
}

/** A byte that belongs to a keyword, number or name (not white space, not a delimiter). */
export function isRegular(byte: number | undefined): boolean {
  return byte !== undefined && !isWhiteSpace(byte) && !isDelimiter(byte);
}

/** Skips white space and comments from `at`. */
export function skipSpace(bytes: Uint8Array, at: number): number {
  let pos = at;
  for (;;) {
    const byte = bytes[pos];
    if (isWhiteSpace(byte)) pos += 1;
    else if (byte === 0x25) {
      while (pos < bytes.length && bytes[pos] !== 0x0a && bytes[pos] !== 0x0d) pos += 1;
    } else return pos;
  }
}

/** The regular-character token at `at` (a keyword or number), as latin1. */
function tokenAt(bytes: Uint8Array, at: number): Parsed<string> {
  let end = at;
  while (end < bytes.length && isRegular(bytes[end])) end += 1;
  return { value: Buffer.from(bytes.buffer, bytes.byteOffset + at, end - at).toString('latin1'), end };
}

/** Thrown when the bytes are not a PDF value the scan can read; the caller skips that stream. */
export class PdfSyntaxError extends Error {}

/** Parses the dictionary starting at `at` (`<<`, after white space). */
export function parseDict(bytes: Uint8Array, at: number): Parsed<PdfDict> {
  const parsed = parseValue(bytes, skipSpace(bytes, at), { items: 0 }, 0);
  if (!(parsed.value instanceof Map)) throw new PdfSyntaxError('not a dictionary');
  return { value: parsed.value, end: parsed.end };
}

/** Parses one value at `at` (a `num gen R` reference included). */
export function parseObject(bytes: Uint8Array, at: number): Parsed<PdfValue> {
  const budget = { items: 0 };
  const first = parseValue(bytes, skipSpace(bytes, at), budget, 0);
  return withReference(bytes, first, budget);
}

interface Budget {
  items: number;
}

function parseValue(bytes: Uint8Array, at: number, budget: Budget, depth: number): Parsed<PdfValue> {
  budget.items += 1;
  if (budget.items > maxItems || depth > maxDepth) throw new PdfSyntaxError('too deep or too long');
  const byte = bytes[at];
  if (byte === undefined) throw new PdfSyntaxError('end of data');
  if (byte === 0x2f) return parseName(bytes, at + 1);
  if (byte === 0x28) return literalString(bytes, at + 1);
  if (byte === 0x3c && bytes[at + 1] === 0x3c) return parseDictBody(bytes, at + 2, budget, depth + 1);
  if (byte === 0x3c) return hexString(bytes, at + 1);
  if (byte === 0x5b) return parseArrayBody(bytes, at + 1, budget, depth + 1);
  if (!isRegular(byte)) throw new PdfSyntaxError(`unexpected byte ${byte}`);
  const token = tokenAt(bytes, at);
  const number = Number(token.value);
  if (token.value !== '' && /^[+-]?(\d+\.?\d*|\.\d+)$/u.test(token.value) && Number.isFinite(number)) {
    return { value: number, end: token.end };
  }
  if (token.value === 'true' || token.value === 'false') return { value: token.value === 'true', end: token.end };
  if (token.value === 'null') return { value: undefined, end: token.end };
  throw new PdfSyntaxError(`keyword ${token.value.slice(0, 20)}`);
}

/** `first`, or `first gen R` read as a reference when it is one. */
function withReference(bytes: Uint8Array, first: Parsed<PdfValue>, budget: Budget): Parsed<PdfValue> {
  if (!isNonNegativeInteger(first.value)) return first;
  const genAt = skipSpace(bytes, first.end);
  if (!isRegular(bytes[genAt])) return first;
  const gen = tokenAt(bytes, genAt);
  if (!/^\d+$/u.test(gen.value)) return first;
  const rAt = skipSpace(bytes, gen.end);
  const r = tokenAt(bytes, rAt);
  if (r.value !== 'R') return first;
  budget.items += 2;
  return { value: { kind: 'ref', num: first.value, gen: Number(gen.value) }, end: r.end };
}

function isNonNegativeInteger(value: PdfValue): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
}

function parseName(bytes: Uint8Array, at: number): Parsed<PdfName> {
  let end = at;
  while (end < bytes.length && isRegular(bytes[end])) end += 1;
  const raw = Buffer.from(bytes.buffer, bytes.byteOffset + at, end - at).toString('latin1');
  const name = raw.replace(/#([0-9A-Fa-f]{2})/gu, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
  return { value: { kind: 'name', name }, end };
}

function parseDictBody(bytes: Uint8Array, at: number, budget: Budget, depth: number): Parsed<PdfDict> {
  const dict: PdfDict = new Map();
  let pos = skipSpace(bytes, at);
  for (;;) {
    if (bytes[pos] === 0x3e && bytes[pos + 1] === 0x3e) return { value: dict, end: pos + 2 };
    if (bytes[pos] !== 0x2f) throw new PdfSyntaxError('dictionary key is not a name');
    const key = parseName(bytes, pos + 1);
    const value = withReference(bytes, parseValue(bytes, skipSpace(bytes, key.end), budget, depth), budget);
    // A repeated key: the last value wins (pdf.js's Dict.set overwrites).
    dict.set(key.value.name, value.value);
    pos = skipSpace(bytes, value.end);
  }
}

function parseArrayBody(bytes: Uint8Array, at: number, budget: Budget, depth: number): Parsed<PdfValue[]> {
  const items: PdfValue[] = [];
  let pos = skipSpace(bytes, at);
  while (bytes[pos] !== 0x5d) {
    const item = withReference(bytes, parseValue(bytes, pos, budget, depth), budget);
    items.push(item.value);
    pos = skipSpace(bytes, item.end);
  }
  return { value: items, end: pos + 1 };
}

/** Escapes of a literal string (pdf.js Lexer.getString). */
const escapes: Readonly<Record<number, number>> = { 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09, 0x62: 0x08, 0x66: 0x0c };

/** After `(`: balanced parentheses, backslash escapes (octal, line continuations), as pdf.js reads them. */
function literalString(bytes: Uint8Array, at: number): Parsed<PdfString> {
  const out: number[] = [];
  let depth = 1;
  let pos = at;
  while (pos < bytes.length) {
    const byte = bytes[pos] ?? 0;
    pos += 1;
    if (byte === 0x5c) {
      const next = bytes[pos] ?? 0;
      pos += 1;
      if (next >= 0x30 && next <= 0x37) {
        let value = next - 0x30;
        for (let digits = 1; digits < 3 && (bytes[pos] ?? 0) >= 0x30 && (bytes[pos] ?? 0) <= 0x37; digits += 1) {
          value = value * 8 + ((bytes[pos] ?? 0) - 0x30);
          pos += 1;
        }
        out.push(value & 0xff);
      } else if (next === 0x0d) {
        if (bytes[pos] === 0x0a) pos += 1;
      } else if (next !== 0x0a) out.push(escapes[next] ?? next);
      continue;
    }
    if (byte === 0x28) depth += 1;
    else if (byte === 0x29) {
      depth -= 1;
      if (depth === 0) return { value: { kind: 'string', bytes: Uint8Array.from(out) }, end: pos };
    }
    out.push(byte);
  }
  throw new PdfSyntaxError('unterminated string');
}

/** After `<`: hex digits in pairs, white space skipped, an odd last digit followed by 0. */
function hexString(bytes: Uint8Array, at: number): Parsed<PdfString> {
  const end = bytes.indexOf(0x3e, at);
  if (end < 0) throw new PdfSyntaxError('unterminated hex string');
  const digits = Buffer.from(bytes.buffer, bytes.byteOffset + at, end - at).toString('latin1').replace(/[^0-9A-Fa-f]/gu, '');
  return { value: { kind: 'string', bytes: new Uint8Array(Buffer.from(digits.length % 2 === 1 ? `${digits}0` : digits, 'hex')) }, end: end + 1 };
}

/** The name a value holds (a direct `/Name`), else undefined. */
export function nameOf(value: PdfValue): string | undefined {
  return typeof value === 'object' && !Array.isArray(value) && !(value instanceof Map) && value.kind === 'name' ? value.name : undefined;
}

/** The reference a value holds, else undefined. */
export function refOf(value: PdfValue): PdfRef | undefined {
  return typeof value === 'object' && !Array.isArray(value) && !(value instanceof Map) && value.kind === 'ref' ? value : undefined;
}

/** The bytes a value holds (a direct string), else undefined. */
export function stringOf(value: PdfValue): Uint8Array | undefined {
  return typeof value === 'object' && !Array.isArray(value) && !(value instanceof Map) && value.kind === 'string' ? value.bytes : undefined;
}
