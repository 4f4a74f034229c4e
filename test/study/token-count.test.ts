import { countTokens } from 'gpt-tokenizer';
import { describe, expect, it } from 'vitest';
import { boundedPieces, fitsWithoutCounting } from '../../src/study/token-count.js';
import { estimateTokens, splitText, splitTextSliced } from '../../src/study/split.js';
import { longDocument } from './long-text.js';

/** The longest run of whitespace or of non-whitespace in `text` (the rule, stated with a regex). */
function longestRun(text: string): number {
  return Math.max(0, ...(text.match(/\s+|\S+/gu) ?? []).map((run) => run.length));
}

describe('bounded token counting (BPE is quadratic in a run, so no run longer than 256 reaches it)', () => {
  it.each([
    ['100 000 a in a row', 'a'.repeat(100_000)],
    ['100 000 spaces between two words', `x${' '.repeat(100_000)}y`],
    ['30 000 unspaced CJK characters', '漢字仮名交じり文'.repeat(3750)],
    ['mixed exotic whitespace', '\u3000 \u2003\t'.repeat(20_000)],
    ['emoji (surrogate pairs) without spaces', '😀'.repeat(20_000)],
  ])('cuts %s into pieces whose runs are at most 256 characters, losing nothing', (_name, text) => {
    const pieces = boundedPieces(text);
    expect(pieces.join('')).toBe(text);
    for (const piece of pieces) {
      expect(longestRun(piece)).toBeLessThanOrEqual(256);
      expect(piece.length).toBeLessThanOrEqual(16_384);
      // Never between the halves of a surrogate pair.
      expect(piece.charCodeAt(0) >= 0xdc00 && piece.charCodeAt(0) <= 0xdfff).toBe(false);
    }
  });

  it('cuts ordinary prose only between a word and the space before the next, so the count is exact', () => {
    const text = longDocument(30, 'en');
    expect(text.length).toBeGreaterThan(16_384);
    expect(boundedPieces(text).length).toBeGreaterThan(1);
    // The oracle: the library's own count of the whole text (its runs are short, so it is cheap here).
    expect(estimateTokens(text)).toBe(countTokens(text));
    const korean = longDocument(20, 'ko');
    expect(estimateTokens(korean)).toBe(countTokens(korean));
  });

  it('counts a long unspaced run close to the library (a cut inside a run adds at most a token or two)', () => {
    const text = 'a'.repeat(20_000);
    const exact = countTokens(text);
    const estimate = estimateTokens(text);
    expect(estimate).toBeGreaterThanOrEqual(exact);
    expect(estimate).toBeLessThanOrEqual(exact + 2 * Math.ceil(text.length / 256));
  });

  it('proves a text fits from its UTF-8 length alone, and only when it really does', () => {
    expect(fitsWithoutCounting('a'.repeat(2000), 6000)).toBe(true);
    expect(fitsWithoutCounting('a'.repeat(6000), 6000)).toBe(true);
    expect(fitsWithoutCounting('a'.repeat(6001), 6000)).toBe(false);
    // 2500 Hangul syllables are 7500 UTF-8 bytes: no proof (they may still fit; then they are counted).
    expect(fitsWithoutCounting('가'.repeat(2500), 6000)).toBe(false);
    expect(fitsWithoutCounting('가'.repeat(2000), 6000)).toBe(true);
  });

  it('splits a 100 000-character unspaced text into parts within the budget', () => {
    const text = 'a'.repeat(100_000);
    const parts = splitText(text, { budgetTokens: 6000 });
    expect(parts.join('')).toBe(text);
    for (const part of parts) expect(estimateTokens(part)).toBeLessThanOrEqual(6000);
  });

  it('hands the event loop back while it splits a long text (splitTextSliced)', async () => {
    const text = longDocument(60, 'ko');
    let turns = 0;
    let done = false;
    const tick = (): void => {
      if (done) return;
      turns += 1;
      setImmediate(tick);
    };
    setImmediate(tick);
    const parts = await splitTextSliced(text, { budgetTokens: 1500 }, 0);
    done = true;
    expect(parts.map((part) => part.text)).toEqual(splitText(text, { budgetTokens: 1500 }));
    expect(turns).toBeGreaterThan(10);
  });
});
