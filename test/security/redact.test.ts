/**
 * Key redaction: every 8-character piece of a key, raw, percent-encoded, spaced or punctuated,
 * in base64 or hex, is gone from the output; text holding nothing of a key is returned unchanged.
 * Oracles are literal: they look for the pieces with `includes`, not through the function under test.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { redactDeep, redactKeysDeep, keyRedactor, redactSecrets } from '../../src/security/redact.js';

/** Keys from letters a-m, digits 0-4 and '-'/'_': random, and disjoint from the filler text below. */
const keyArbitrary = fc
  .array(fc.constantFrom(...'abcdefghijklmABCDEFGHIJKLM01234'.split('')), { minLength: 16, maxLength: 48 })
  .map((chars) => `tk-${chars.join('')}`);
/** Filler with none of the key's letters or digits (either case): nothing in it can match a key. */
const fillerArbitrary = fc.string({
  unit: fc.constantFrom(...'nopqrstuvwxyzNOPQRSTUVWXYZ56789 .,:;!?()"\n'.split('')),
  maxLength: 80,
});

/** Every 8-character window of `text`. */
function windows(text: string): string[] {
  const out: string[] = [];
  for (let start = 0; start + 8 <= text.length; start += 1) out.push(text.slice(start, start + 8));
  return out;
}

/** A piece of the key's body (letters and digits; the `tk-` prefix's dash is not a letter or digit) of 8+ characters. */
const pieceOf = (key: string) =>
  fc
    .integer({ min: 3, max: key.length - 8 })
    .chain((start) => fc.integer({ min: start + 8, max: key.length }).map((end) => key.slice(start, end)));

describe('redactSecrets', () => {
  it('removes every 8-character piece of a key echoed raw', () => {
    fc.assert(
      fc.property(
        keyArbitrary.chain((key) =>
          fc.tuple(fc.constant(key), pieceOf(key), fillerArbitrary, fillerArbitrary),
        ),
        ([key, piece, before, after]) => {
          const out = redactSecrets(`${before}${piece}${after}`, [key]);
          for (const window of windows(piece)) expect(out.includes(window), window).toBe(false);
          expect(out).toContain('[redacted]');
        },
      ),
    );
  });

  it('removes a piece echoed percent-encoded, spaced, punctuated or in another case', () => {
    const variants: readonly ((piece: string) => string)[] = [
      (piece) => [...piece].map((char) => `%${char.charCodeAt(0).toString(16).padStart(2, '0')}`).join(''),
      (piece) =>
        [...piece]
          .map((char) => `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)
          .join(''),
      (piece) => encodeURIComponent(piece),
      (piece) => [...piece].join(' '),
      (piece) => [...piece].join('.'),
      (piece) => [...piece].join('-\n'),
      (piece) => piece.toUpperCase(),
    ];
    fc.assert(
      fc.property(
        keyArbitrary.chain((key) =>
          fc.tuple(
            fc.constant(key),
            pieceOf(key),
            fc.integer({ min: 0, max: variants.length - 1 }),
            fillerArbitrary,
          ),
        ),
        ([key, piece, which, filler]) => {
          const encode = variants[which] ?? ((text: string) => text);
          const out = redactSecrets(`${filler} ${encode(piece)} ${filler}`, [key]);
          // No 8 consecutive characters of the key survive in that form.
          for (const window of windows(piece.replace(/[-_]/gu, '')))
            expect(out.includes(encode(window)), encode(window)).toBe(false);
          expect(out).toContain('[redacted]');
        },
      ),
    );
  });

  it('removes the key echoed in base64 (any alignment) or hex', () => {
    fc.assert(
      fc.property(keyArbitrary, fc.string({ maxLength: 2 }), fillerArbitrary, (key, lead, filler) => {
        const base64 = Buffer.from(`${lead}${key}`).toString('base64');
        const hex = Buffer.from(key).toString('hex');
        const out = redactSecrets(`${filler}${base64} and ${hex}${filler}`, [key]);
        // The middle of each encoding (its ends depend on what surrounds the key) is gone.
        expect(out.includes(base64.slice(8, 24))).toBe(false);
        expect(out.includes(hex.slice(8, 24))).toBe(false);
      }),
    );
  });

  it('removes a key holding characters outside ASCII, echoed raw, in base64 or hex', () => {
    // Multi-byte UTF-8 (é, 한, 😀) and a character whose lowercase is longer than itself (İ → i̇).
    const key = 'tk-İé한😀Ab3De4Fg0Hj2Kl1Mb😀';
    const bytes = Buffer.from(key, 'utf8');
    const base64 = bytes.toString('base64');
    const hex = bytes.toString('hex');
    const out = redactSecrets(`raw ${key} base64 ${base64} hex ${hex} end`, [key]);
    // Only ASCII letters and digits are compared in a text: the run of them in the key goes, and the middle of each encoding.
    expect(out.split('[redacted]')).toHaveLength(4);
    for (const piece of ['Ab3De4Fg0Hj2Kl1Mb', base64.slice(8, 24), hex.slice(8, 24)])
      expect(out.includes(piece), piece).toBe(false);
  });

  it('returns text that holds nothing of the key unchanged', () => {
    fc.assert(
      fc.property(keyArbitrary, fillerArbitrary, (key, text) => {
        expect(redactSecrets(text, [key])).toBe(text);
      }),
    );
  });

  it('leaves a 7-character piece (too short to be told from ordinary text) and what surrounds an echo', () => {
    const key = 'tk-Ab3De4Fg0Hj2Kl1Mb';
    expect(redactSecrets('code Ab3De4F here', [key])).toBe('code Ab3De4F here');
    expect(redactSecrets('see Ab3De4Fg, then', [key])).toBe('see [redacted], then');
  });

  it('removes every echo of every key from a long text, and nothing else', () => {
    fc.assert(
      fc.property(
        fc.array(keyArbitrary, { minLength: 1, maxLength: 3 }),
        fc.array(fc.tuple(fillerArbitrary, fc.nat()), { minLength: 1, maxLength: 40 }),
        (keys, chunks) => {
          // ~100 KB of filler with a whole key (one of the request's, in turn) after every chunk.
          const pad = 'xyz '.repeat(600);
          const echoed = chunks
            .map(([filler, which]) => `${pad}${filler} ${keys[which % keys.length] ?? ''} `)
            .join('');
          const out = redactSecrets(echoed, keys);
          for (const key of keys)
            for (const window of windows(key.slice(3))) expect(out.includes(window), window).toBe(false);
          // Each whole key (its `tk` is part of it) is one stretch; the filler around it is kept as it was.
          expect(out).toBe(echoed.replace(/tk-[a-mA-M0-4]+/gu, '[redacted]'));
        },
      ),
      { numRuns: 30 },
    );
  });

  it('finds a piece whose letters and digits are all zeros, and touching echoes as one stretch', () => {
    const key = 'tk-00000000Ab3De4';
    expect(redactSecrets('a 00000000 b', [key])).toBe('a [redacted] b');
    expect(redactSecrets('a 0000000 b', [key])).toBe('a 0000000 b');
    expect(redactSecrets('a 00000000 b', ['tk-Ab3De4Fg0Hj2Kl1Mb'])).toBe('a 00000000 b');
    // Two echoes whose pieces touch (no symbol between them) are one stretch; apart, two.
    expect(redactSecrets('<00000000Ab3De4|00000000>', [key])).toBe('<[redacted]>');
    expect(redactSecrets('<00000000Ab3De4 x 00000000>', [key])).toBe('<[redacted] x [redacted]>');
  });

  it('returns a JSON value that holds no echo as it is, and copies one that does without changing it', () => {
    const key = 'tk-Ab3De4Fg0Hj2Kl1Mb';
    const redact = keyRedactor([key]);
    const clean = { notes: [{ term: 'paging', level: 2 }], list: ['a', 'b'] };
    expect(redactDeep(clean, redact)).toBe(clean);
    const echoing = { notes: [{ term: 'paging' }, { term: `key ${key}` }], other: ['a'] };
    const before = JSON.stringify(echoing);
    const out = redactDeep(echoing, redact);
    expect(JSON.stringify(echoing)).toBe(before);
    expect(out).toEqual({ notes: [{ term: 'paging' }, { term: 'key [redacted]' }], other: ['a'] });
    // What held no echo is shared, not copied.
    expect(out.other).toBe(echoing.other);
    expect(out.notes[0]).toBe(echoing.notes[0]);
  });

  it('scrubs every string of a JSON value, object keys included', () => {
    const key = 'tk-Ab3De4Fg0Hj2Kl1Mb';
    const redact = keyRedactor([key]);
    const value = { notes: [{ term: `the key is ${key}`, [key]: 'x' }], n: 3 };
    expect(JSON.stringify(redactDeep(value, redact))).not.toContain('Ab3De4Fg');
    expect(redactDeep(value, redact).n).toBe(3);
  });
});

describe('redactKeysDeep (one call, its piece table lent and wiped)', () => {
  it('removes a key echoed whole, in pieces, percent-encoded or spaced, in any field, like redactDeep with keyRedactor', () => {
    fc.assert(
      fc.property(keyArbitrary, fillerArbitrary, fc.nat(), (key, filler, pick) => {
        const forms = [
          key,
          key.slice(3, 14),
          encodeURIComponent(key),
          [...key.slice(5, 15)].join(' '),
          key.toUpperCase(),
        ];
        const echo = forms[pick % forms.length] ?? key;
        const value = {
          task: 'notes',
          result: {
            keyConcepts: [{ term: filler, definition: `${filler}${echo}${filler}` }],
            glossary: [{ [echo]: filler }],
          },
        };
        const out = redactKeysDeep(value, [key]);
        expect(out).toEqual(redactDeep(value, keyRedactor([key])));
        const body = JSON.stringify(out);
        for (const piece of windows(key.slice(3))) expect(body).not.toContain(piece);
      }),
    );
  });

  it('keeps nothing of one request’s keys for the next: the same text passes unchanged under another key', () => {
    const first = 'tk-Ab3De4Fg0Hj2Kl1Mb';
    const second = 'tk-Mm4Lk3Jj2Hh1Gg0Ff';
    const value = { term: `the key is ${first}` };
    expect(redactKeysDeep(value, [first])).toEqual({ term: 'the key is [redacted]' });
    // Same table size for both keys: the second call gets the table the first one gave back.
    expect(redactKeysDeep(value, [second])).toBe(value);
    expect(redactSecrets(value.term, [second])).toBe(value.term);
    expect(redactSecrets(value.term, [first])).toBe('the key is [redacted]');
    expect(redactKeysDeep(value, [second])).toBe(value);
  });
});
