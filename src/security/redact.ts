/**
 * The one scrubber of the service. Every text that leaves it passes here: error messages, attempt messages,
 * log lines (`scrubSecrets`: the keys of the request plus anything key-shaped) and success bodies (a model can
 * echo the key it was called with: `keyRedactor` + `redactDeep`, the keys only, so ordinary content is kept).
 * Keys arrive as `Secret`s (src/security/secret.ts) and are revealed only here and in the adapter's call.
 *
 * Redaction of the keys is linear in the text and the keys: every 8-character piece of every key is put once
 * in a hash table (built once per request), then each text is scanned once with a rolling window, without
 * copying it or allocating per character; only a text that holds an echo is rebuilt. A JSON value is
 * copied only where one of its strings changed (`redactDeep`).
 *
 * What counts as an echo of a key (docs/errors.md "Keys in answers"): every run of **8 or more consecutive
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
const minimumPieceLength = 8;

/**
 * The letters and digits of an already lowercased text, what a key is compared on, as base-36 symbols
 * (`symbol`) written into `out` from its start; returns their count.
 */
function symbolsInto(lower: string, out: Uint8Array): number {
  let count = 0;
  for (let position = 0; position < lower.length; position += 1) {
    const code = lower.charCodeAt(position);
    if (isWordChar(code)) {
      out[count] = symbol(code);
      count += 1;
    }
  }
  return count;
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

/**
 * The symbols of a base64 sextet (`A`-`Z` `a`-`z` `0`-`9` `+` `/`) once lowercased: a letter or digit's
 * base-36 symbol, -1 for `+` and `/` (not letters or digits, so skipped like any punctuation).
 */
const base64Symbols = Int8Array.from({ length: 64 }, (_, sextet) =>
  sextet < 26 ? 10 + sextet : sextet < 52 ? 10 + sextet - 26 : sextet < 62 ? sextet - 52 : -1,
);

/**
 * The symbols of the other forms of a key's UTF-8 `bytes` whose pieces are looked for, written straight
 * from the bytes (no encoded strings): lowercase hex (each nibble is its own symbol), then base64 at each
 * of the three alignments, each cut to its whole 4-character groups (the last 1-3 characters depend on
 * what follows the key: only whole groups are stable). `add` takes each form's symbols and count.
 */
function encodedForms(
  bytes: Uint8Array,
  scratch: Uint8Array,
  add: (symbols: Uint8Array, count: number) => void,
): void {
  let count = 0;
  for (let at = 0; at < bytes.length; at += 1) {
    const byte = bytes[at] ?? 0;
    scratch[count] = byte >> 4;
    scratch[count + 1] = byte & 15;
    count += 2;
  }
  add(scratch, count);
  for (let shift = 0; shift < 3; shift += 1) {
    count = 0;
    const end = shift + Math.floor((bytes.length - shift) / 3) * 3;
    for (let at = shift; at < end; at += 3) {
      const group = ((bytes[at] ?? 0) << 16) | ((bytes[at + 1] ?? 0) << 8) | (bytes[at + 2] ?? 0);
      for (let sextet = 18; sextet >= 0; sextet -= 6) {
        const digit = base64Symbols[(group >> sextet) & 63] ?? -1;
        if (digit >= 0) {
          scratch[count] = digit;
          count += 1;
        }
      }
    }
    add(scratch, count);
  }
}

/** The pieces of a request's keys: the table of their 8-symbol pieces, and the keys too short to cut into pieces. */
interface KeyPieces {
  readonly table: PieceTable | undefined;
  readonly shortKeys: readonly string[];
}

/** The pieces of `keys` in a table from `tableFor` (given an upper bound of the pieces). */
function piecesOfKeys(keys: readonly KeyLike[], tableFor: (pieces: number) => PieceTable): KeyPieces {
  const candidates = keys.map((key) => {
    const text = textOf(key);
    return { text, lower: text.toLowerCase(), bytes: Buffer.from(text, 'utf8') };
  });
  // Room for the most symbols of any form of any key: one per UTF-16 unit of the lowercased key, two per byte in hex.
  let most = 0;
  for (const key of candidates) most = Math.max(most, key.lower.length, key.bytes.length * 2);
  const scratch = new Uint8Array(most);
  const shortKeys: string[] = [];
  const kept: typeof candidates = [];
  let pieces = 0;
  for (const key of candidates) {
    const symbols = symbolsInto(key.lower, scratch);
    if (symbols < minimumPieceLength) {
      if (key.text.length >= 4) shortKeys.push(key.text);
      continue;
    }
    kept.push(key);
    // At most this many pieces (windows) in its five forms, for the table's size: its own symbols, two per
    // byte in hex, at most four per whole 3-byte group in each base64 alignment.
    const bytes = key.bytes.length;
    pieces += windowsIn(symbols) + windowsIn(bytes * 2) + 3 * windowsIn(Math.floor(bytes / 3) * 4);
  }
  const table = kept.length === 0 ? undefined : tableFor(pieces);
  if (table !== undefined) {
    const add = (symbols: Uint8Array, count: number): void => addPieces(table, symbols, count);
    for (const key of kept) {
      add(scratch, symbolsInto(key.lower, scratch));
      encodedForms(key.bytes, scratch, add);
    }
  }
  return { table, shortKeys };
}

function redactWithPieces(text: string, pieces: KeyPieces): string {
  let result = pieces.table === undefined ? text : redactPieces(text, pieces.table);
  for (const key of pieces.shortKeys) result = result.split(key).join(redacted);
  return result;
}

/** A function that redacts `keys` (and their echoes) from any text; build it once per request. */
export function keyRedactor(keys: readonly KeyLike[]): (text: string) => string {
  const pieces = piecesOfKeys(keys, emptyTable);
  return (text) => redactWithPieces(text, pieces);
}

/**
 * `redactDeep(value, keyRedactor(keys))` in one synchronous call, whose piece table is a scratch table
 * lent for the call and wiped before it returns (no table of up to 32 KiB allocated per request for a
 * long key, and nothing of the keys left in it).
 */
export function redactKeysDeep<T>(value: T, keys: readonly KeyLike[]): T {
  const pieces = piecesOfKeys(keys, lendTable);
  const shortPieces = shortPiecesOfKeys(keys);
  try {
    return redactDeep(value, (text) => redactShortPieces(redactWithPieces(text, pieces), shortPieces));
  } finally {
    if (pieces.table !== undefined) giveBackTable(pieces.table);
  }
}

/**
 * Success bodies only: pieces of a key as short as this many letters and digits. A provider
 * that echoed the key in 7-character pieces, one per JSON field, passed the 8-character scan; in a success
 * body every string is a field of the material, where 6 consecutive characters of a random key do not
 * occur by chance. (Messages keep the 8-character rule: they quote ids and paths that would collide.)
 */
const minimumShortPieceLength = 6;

/** Every `minimumShortPieceLength`-symbol piece of the keys' letters and digits, lowercased. */
function shortPiecesOfKeys(keys: readonly KeyLike[]): ReadonlySet<string> {
  const pieces = new Set<string>();
  for (const key of keys) {
    const symbols = textOf(key).toLowerCase().replace(/[^0-9a-z]/gu, '');
    // A short key has no pieces to find apart from itself (the whole-key rule covers it).
    if (symbols.length < 2 * minimumShortPieceLength) continue;
    for (let start = 0; start + minimumShortPieceLength <= symbols.length; start += 1) pieces.add(symbols.slice(start, start + minimumShortPieceLength));
  }
  return pieces;
}

/**
 * `text` with every stretch holding a short piece of a key replaced by `[redacted]`: one pass over its
 * letters and digits with a window of `minimumShortPieceLength` (linear; the text is an answer already
 * bounded in size), from the first to the last character of each run of matching windows.
 */
function redactShortPieces(text: string, pieces: ReadonlySet<string>): string {
  if (pieces.size === 0 || text.length < minimumShortPieceLength) return text;
  const lower = text.toLowerCase();
  const positions: number[] = [];
  let window = '';
  const spans: [number, number][] = [];
  for (let index = 0; index < lower.length; index += 1) {
    if (!isWordChar(lower.charCodeAt(index))) continue;
    positions.push(index);
    window = (window + lower[index]).slice(-minimumShortPieceLength);
    if (window.length < minimumShortPieceLength || !pieces.has(window)) continue;
    const from = positions[positions.length - minimumShortPieceLength] ?? index;
    const last = spans[spans.length - 1];
    if (last !== undefined && from <= last[1] + 1) last[1] = index;
    else spans.push([from, index]);
  }
  if (spans.length === 0) return text;
  let out = '';
  let at = 0;
  for (const [from, to] of spans) {
    out += `${text.slice(at, from)}${redacted}`;
    at = to + 1;
  }
  return out + text.slice(at);
}

/** The 8-symbol windows in a run of `count` symbols. */
function windowsIn(count: number): number {
  return Math.max(0, count - minimumPieceLength + 1);
}

/** `text` with every echo of `keys` replaced by `[redacted]`. */
export function redactSecrets(text: string, keys: readonly KeyLike[]): string {
  const pieces = piecesOfKeys(keys, lendTable);
  try {
    return redactWithPieces(text, pieces);
  } finally {
    if (pieces.table !== undefined) giveBackTable(pieces.table);
  }
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
  return result.replace(tokenLike, (word) =>
    /[0-9]/.test(word) && /[A-Za-z]/.test(word) && !uuid.test(word) ? redacted : word,
  );
}

/** `value` with every string passed through `redact` (object keys too): copied where something changed, shared where nothing did. */
export function redactDeep<T>(value: T, redact: (text: string) => string): T {
  return redactValue(value, redact, 0) as T;
}

/** Copy on write: an array or object none of whose strings changed is returned as it is (no garbage per request). */
function redactValue(value: unknown, redact: (text: string) => string, depth: number): unknown {
  if (typeof value === 'string') return redact(value);
  if (value === null || typeof value !== 'object' || depth > 64) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let position = 0; position < value.length; position += 1) {
      const item: unknown = value[position];
      const clean = redactValue(item, redact, depth + 1);
      if (clean !== item && copy === undefined) copy = value.slice(0, position);
      copy?.push(clean);
    }
    return copy ?? value;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  let copy: Record<string, unknown> | undefined;
  for (let position = 0; position < keys.length; position += 1) {
    const key = keys[position] as string;
    const item = record[key];
    const cleanKey = redact(key);
    const cleanItem = redactValue(item, redact, depth + 1);
    if (copy === undefined && (cleanKey !== key || cleanItem !== item)) {
      copy = {};
      for (const earlier of keys.slice(0, position)) copy[earlier] = record[earlier];
    }
    if (copy !== undefined) copy[cleanKey] = cleanItem;
  }
  return copy ?? value;
}

/** Base-36 digit of a lowercase letter or digit. */
function symbol(code: number): number {
  return code <= 0x39 ? code - 0x30 : code - 0x61 + 10;
}

/** 36^7: the weight of a window's first symbol, removed as the window rolls on. */
const leadingWeight = 36 ** (minimumPieceLength - 1);
/** 36^7 modulo 2^32: the same weight in the 32-bit rolling value. */
const leadingWeightLow = Array.from({ length: minimumPieceLength - 1 }).reduce<number>(
  (weight) => Math.imul(weight, 36),
  1,
);

/**
 * The pieces of the request's keys: each 8-symbol piece as a number (base 36: at most 36^8 ≈ 2.8e12,
 * exact in a double) in an open-addressing table at most half full, placed by a hash of the piece's
 * value modulo 2^32 (which the scan rolls along as a 32-bit integer), and a bit filter over the same hash
 * with 32 bits per slot. A window of ordinary text costs one multiplication and one read of the filter
 * (a set bit for at most one window in 64 that is not a piece); only then is its exact value rebuilt from
 * the window's symbols and looked up. Nothing is allocated per look-up.
 */
interface PieceTable {
  readonly slots: number[];
  readonly mask: number;
  readonly shift: number;
  /** One bit per value of the hash's top `bits + 5` bits, set for every piece: 32 bits per slot. */
  readonly filter: Int32Array;
}

/** No piece has a negative value; not a whole number, so the table is an array of doubles from the start. */
const emptySlot = -0.5;

/**
 * The top `bits + 5` bits of a piece's hash (multiplicative hashing of its value modulo 2^32, `low`): its
 * bit in the filter, and (without the last five) the slot where it is first looked for.
 */
function filterHashOf(low: number, shift: number): number {
  return Math.imul(low, 0x9e3779b1) >>> (shift - 5);
}

/** Empty tables by size (bits), up to `cachedTableBits`: a new table is one copy of one of them. */
const emptyTables: number[][] = [];
const cachedTableBits = 12;

/** The size (bits) of a table at most half full with room for `pieces` pieces. */
function tableBits(pieces: number): number {
  return Math.max(4, Math.ceil(Math.log2(Math.max(0, pieces) * 2 + 1)));
}

/** A table at most half full with room for `pieces` pieces, every slot empty. */
function emptyTable(pieces: number): PieceTable {
  const bits = tableBits(pieces);
  let slots = emptyTables[bits];
  if (slots === undefined) {
    // A packed array of doubles (not `new Array(n).fill()`, which is holey): its loads stay unboxed, a holey
    // one's are boxed into a heap number on every look-up. `slice` keeps it packed.
    slots = [emptySlot];
    while (slots.length < 2 ** bits) slots = slots.concat(slots);
    if (bits > cachedTableBits)
      return { slots, mask: 2 ** bits - 1, shift: 32 - bits, filter: new Int32Array(2 ** bits) };
    emptyTables[bits] = slots;
  }
  return { slots: slots.slice(), mask: 2 ** bits - 1, shift: 32 - bits, filter: new Int32Array(2 ** bits) };
}

/**
 * Scratch tables by size (bits), every slot empty, each lent to one synchronous redaction at a time
 * (`redactKeysDeep`): taken out while lent, so a redaction inside another one gets a table of its own.
 */
const idleTables: (PieceTable | undefined)[] = [];

function lendTable(pieces: number): PieceTable {
  const bits = tableBits(pieces);
  const table = idleTables[bits];
  if (table === undefined) return emptyTable(pieces);
  idleTables[bits] = undefined;
  return table;
}

/** Wipes the request's pieces out of a lent table and keeps it for the next redaction of its size. */
function giveBackTable(table: PieceTable): void {
  table.slots.fill(emptySlot);
  table.filter.fill(0);
  const bits = 32 - table.shift;
  if (bits <= cachedTableBits) idleTables[bits] = table;
}

/** Puts every 8-symbol piece of a form (its first `count` symbols) into the table. */
function addPieces(table: PieceTable, form: Uint8Array, count: number): void {
  let value = 0;
  let low = 0;
  for (let position = 0; position < count; position += 1) {
    const digit = form[position] ?? 0;
    value = value * 36 + digit;
    low = (Math.imul(low, 36) + digit) | 0;
    if (position + 1 < minimumPieceLength) continue;
    const hash = filterHashOf(low, table.shift);
    table.filter[hash >>> 5] = (table.filter[hash >>> 5] ?? 0) | (1 << (hash & 31));
    let slot = hash >>> 5;
    while (table.slots[slot] !== emptySlot && table.slots[slot] !== value) slot = (slot + 1) & table.mask;
    table.slots[slot] = value;
    const leading = form[position + 1 - minimumPieceLength] ?? 0;
    value -= leading * leadingWeight;
    low = (low - Math.imul(leading, leadingWeightLow)) | 0;
  }
}

/** The base-36 symbol of each ASCII letter (either case) or digit; -1 for every other character. */
const asciiSymbols = Int8Array.from({ length: 0x80 }, (_, code) => {
  const lower = code >= 0x41 && code <= 0x5a ? code | 0x20 : code;
  return isWordChar(lower) ? symbol(lower) : -1;
});

/** Where each of the last 8 letters or digits of the scan began (a ring indexed by `count & 7`: 8 is a power of two; one scan at a time). */
const windowFrom = new Int32Array(minimumPieceLength);
/** …and their symbols. */
const windowSymbol = new Uint8Array(minimumPieceLength);

/**
 * One pass, no copy of the text unless it holds an echo: the text's letters and digits (percent-escapes
 * decoded, lowercased) roll through an 8-symbol window; every window found among the pieces marks its
 * symbols, and each run of marked symbols (overlapping or touching windows), with whatever lies between
 * them, is replaced by one `[redacted]`.
 */
function redactPieces(text: string, table: PieceTable): string {
  const length = text.length;
  if (length < minimumPieceLength) return text;
  const { slots, mask, shift, filter } = table;
  const filterShift = shift - 5;
  let out = '';
  let copiedUpTo = 0;
  let count = 0;
  let low = 0;
  // The open run of marked symbols: where its text starts and ends, and the symbol after its last one.
  let runFrom = -1;
  let runTo = 0;
  let markedUpTo = 0;
  for (let at = 0; at < length;) {
    let code = text.charCodeAt(at);
    let next = at + 1;
    if (code === 0x25 && at + 2 < length) {
      const high = hexValue(text.charCodeAt(at + 1));
      const lowDigit = hexValue(text.charCodeAt(at + 2));
      if (high >= 0 && lowDigit >= 0) {
        code = high * 16 + lowDigit;
        next = at + 3;
      }
    }
    const digit = code < 0x80 ? (asciiSymbols[code] ?? -1) : -1;
    if (digit >= 0) {
      const slot = count & (minimumPieceLength - 1);
      windowFrom[slot] = at;
      windowSymbol[slot] = digit;
      count += 1;
      low = (Math.imul(low, 36) + digit) | 0;
      if (count >= minimumPieceLength) {
        // The window is the symbols count-8 … count-1; its first sits in the slot written next.
        const first = count & (minimumPieceLength - 1);
        // Only a window whose bit is set in the filter can be a piece: its exact value is looked up.
        const hash = Math.imul(low, 0x9e3779b1) >>> filterShift;
        let piece = false;
        if (((filter[hash >>> 5] ?? 0) >>> (hash & 31)) & 1) {
          let value = 0;
          for (let offset = 0; offset < minimumPieceLength; offset += 1)
            value = value * 36 + (windowSymbol[(first + offset) & (minimumPieceLength - 1)] ?? 0);
          for (let probe = hash >>> 5; ; probe = (probe + 1) & mask) {
            const held = slots[probe] ?? emptySlot;
            if (held === value) piece = true;
            if (piece || held === emptySlot) break;
          }
        }
        if (piece) {
          const start = count - minimumPieceLength;
          if (runFrom >= 0 && start <= markedUpTo) {
            runTo = next;
          } else {
            if (runFrom >= 0) {
              out += `${text.slice(copiedUpTo, runFrom)}${redacted}`;
              copiedUpTo = runTo;
            }
            runFrom = windowFrom[first] ?? at;
            runTo = next;
          }
          markedUpTo = count;
        }
        const leading = windowSymbol[first] ?? 0;
        low = (low - Math.imul(leading, leadingWeightLow)) | 0;
      }
    }
    at = next;
  }
  if (runFrom < 0) return text;
  return `${out}${text.slice(copiedUpTo, runFrom)}${redacted}${text.slice(runTo)}`;
}

/**
 * Where the part of `text` that an echo of a key could still go on from begins, for text that is sent in
 * pieces (a stream's raw output): the start of its last 7 letters or digits as the scrubber counts them
 * (a `%XX` escape is one), or of a trailing `%` / `%X` that what follows may complete into an escape. Every
 * 8-symbol window that starts before it lies whole in `text` and is found there; one that starts at or
 * after it may end in what follows, so that part is held back, however far apart its characters are (an
 * echo spaced out with blanks is as much an echo).
 */
export function echoTailStart(text: string): number {
  const starts = new Int32Array(minimumPieceLength - 1);
  let count = 0;
  for (let at = 0; at < text.length;) {
    let code = text.charCodeAt(at);
    let next = at + 1;
    if (code === 0x25) {
      if (at + 2 >= text.length) return Math.min(at, count >= starts.length ? (starts[count % starts.length] ?? at) : 0);
      const high = hexValue(text.charCodeAt(at + 1));
      const lowDigit = hexValue(text.charCodeAt(at + 2));
      if (high >= 0 && lowDigit >= 0) {
        code = high * 16 + lowDigit;
        next = at + 3;
      }
    }
    if (code < 0x80 && (asciiSymbols[code] ?? -1) >= 0) {
      starts[count % starts.length] = at;
      count += 1;
    }
    at = next;
  }
  if (count < starts.length) return 0;
  return starts[count % starts.length] ?? 0;
}
