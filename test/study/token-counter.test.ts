import { afterEach, describe, expect, it, vi } from 'vitest';
import { createTokenCounter, type TokenCounter } from '../../src/study/index.js';
import { estimateTokens, splitTextParts } from '../../src/study/split.js';
import { longDocument } from './long-text.js';

describe('token counter (counting off the main thread, the tokenizer only when needed)', () => {
  let counter: TokenCounter | undefined;
  afterEach(async () => {
    await counter?.close();
    counter = undefined;
  });

  it('settles a text the byte bound proves to fit without starting the worker', async () => {
    counter = createTokenCounter();
    const parts = await counter.split('  A short text.\n-- 1 of 2 --\nSecond page.  ', 6000);
    expect(parts).toEqual(splitTextParts('  A short text.\n-- 1 of 2 --\nSecond page.  ', { budgetTokens: 6000 }));
    expect(await counter.split('   ', 6000)).toEqual([]);
    expect(counter.running).toBe(false);
  });

  it('splits and counts in the worker exactly as the tokenizer does on the calling thread', async () => {
    counter = createTokenCounter();
    const korean = longDocument(20, 'ko');
    const unspaced = 'a'.repeat(100_000);
    expect(await counter.split(korean, 1500)).toEqual(splitTextParts(korean, { budgetTokens: 1500 }));
    expect(counter.running).toBe(true);
    expect(await counter.split(unspaced, 6000)).toEqual(splitTextParts(unspaced, { budgetTokens: 6000 }));
    expect(await counter.count(korean)).toBe(estimateTokens(korean));
    expect(await counter.count('')).toBe(0);
  });

  it('answers requests made at once, each with its own result', async () => {
    counter = createTokenCounter();
    const texts = [longDocument(5, 'en'), longDocument(6, 'ko'), 'b'.repeat(30_000)];
    const counts = await Promise.all(texts.map((text) => (counter as TokenCounter).count(text)));
    expect(counts).toEqual(texts.map((text) => estimateTokens(text)));
  });

  it('ends its worker after the idle period and starts a new one for the next text', async () => {
    counter = createTokenCounter({ idleMs: 20 });
    const text = longDocument(4, 'en');
    await counter.count(text);
    await vi.waitFor(() => expect(counter?.running).toBe(false), { timeout: 20_000, interval: 20 });
    expect(await counter.count(text)).toBe(estimateTokens(text));
  });

  it('fails the waiting requests when closed, and works again afterwards', async () => {
    counter = createTokenCounter();
    const pending = expect(counter.count(longDocument(30, 'en'))).rejects.toThrow(/closed/);
    await counter.close();
    await pending;
    expect(await counter.count('hello world')).toBe(2);
  });
});
