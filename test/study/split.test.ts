import { describe, expect, it } from 'vitest';
import { estimateTokens, splitText } from '../../src/study/split.js';
import { longDocument } from './long-text.js';

describe('token estimate', () => {
  it('counts with a real BPE tokenizer, not characters/4', () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('hello world')).toBe(2);
    const korean = '운영체제는 컴퓨터 하드웨어를 관리하는 소프트웨어이다.';
    // Korean costs far more tokens per character than English: characters/4 would undercount it badly.
    expect(estimateTokens(korean)).toBeGreaterThan(korean.length / 4);
  });
});

describe('splitText', () => {
  it('returns a text within the budget as one part', () => {
    expect(splitText('Short text.\n\nSecond paragraph.', { budgetTokens: 100 })).toEqual(['Short text.\n\nSecond paragraph.']);
  });

  it.each([
    ['English', 'en' as const, 60, 6000],
    ['Korean', 'ko' as const, 20, 1500],
    ['English, tight budget', 'en' as const, 5, 300],
  ])('keeps every part of a long %s document within the budget and loses no text', (_name, lang, pages, budget) => {
    const text = longDocument(pages, lang);
    const parts = splitText(text, { budgetTokens: budget });
    expect(estimateTokens(text)).toBeGreaterThan(budget);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) expect(estimateTokens(part)).toBeLessThanOrEqual(budget);
    const squash = (value: string): string => value.replace(/\s+/g, '');
    expect(squash(parts.join(''))).toBe(squash(text));
  });

  it('cuts on chapter boundaries when chapters fit', () => {
    const text = longDocument(12);
    const chapterTokens = estimateTokens(text.split(/\n\n(?=Chapter )/)[0] ?? '');
    const parts = splitText(text, { budgetTokens: chapterTokens * 3 });
    for (const part of parts) expect(part.startsWith('Chapter ')).toBe(true);
  });

  it('never cuts mid-sentence when sentences fit', () => {
    const parts = splitText(longDocument(3), { budgetTokens: 120 });
    for (const part of parts) {
      expect(part.trimEnd()).toMatch(/[.:\d]$/);
      expect(part).toMatch(/^(Chapter|On page)/);
    }
  });

  it('cuts a single sentence longer than the budget by tokens, as a last resort', () => {
    const sentence = `${'word '.repeat(500)}end.`;
    const parts = splitText(sentence, { budgetTokens: 100 });
    expect(parts.length).toBeGreaterThan(4);
    for (const part of parts) expect(estimateTokens(part)).toBeLessThanOrEqual(100);
  });

  it('drops page markers a PDF extractor inserted', () => {
    const parts = splitText('First page text.\n-- 1 of 2 --\nSecond page text.', { budgetTokens: 100 });
    expect(parts.join('\n')).not.toContain('of 2');
  });
});
