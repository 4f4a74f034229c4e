import { countTokens, decode, encode } from 'gpt-tokenizer';
import { cleanForSplit, iteratePieces, splitBudget, splitWithoutCounting, yieldToEventLoop, type TextPart } from './token-count.js';

/**
 * Long documents: token estimate with a real BPE tokenizer (gpt-tokenizer, o200k_base — the
 * providers' own tokenizers differ, but far less than characters/4 does on Korean text, where one
 * syllable is often one token or more), and splitting into parts that each fit an input budget.
 * Counting is linear in the text (src/study/token-count.ts) and is skipped where the UTF-8 length
 * alone proves a text fits; `splitTextSliced` hands the event loop back every few milliseconds.
 */

export type { TextPart };

/** Tokens in `text`: linear in its length, whatever it holds. */
export function estimateTokens(text: string): number {
  return runToEnd(countWork(text));
}

/**
 * A piece of work that yields between bounded steps: run it to the end at once (`runToEnd`) or in
 * slices that give the event loop back (`runSliced`).
 */
type Work<T> = Generator<undefined, T, undefined>;

function runToEnd<T>(work: Work<T>): T {
  for (;;) {
    const step = work.next();
    if (step.done === true) return step.value;
  }
}

async function runSliced<T>(work: Work<T>, sliceMs: number): Promise<T> {
  let sliceStart = performance.now();
  for (;;) {
    const step = work.next();
    if (step.done === true) return step.value;
    if (performance.now() - sliceStart >= sliceMs) {
      await yieldToEventLoop();
      sliceStart = performance.now();
    }
  }
}

function* countWork(text: string): Work<number> {
  let total = 0;
  for (const piece of iteratePieces(text)) {
    total += countTokens(piece);
    yield;
  }
  return total;
}

/** Lines that start a section: markdown headings, "Chapter 3", "제 2 장", "3.1 Paging" (short, unpunctuated). */
function isHeading(line: string): boolean {
  const trimmed = line.trim();
  if (trimmed === '' || trimmed.length > 80) return false;
  if (/^#{1,6}\s+\S/.test(trimmed)) return true;
  if (/^(?:chapter|section|part|unit|lecture)\s+[\dIVXivx]+\b/i.test(trimmed)) return true;
  if (/^제\s*\d+\s*(?:장|절|편|부|강)/.test(trimmed)) return true;
  return /^\d+(?:\.\d+)*\.?\s+\S/.test(trimmed) && !/[.!?。:;,]$/.test(trimmed);
}

function sections(text: string): string[] {
  const out: string[] = [];
  let current: string[] = [];
  for (const line of text.split('\n')) {
    if (isHeading(line) && current.some((existing) => existing.trim() !== '')) {
      out.push(current.join('\n').trim());
      current = [];
    }
    current.push(line);
  }
  if (current.some((line) => line.trim() !== '')) out.push(current.join('\n').trim());
  return out;
}

function paragraphs(text: string): string[] {
  return text.split(/\n\s*\n/).map((paragraph) => paragraph.trim()).filter((paragraph) => paragraph !== '');
}

function sentences(text: string): string[] {
  return text.split(/(?<=[.!?。！？])\s+|\n+/u).map((sentence) => sentence.trim()).filter((sentence) => sentence !== '');
}

/** Only when a single sentence exceeds the budget: cut it by tokens (encoded piece by piece, linear). */
function* tokenSlices(text: string, budget: number): Work<string[]> {
  const tokens: number[] = [];
  for (const piece of iteratePieces(text)) {
    for (const token of encode(piece)) tokens.push(token);
    yield;
  }
  const out: string[] = [];
  for (let start = 0; start < tokens.length; start += budget) {
    out.push(decode(tokens.slice(start, start + budget)));
    yield;
  }
  return out;
}

interface Piece {
  readonly text: string;
  readonly tokens: number;
  /** How the piece joins the one before it: a paragraph break, a space inside a paragraph, or nothing (a cut sentence). */
  readonly joiner: '\n\n' | ' ' | '';
}

const levels = [sections, paragraphs, sentences] as const;

function* piecesOf(text: string, budget: number, level: number, joiner: Piece['joiner'], counted?: number): Work<Piece[]> {
  const tokens = counted ?? (yield* countWork(text));
  if (tokens <= budget) return [{ text, tokens, joiner }];
  const splitter = levels[level];
  if (splitter === undefined) {
    const slices = yield* tokenSlices(text, budget);
    const out: Piece[] = [];
    for (const [index, slice] of slices.entries()) out.push({ text: slice, tokens: yield* countWork(slice), joiner: index === 0 ? joiner : '' });
    return out;
  }
  const units = splitter(text);
  // One unit is the same text again: its count is known.
  if (units.length <= 1) return yield* piecesOf(text, budget, level + 1, joiner, tokens);
  const innerJoiner: Piece['joiner'] = splitter === sentences ? ' ' : '\n\n';
  const out: Piece[] = [];
  for (const [index, unit] of units.entries()) out.push(...(yield* piecesOf(unit, budget, level + 1, index === 0 ? joiner : innerJoiner)));
  return out;
}

export interface SplitOptions {
  /** Most tokens one part may hold (default 6000). */
  readonly budgetTokens?: number;
}


function* splitWork(text: string, options: SplitOptions): Work<TextPart[]> {
  const budget = splitBudget(options.budgetTokens);
  // The cheap bound (UTF-8 bytes) proves most short texts fit without counting a single token.
  const settled = splitWithoutCounting(text, budget);
  if (settled !== undefined) return settled;
  const cleaned = cleanForSplit(text);
  const total = yield* countWork(cleaned);
  if (total <= budget) return [{ text: cleaned, tokens: total }];
  // Joining may merge tokens across a boundary differently than counted apart: keep a small margin.
  const packBudget = Math.max(8, budget - Math.ceil(budget / 100) - 2);
  const parts: TextPart[] = [];
  let current = '';
  let currentTokens = 0;
  for (const piece of yield* piecesOf(cleaned, packBudget, 0, '\n\n', total)) {
    if (current !== '' && currentTokens + 1 + piece.tokens > packBudget) {
      parts.push({ text: current, tokens: currentTokens });
      current = '';
      currentTokens = 0;
    }
    if (current === '') {
      current = piece.text;
      currentTokens = piece.tokens;
    } else {
      current = `${current}${piece.joiner}${piece.text}`;
      currentTokens += 1 + piece.tokens;
    }
  }
  if (current !== '') parts.push({ text: current, tokens: currentTokens });
  return parts;
}

/**
 * Splits `text` into parts of at most `budgetTokens` tokens each, on section boundaries first,
 * then paragraphs, then sentences; a single sentence longer than the budget is the only thing cut
 * mid-way. A text within the budget comes back as one part, unchanged but for page markers.
 */
export function splitText(text: string, options: SplitOptions = {}): string[] {
  return splitTextParts(text, options).map((part) => part.text);
}

/** `splitText` with each part's token count, at once (the token worker runs it off the main thread). */
export function splitTextParts(text: string, options: SplitOptions = {}): TextPart[] {
  return runToEnd(splitWork(text, options));
}

/**
 * `splitText` for the request path: the same parts, with their token counts, computed in slices of
 * about `sliceMs` that hand the event loop back in between, so a long text never stalls other requests.
 */
export function splitTextSliced(text: string, options: SplitOptions = {}, sliceMs = 8): Promise<TextPart[]> {
  return runSliced(splitWork(text, options), sliceMs);
}
