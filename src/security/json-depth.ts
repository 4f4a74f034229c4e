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

/**
 * True when the JSON text (a string, or its UTF-8 bytes) nests arrays and objects deeper than `limit`.
 * Linear in the text, stops at the first level past the limit; no allocation.
 */
export function jsonNestsDeeperThan(text: string | Uint8Array, limit: number = maxJsonDepth): boolean {
  const isString = typeof text === 'string';
  let depth = 0;
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
      if (depth > limit) return true;
    } else if ((code === closeBracket || code === closeBrace) && depth > 0) {
      depth -= 1;
    }
  }
  return false;
}
