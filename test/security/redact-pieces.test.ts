/**
 * A key echoed in short pieces across separate JSON fields: a provider that put the key in
 * 7-character pieces, one per field of the material, passed the 8-character scan. In a success body any
 * 6 consecutive letters and digits of a key in flight are redacted, wherever they stand; the material
 * around them is kept.
 */
import { describe, expect, it } from 'vitest';
import { redactKeysDeep } from '../../src/security/redact.js';

const key = 'fake-claude-key-Zx9Qw7Lm2Np4Rt6Vy8Bc1Df3';

/** The key cut into `size`-character pieces. */
function piecesOf(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let start = 0; start < text.length; start += size) pieces.push(text.slice(start, start + size));
  return pieces;
}

/** Every run of 6 letters or digits of the key, lowercased: what must not survive anywhere. */
function sixGrams(text: string): string[] {
  const symbols = text.toLowerCase().replace(/[^0-9a-z]/g, '');
  return Array.from({ length: symbols.length - 5 }, (_, start) => symbols.slice(start, start + 6));
}

describe('redaction of short pieces of a key in a success body', () => {
  it('leaves none of a key echoed in 7-character pieces, one per field, and keeps the material', () => {
    const pieces = piecesOf(key, 7);
    const body = {
      keyConcepts: pieces.map((piece, index) => ({ id: `c${index}`, term: `Term ${piece}`, definition: 'Plants turn light into energy.', importance: 'high' })),
      glossary: [{ term: 'Chlorophyll', definition: 'The green pigment of leaves.' }],
    };
    const redacted = redactKeysDeep(body, [key]);
    const everything = JSON.stringify(redacted).toLowerCase().replace(/[^0-9a-z]/g, '');
    for (const gram of sixGrams(key)) expect(everything).not.toContain(gram);
    expect(redacted.glossary).toEqual(body.glossary);
    expect(redacted.keyConcepts[0]?.definition).toBe('Plants turn light into energy.');
    expect(redacted.keyConcepts[1]?.term).toBe('Term [redacted]');
  });

  it('finds 6-character pieces spelled with other case and punctuation between them', () => {
    const redacted = redactKeysDeep({ text: 'note: ZX9-QW7 and then lm2np4' }, [key]);
    expect(redacted.text).toBe('note: [redacted] and then [redacted]');
  });

  it('keeps text that shares only 5 characters in a row with the key', () => {
    const body = { text: 'Zx9Qw and Lm2Np are not enough.' };
    expect(redactKeysDeep(body, [key])).toEqual(body);
  });
});
