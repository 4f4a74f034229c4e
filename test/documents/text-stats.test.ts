import { describe, expect, it } from 'vitest';
import { looksLikePdf } from '../../src/documents/detect.js';
import { cleanPageText, countCharacters, countWords, joinPages } from '../../src/documents/text-stats.js';

describe('looksLikePdf', () => {
  it('accepts %PDF- at the start', () => {
    expect(looksLikePdf(Buffer.from('%PDF-1.7\n...'))).toBe(true);
  });

  it('accepts %PDF- after leading junk within the first 1024 bytes', () => {
    expect(looksLikePdf(Buffer.concat([Buffer.alloc(1000, 0x20), Buffer.from('%PDF-1.4')]))).toBe(true);
  });

  it('refuses %PDF- that starts past the first 1024 bytes', () => {
    expect(looksLikePdf(Buffer.concat([Buffer.alloc(1024, 0x20), Buffer.from('%PDF-1.4')]))).toBe(false);
  });

  it('refuses other bytes, a PNG and an empty file', () => {
    expect(looksLikePdf(Buffer.from('hello, this is plain text'))).toBe(false);
    expect(looksLikePdf(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe(false);
    expect(looksLikePdf(new Uint8Array(0))).toBe(false);
  });
});

describe('countWords', () => {
  it.each([
    ['The Calvin cycle fixes carbon dioxide.', 6],
    // UAX #29: a contraction and a decimal number are one word each; a hyphen splits.
    ["Don't split contractions, e-mail or 3.14 oddly", 8],
    // Korean words (eojeol) are written with spaces between them, particles attached.
    ['광합성은 빛 에너지를 포도당에 저장된 화학 에너지로 바꾼다.', 8],
    // A Korean word (eojeol) is what spaces delimit: ATP는 (a Latin stem with its particle) is one word.
    ['ATP는 세포의 energy 통화이다', 4],
    ['  ... — !! ', 0],
  ])('%s has %i words', (text, words) => {
    expect(countWords(text)).toBe(words);
  });
});

describe('countCharacters', () => {
  it('counts code points and leaves whitespace out', () => {
    expect(countCharacters('광합성 ATP\n🌱')).toBe(7);
  });
});

describe('cleanPageText', () => {
  it('drops page markers an extractor inserts, so a page holding only markers is empty', () => {
    expect(cleanPageText('\n-- 1 of 3 --\n\n')).toBe('');
    expect(cleanPageText('-- 12 of 140 --')).toBe('');
  });

  it('keeps real text, trims trailing spaces and keeps at most one blank line', () => {
    expect(cleanPageText('Title   \r\n\r\n\r\n\r\nBody -- 1 of 3 -- inline stays\n-- 2 of 3 --')).toBe(
      'Title\n\nBody -- 1 of 3 -- inline stays',
    );
  });
});

describe('joinPages', () => {
  it('separates pages with a blank line and skips empty ones', () => {
    expect(joinPages(['page one', '', 'page three'])).toBe('page one\n\npage three');
  });
});
