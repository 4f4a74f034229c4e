import { countTokens, decode, encode } from 'gpt-tokenizer';

/**
 * Long documents: token estimate with a real BPE tokenizer (gpt-tokenizer, o200k_base — the
 * providers' own tokenizers differ, but far less than characters/4 does on Korean text, where one
 * syllable is often one token or more), and splitting into parts that each fit an input budget.
 */

/** Default input budget per provider call, in tokens, for the document part of a prompt. */
export const defaultPartBudgetTokens = 6000;

export function estimateTokens(text: string): number {
  return countTokens(text);
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

/** Page markers a PDF text extractor inserts ("-- 3 of 50 --") are not text: they only mark a paragraph break. */
const pageMarker = /^\s*--\s*\d+\s+of\s+\d+\s*--\s*$/gim;

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

/** Only when a single sentence exceeds the budget: cut it by tokens. */
function tokenSlices(text: string, budget: number): string[] {
  const tokens = encode(text);
  const out: string[] = [];
  for (let start = 0; start < tokens.length; start += budget) out.push(decode(tokens.slice(start, start + budget)));
  return out;
}

interface Piece {
  readonly text: string;
  readonly tokens: number;
  /** How the piece joins the one before it: a paragraph break, a space inside a paragraph, or nothing (a cut sentence). */
  readonly joiner: '\n\n' | ' ' | '';
}

const levels = [sections, paragraphs, sentences] as const;

function piecesOf(text: string, budget: number, level: number, joiner: Piece['joiner']): Piece[] {
  const tokens = estimateTokens(text);
  if (tokens <= budget) return [{ text, tokens, joiner }];
  const splitter = levels[level];
  if (splitter === undefined) return tokenSlices(text, budget).map((slice, index) => ({ text: slice, tokens: estimateTokens(slice), joiner: index === 0 ? joiner : '' }));
  const units = splitter(text);
  if (units.length <= 1) return piecesOf(text, budget, level + 1, joiner);
  const innerJoiner: Piece['joiner'] = splitter === sentences ? ' ' : '\n\n';
  return units.flatMap((unit, index) => piecesOf(unit, budget, level + 1, index === 0 ? joiner : innerJoiner));
}

export interface SplitOptions {
  /** Most tokens one part may hold (default 6000). */
  readonly budgetTokens?: number;
}

/**
 * Splits `text` into parts of at most `budgetTokens` tokens each, on section boundaries first,
 * then paragraphs, then sentences; a single sentence longer than the budget is the only thing cut
 * mid-way. A text within the budget comes back as one part, unchanged but for page markers.
 */
export function splitText(text: string, options: SplitOptions = {}): string[] {
  const budget = Math.max(16, Math.floor(options.budgetTokens ?? defaultPartBudgetTokens));
  const cleaned = text.replace(pageMarker, '\n').trim();
  if (cleaned === '') return [];
  if (estimateTokens(cleaned) <= budget) return [cleaned];
  // Joining may merge tokens across a boundary differently than counted apart: keep a small margin.
  const packBudget = Math.max(8, budget - Math.ceil(budget / 100) - 2);
  const parts: string[] = [];
  let current = '';
  let currentTokens = 0;
  for (const piece of piecesOf(cleaned, packBudget, 0, '\n\n')) {
    if (current !== '' && currentTokens + 1 + piece.tokens > packBudget) {
      parts.push(current);
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
  if (current !== '') parts.push(current);
  return parts;
}
