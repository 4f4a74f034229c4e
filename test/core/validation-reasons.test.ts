/**
 * The reasons an `invalid_output` attempt carries: at most 3 named, each at most 160 characters, the
 * whole at most 480, on one line, the rest counted as "(and n more)".
 */
import { describe, expect, it } from 'vitest';
import { clipText, invalidOutputMessage, reasonsOfInvalidOutputMessage, summarizeValidationErrors } from '../../src/errors/index.js';

describe('validation reasons', () => {
  it('names the first three and counts the rest', () => {
    expect(summarizeValidationErrors(['a: bad', 'b: bad', 'c: bad', 'd: bad', 'e: bad'])).toBe('a: bad; b: bad; c: bad (and 2 more)');
  });

  it('clips a long reason to 160 characters and joins lines', () => {
    const long = `x: ${'word '.repeat(10_000)}`;
    const summary = summarizeValidationErrors([long, 'two\nlines']);
    const [first, second] = summary.split('; ');
    expect(first?.length).toBe(160);
    expect(first?.endsWith('…')).toBe(true);
    expect(second).toBe('two lines');
  });

  it('never passes 480 characters whatever comes in', () => {
    const errors = Array.from({ length: 1000 }, (_, index) => `${index}: ${'z'.repeat(1000)}`);
    expect(summarizeValidationErrors(errors).length).toBeLessThanOrEqual(480);
  });

  it('the attempt message carries the summary after a fixed prefix, and gives it back', () => {
    const message = invalidOutputMessage(['language: write it in Korean']);
    expect(message).toBe('The output failed validation: language: write it in Korean');
    expect(reasonsOfInvalidOutputMessage(message)).toBe('language: write it in Korean');
    expect(invalidOutputMessage([])).toBe('The output failed validation.');
    expect(reasonsOfInvalidOutputMessage('The output failed validation.')).toBeUndefined();
  });

  it('names exactly three without a count, and leaves empty reasons out', () => {
    expect(summarizeValidationErrors(['a', 'b', 'c'])).toBe('a; b; c');
    expect(summarizeValidationErrors(['', 'b'])).toBe('b');
    expect(summarizeValidationErrors([])).toBe('');
    expect(invalidOutputMessage([' \n '])).toBe('The output failed validation.');
  });

  it('puts a reason on one line: control characters and DEL become spaces, runs of spaces one, ends trimmed', () => {
    expect(summarizeValidationErrors(['  a\t\u0007b\u007fc \r\n d  '])).toBe('a b c d');
  });

  it('reads at most 640 characters of a reason (4 × 160: bounded work per reason)', () => {
    expect(summarizeValidationErrors([`${' '.repeat(640)}late`, 'x'])).toBe('x');
  });

  it('gives back no reasons for a message without the prefix, without reasons, or without a message', () => {
    expect(reasonsOfInvalidOutputMessage(undefined)).toBeUndefined();
    expect(reasonsOfInvalidOutputMessage('The output failed validation: ')).toBeUndefined();
    expect(reasonsOfInvalidOutputMessage('Upstream said: The output failed validation: x')).toBeUndefined();
  });
});

describe('clipText', () => {
  it('keeps a text of exactly the limit, cuts a longer one to the limit with an ellipsis', () => {
    expect(clipText('abcd', 4)).toBe('abcd');
    expect(clipText('abcde', 4)).toBe('abc…');
  });

  it('drops the spaces before the ellipsis', () => {
    expect(clipText('ab   cdef', 5)).toBe('ab…');
  });

  it('never ends on half of a surrogate pair', () => {
    const text = `${'a'.repeat(3)}\u{1F600}bbbb`;
    expect(clipText(text, 5)).toBe('aaa…');
    expect(clipText(text, 6)).toBe('aaa\u{1F600}…');
  });

  it('knows the whole high-surrogate range, its first (U+D800) and last (U+DBFF) code unit included', () => {
    // U+10000 is \uD800\uDC00, U+10FFFF is \uDBFF\uDFFF: cut after their first half, both are dropped.
    expect(clipText('ab\u{10000}cd', 4)).toBe('ab…');
    expect(clipText('ab\u{10FFFF}cd', 4)).toBe('ab…');
    // A low surrogate (the pair's second half) ends a whole character: kept.
    expect(clipText('ab\u{10000}cd', 5)).toBe('ab\u{10000}…');
  });
});
