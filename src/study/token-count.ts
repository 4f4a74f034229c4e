/**
 * Token counting whose cost is linear in the text, whatever the text. gpt-tokenizer's BPE is quadratic
 * in the length of one pre-token (a run of letters, of punctuation or of whitespace): 100 000 `a` in a
 * row take seconds. Here the text is first cut into pieces in one linear scan — every run of the same
 * kind (whitespace or not) at most `maxRunChars` long, every piece at most `maxPieceChars` — and each
 * piece is counted on its own. A cut inside a run can only add a token or so at the cut; a cut between
 * a word and the single space before the next word changes nothing. The count is done piece by piece
 * so a caller can hand the event loop back between pieces (src/study/split.ts).
 */
import { isSpace } from './whitespace.js';

/** Longest run of whitespace or of non-whitespace encoded in one go. */
const maxRunChars = 256;
/** A piece is cut at the next word boundary once it is this long… */
const softPieceChars = 8192;
/** …and anywhere once it is this long. */
const hardPieceChars = 16_384;


function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/**
 * The text cut into pieces whose runs are at most `maxRunChars` and whose length is at most
 * `hardPieceChars` (never between the two halves of a surrogate pair). One pass, linear.
 */
export function boundedPieces(text: string): string[] {
  return [...iteratePieces(text)];
}

/** `boundedPieces`, one piece at a time (a caller can yield between them). */
export function* iteratePieces(text: string): Generator<string, void, undefined> {
  let pieceStart = 0;
  let runStart = 0;
  let runSpace = false;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (isLowSurrogate(code)) continue;
    const space = isSpace(code);
    if (index === runStart || space !== runSpace) {
      // A new run starts here. A single space between two words is the cleanest place to cut a long piece.
      const wordBoundary = space && code === 0x20 && !isSpace(text.charCodeAt(index + 1)) && index + 1 < text.length;
      if (index > pieceStart && index - pieceStart >= softPieceChars && wordBoundary) {
        yield text.slice(pieceStart, index);
        pieceStart = index;
      }
      runStart = index;
      runSpace = space;
    }
    if (index - runStart >= maxRunChars || index - pieceStart >= hardPieceChars) {
      yield text.slice(pieceStart, index);
      pieceStart = index;
      runStart = index;
    }
  }
  if (pieceStart < text.length) yield text.slice(pieceStart);
}

/**
 * A cheap upper bound first: every token covers at least one UTF-8 byte, and a UTF-16 unit is at most
 * three UTF-8 bytes. True when `text` certainly holds at most `budget` tokens, without counting.
 */
export function fitsWithoutCounting(text: string, budget: number): boolean {
  if (text.length * 3 <= budget) return true;
  return text.length <= budget && Buffer.byteLength(text, 'utf8') <= budget;
}

/** One part of a split text and its token count (as counted while packing: an upper estimate). */
export interface TextPart {
  readonly text: string;
  readonly tokens: number;
}

/** Default input budget per provider call, in tokens, for the document part of a prompt. */
export const defaultPartBudgetTokens = 6000;

/**
 * Page markers a PDF text extractor inserts ("-- 3 of 50 --") are not text: they only mark a paragraph
 * break. Spaces and tabs only around them: `\s` would also eat line breaks and go quadratic on a text
 * of many empty lines.
 */
const pageMarker = /^[ \t]*--[ \t]*\d+[ \t]+of[ \t]+\d+[ \t]*--[ \t]*$/gim;

/** The text a split works on: page markers out, trimmed. Linear. */
export function cleanForSplit(text: string): string {
  return text.replace(pageMarker, '\n').trim();
}

/** The budget a split uses: at least 16 tokens, whole (default 6000). */
export function splitBudget(budgetTokens: number | undefined): number {
  return Math.max(16, Math.floor(budgetTokens ?? defaultPartBudgetTokens));
}

/**
 * The split of a text the cheap bound settles without a tokenizer: no part for an empty text, one part
 * (its UTF-8 length as the token estimate) when the bound proves it fits; `undefined` when it must be
 * counted. The same answer the full split gives for such texts (src/study/split.ts).
 */
export function splitWithoutCounting(text: string, budgetTokens?: number): TextPart[] | undefined {
  const cleaned = cleanForSplit(text);
  if (cleaned === '') return [];
  if (fitsWithoutCounting(cleaned, splitBudget(budgetTokens))) return [{ text: cleaned, tokens: Buffer.byteLength(cleaned, 'utf8') }];
  return undefined;
}

/** Hands the event loop back (other requests' callbacks, timers, I/O) before going on. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
