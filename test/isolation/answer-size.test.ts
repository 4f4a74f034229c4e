/**
 * Big valid answers (issue 28): a provider answering megabytes of otherwise valid material held the event
 * loop for seconds (16 answers of 7 MB) and was served. An answer longer than its task can need is
 * `invalid_output` before it is parsed: the output token limit × 16 characters a token, 4096 × 16 for
 * notes and min(16000, 800 + count × 400) × 16 for MCQ (the numbers written out here, not read from the code).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { validateStudyAnswer } from '../../src/study/index.js';

const directory = new URL('../fixtures/model-outputs/', import.meta.url);
const validNotes = readFileSync(new URL('notes-en-fenced.txt', directory), 'utf8');
const answer = (text: string) => ({ text, model: 'fixture', usage: { inputTokens: 1, outputTokens: 1 }, truncated: false });

/** The same notes, padded with whitespace to `length` characters: still valid JSON, still the same material. */
function padded(length: number): string {
  return validNotes + ' '.repeat(Math.max(0, length - validNotes.length));
}

describe('answer size ceiling', () => {
  it('accepts valid notes up to 4096 × 16 characters', () => {
    expect(validateStudyAnswer('notes', answer(validNotes)).ok).toBe(true);
    expect(validateStudyAnswer('notes', answer(padded(4096 * 16))).ok).toBe(true);
  });

  it('refuses the same notes one character past it, and 7 MB of them, as invalid output', () => {
    for (const length of [4096 * 16 + 1, 7 * 1024 * 1024]) {
      const verdict = validateStudyAnswer('notes', answer(padded(length)));
      expect(verdict.ok).toBe(false);
      if (!verdict.ok) expect(verdict.errors[0]).toContain(`more than the ${4096 * 16}`);
    }
  });

  it('gives question tasks room that grows with the count asked for', () => {
    const text = ' '.repeat((800 + 10 * 400) * 16 + 1);
    const verdict = validateStudyAnswer('mcq', answer(text), { count: 10, conceptIds: ['c1'] });
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.errors[0]).toContain(`more than the ${(800 + 10 * 400) * 16}`);
  });

  it('refuses an answer nested deeper than 32 levels before parsing it, and stays linear on one full of braces', () => {
    const deep = validateStudyAnswer('notes', answer(`${'['.repeat(33)}${']'.repeat(33)}`));
    expect(deep.ok).toBe(false);
    if (!deep.ok) expect(deep.errors[0]).toContain('deeper than 32');
    // 60 000 `{"a":[}` pieces: every `{` opens a candidate object that never parses; trying each would be quadratic.
    const braces = `Here: ${'{"a":[}'.repeat(8_000)}`;
    const started = process.hrtime.bigint();
    expect(validateStudyAnswer('notes', answer(braces)).ok).toBe(false);
    // A generous bound (the quadratic scan took seconds): this is a complexity check, not a timing goal.
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(2000);
  });
});
