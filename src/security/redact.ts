/**
 * The one scrubber of the service. Every text that leaves it passes here: error messages, attempt messages,
 * log lines (`scrubSecrets`: the keys of the request plus anything key-shaped) and success bodies (a model can
 * echo the key it was called with: `keyRedactor` + `redactDeep`, the keys only, so ordinary content is kept).
 * Keys arrive as `Secret`s (src/security/secret.ts) and are revealed only here and in the adapter's call.
 *
 * Redaction of the keys is linear in the text: every 8-character piece of every key is indexed once in a
 * Set, then the text is scanned once.
 *
 * What counts as an echo of a key (docs/errors.md "Keys in answers"): any run of **8 or more consecutive
 * characters of the key**, compared
 * - ignoring case and every character that is not a letter or a digit (so `s k - a n t`, `sk.ant`,
 *   `SK-ANT` and `sk_ant` all match `sk-ant`), which also covers spaced, dotted, dashed and line-broken echoes;
 * - after decoding percent-encoding (`%73%6B` is `sk`, `%2D` is `-`);
 * - and in base64 (any of the three alignments) and lowercase hex of the key.
 * The whole stretch of text from the first to the last matching character is replaced by `[redacted]`.
 * Keys shorter than 8 letters and digits are replaced only where they appear whole (4+ characters).
 */

const redacted = '[redacted]';

/** A key as the scrubber takes it: a `Secret` (anything that reveals its text), or the text itself. */
export type KeyLike = string | { reveal(): string };

function textOf(key: KeyLike): string {
  return typeof key === 'string' ? key : key.reveal();
}
/** Pieces of a key shorter than this are not secret enough to find (and would mangle ordinary text). */
export const minimumPieceLength = 8;

/** Letters and digits, lowercased: what a key is compared on. */
function normalize(text: string): string {
  let out = '';
  for (const char of text.toLowerCase()) if (isWordChar(char.charCodeAt(0))) out += char;
  return out;
}

function isWordChar(code: number): boolean {
  return (code >= 0x30 && code <= 0x39) || (code >= 0x61 && code <= 0x7a);
}

function hexValue(code: number): number {
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  const lower = code | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

/** The forms of a key whose pieces are looked for: itself, base64 at each alignment, hex. */
function keyForms(key: string): string[] {
  const bytes = Buffer.from(key, 'utf8');
  const forms = [key, bytes.toString('hex')];
  for (let shift = 0; shift < 3; shift += 1) {
    const encoded = bytes.subarray(shift).toString('base64').replace(/=+$/u, '');
    // The last 1-3 characters depend on what follows the key: only whole 4-character groups are stable.
    forms.push(encoded.slice(0, Math.floor(encoded.length / 4) * 4));
  }
  return forms;
}

/** A function that redacts `keys` (and their echoes) from any text; build it once per request. */
export function keyRedactor(keys: readonly KeyLike[]): (text: string) => string {
  const pieces = new Set<number>();
  const shortKeys: string[] = [];
  for (const key of keys.map(textOf)) {
    if (normalize(key).length < minimumPieceLength) {
      if (key.length >= 4) shortKeys.push(key);
      continue;
    }
    for (const form of keyForms(key)) {
      const normal = normalize(form);
      for (let start = 0; start + minimumPieceLength <= normal.length; start += 1) pieces.add(pieceValue(normal, start));
    }
  }
  return (text) => {
    let result = pieces.size === 0 ? text : redactPieces(text, pieces);
    for (const key of shortKeys) result = result.split(key).join(redacted);
    return result;
  };
}

/** `text` with every echo of `keys` replaced by `[redacted]`. */
export function redactSecrets(text: string, keys: readonly KeyLike[]): string {
  return keyRedactor(keys)(text);
}

/** Patterns of secrets with their replacement, most specific first. */
const secretPatterns: readonly (readonly [RegExp, string])[] = [
  // OpenAI's 401 echoes a masked fragment of the key it was given.
  [/(Incorrect API key provided:\s*)\S+/gi, `$1${redacted}`],
  [/\bBearer\s+[^\s,;"']+/gi, `Bearer ${redacted}`],
  [
    /\b(x-api-key|x-timely-api|api[_-]?key|access[_-]?token|authorization)(["']?\s*[:=]\s*["']?)[^\s,;"'}]+/gi,
    `$1$2${redacted}`,
  ],
  // JWTs (TimelyGPT access tokens).
  [/\beyJ[\w-]*\.[\w-]+\.[\w-]*/g, redacted],
  // Provider key formats: Anthropic sk-ant-…, OpenAI sk-…/sk-proj-…, and masked fragments of either.
  [/\bsk-[\w*.-]{4,}/gi, redacted],
  // Any word with a run of mask characters in it is a masked secret.
  [/[^\s"']*\*{3,}[^\s"',.;)]*/g, redacted],
];

/** Long opaque token-like words (32+ chars of letters, digits, `_`/`-`, with both letters and digits). */
const tokenLike = /[A-Za-z0-9_-]{32,}/g;
/** A canonical UUID (the service's own job and document ids) is an id, not a token. */
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * `text` without secrets: every echo of `keys` (the request's own keys, see `keyRedactor`), then anything
 * key-shaped (masked key echoes, bearer tokens, `api_key=…`, JWTs, `sk-…`, long opaque tokens). For
 * messages (errors, attempts, logs); an answer's content goes through `keyRedactor` alone.
 */
export function scrubSecrets(text: string, keys: readonly KeyLike[] = []): string {
  let result = keys.length === 0 ? text : redactSecrets(text, keys);
  for (const [pattern, replacement] of secretPatterns) result = result.replace(pattern, replacement);
  return result.replace(tokenLike, (word) => (/[0-9]/.test(word) && /[A-Za-z]/.test(word) && !uuid.test(word) ? redacted : word));
}

/** A copy of a JSON-like value with every string passed through `redact` (object keys too). */
export function redactDeep<T>(value: T, redact: (text: string) => string): T {
  return redactValue(value, redact, 0) as T;
}

function redactValue(value: unknown, redact: (text: string) => string, depth: number): unknown {
  if (typeof value === 'string') return redact(value);
  if (value === null || typeof value !== 'object' || depth > 64) return value;
  if (Array.isArray(value)) return value.map((item) => redactValue(item, redact, depth + 1));
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) copy[redact(key)] = redactValue(item, redact, depth + 1);
  return copy;
}

/** Base-36 digit of a lowercase letter or digit. */
function symbol(code: number): number {
  return code <= 0x39 ? code - 0x30 : code - 0x61 + 10;
}

/** An 8-character piece as a number (base 36: at most 36^8 ≈ 2.8e12, exact in a double). */
function pieceValue(normal: string, start: number): number {
  let value = 0;
  for (let offset = 0; offset < minimumPieceLength; offset += 1) value = value * 36 + symbol(normal.charCodeAt(start + offset));
  return value;
}

/** 36^7: the weight of a window's first symbol, removed as the window rolls on. */
const leadingWeight = 36 ** (minimumPieceLength - 1);

/**
 * One pass: the text's letters and digits (percent-escapes decoded, lowercased) with where each came from;
 * every 8-character window found in `pieces` marks its characters; marked stretches, with whatever lies
 * between two marked characters of one stretch, are replaced.
 */
function redactPieces(text: string, pieces: ReadonlySet<number>): string {
  const length = text.length;
  const symbols = new Uint8Array(length);
  const from = new Int32Array(length);
  const to = new Int32Array(length);
  let count = 0;
  for (let index = 0; index < length; ) {
    let code = text.charCodeAt(index);
    let next = index + 1;
    if (code === 0x25 && index + 2 < length) {
      const high = hexValue(text.charCodeAt(index + 1));
      const low = hexValue(text.charCodeAt(index + 2));
      if (high >= 0 && low >= 0) {
        code = high * 16 + low;
        next = index + 3;
      }
    }
    if (code >= 0x41 && code <= 0x5a) code |= 0x20;
    if (isWordChar(code)) {
      symbols[count] = symbol(code);
      from[count] = index;
      to[count] = next;
      count += 1;
    }
    index = next;
  }
  if (count < minimumPieceLength) return text;
  const marked = new Uint8Array(count);
  let found = false;
  // Each position is covered by at most 8 windows: marking stays linear. The window's value rolls.
  let markedUpTo = 0;
  let value = 0;
  for (let position = 0; position < minimumPieceLength - 1; position += 1) value = value * 36 + (symbols[position] ?? 0);
  for (let start = 0; start + minimumPieceLength <= count; start += 1) {
    value = value * 36 + (symbols[start + minimumPieceLength - 1] ?? 0);
    const hit = pieces.has(value);
    value -= (symbols[start] ?? 0) * leadingWeight;
    if (!hit) continue;
    found = true;
    for (let position = Math.max(start, markedUpTo); position < start + minimumPieceLength; position += 1) marked[position] = 1;
    markedUpTo = start + minimumPieceLength;
  }
  if (!found) return text;
  let out = '';
  let copiedUpTo = 0;
  for (let position = 0; position < count; ) {
    if (marked[position] === 0) {
      position += 1;
      continue;
    }
    let end = position;
    while (end + 1 < count && marked[end + 1] === 1) end += 1;
    out += `${text.slice(copiedUpTo, from[position])}${redacted}`;
    copiedUpTo = to[end] ?? length;
    position = end + 1;
  }
  return out + text.slice(copiedUpTo);
}
