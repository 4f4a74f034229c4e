/**
 * The reasons an `invalid_output` attempt carries: at most 3 named, each at most 160 characters, the
 * whole at most 480, on one line, the rest counted as "(and n more)".
 */
import { describe, expect, it } from 'vitest';
import { invalidOutputMessage, reasonsOfInvalidOutputMessage, summarizeValidationErrors } from '../../src/errors/index.js';

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
});
