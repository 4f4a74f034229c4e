/**
 * A linear pre-scan of JSON text for its nesting depth: `JSON.parse` of a 2 MB body of
 * `[[[[…` holds the event loop and a great deal of memory, and what parses it next (schemas, normalizers) may
 * recurse. Scanning the bytes once, counting `[` and `{` outside strings, refuses such a text at the
 * first byte past the limit, before anything parses it. The scan does not check that the text is JSON
 * (the parser does that next); it only bounds how deep a parser would have to go.
 */

/** Deepest nesting any body or answer of this service needs (a notes result is 4 deep, a request 6). */
export const maxJsonDepth = 32;

const quote = 0x22;
const backslash = 0x5c;
const openBracket = 0x5b;
const openBrace = 0x7b;
const closeBracket = 0x5d;
const closeBrace = 0x7d;
const comma = 0x2c;

/**
 * Most values a request body may hold in its arrays and objects together, counted by the commas between them
 * (outside strings). The largest body a client honestly sends carries a notes result (at most 64 Ki
 * characters, each value at least 3 of them: some 22 000 values) beside a text that is one string; a body of
 * a hundred thousand unknown fields held the event loop in `JSON.parse`, the schema and the error listing them.
 */
export const maxJsonValues = 50_000;

/** What a JSON text breaks, if anything: nested deeper than allowed, or holding more values than allowed. */
export type JsonShapeBreach = 'depth' | 'values';

/**
 * True when the JSON text (a string, or its UTF-8 bytes) nests arrays and objects deeper than `limit`.
 * Linear in the text, stops at the first level past the limit; no allocation.
 */
export function jsonNestsDeeperThan(text: string | Uint8Array, limit: number = maxJsonDepth): boolean {
  return jsonShapeBreach(text, limit) === 'depth';
}

/**
 * The first bound the JSON text (a string, or its UTF-8 bytes) breaks: nesting deeper than `depthLimit`, or
 * more than `valuesLimit` values in its arrays and objects (commas outside strings, plus one). Linear in the
 * text, stops at the first breach; no allocation.
 */
export function jsonShapeBreach(text: string | Uint8Array, depthLimit: number = maxJsonDepth, valuesLimit: number = Number.POSITIVE_INFINITY): JsonShapeBreach | undefined {
  const isString = typeof text === 'string';
  let depth = 0;
  let commas = 0;
  let inString = false;
  for (let index = 0; index < text.length; index += 1) {
    // Every character that matters here is ASCII: in UTF-8 no byte of a multi-byte character can be one.
    const code = isString ? text.charCodeAt(index) : (text[index] ?? 0);
    if (inString) {
      if (code === backslash) index += 1;
      else if (code === quote) inString = false;
    } else if (code === quote) {
      inString = true;
    } else if (code === openBracket || code === openBrace) {
      depth += 1;
      if (depth > depthLimit) return 'depth';
    } else if ((code === closeBracket || code === closeBrace) && depth > 0) {
      depth -= 1;
    } else if (code === comma) {
      commas += 1;
      if (commas >= valuesLimit) return 'values';
    }
  }
  return undefined;
}
