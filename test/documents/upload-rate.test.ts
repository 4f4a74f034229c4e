/**
 * Upload bodies are read no faster than a byte rate shared by every upload of the process: the garbage
 * of 585 MB read in 8 s delayed every other client by 430 ms at p99.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ByteRate } from '../../src/http/routes/upload-rate.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Resolves `promise` into a flag that tests read as time advances. */
function track(promise: Promise<void>): { done: boolean } {
  const state = { done: false };
  void promise.then(() => (state.done = true));
  return state;
}

describe('ByteRate', () => {
  it('lets one second of bytes through at once, then 1,000 bytes a second at 1,000 bytes a second', async () => {
    const rate = new ByteRate(1000);
    const first = track(rate.take(1000));
    await vi.advanceTimersByTimeAsync(0);
    expect(first.done).toBe(true);
    const second = track(rate.take(500));
    await vi.advanceTimersByTimeAsync(499);
    expect(second.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(second.done).toBe(true);
  });

  it('shares the rate between uploads: two takers of 1,000 bytes each after the burst wait 1 s and 2 s', async () => {
    const rate = new ByteRate(1000);
    await rate.take(1000);
    const a = track(rate.take(1000));
    const b = track(rate.take(1000));
    await vi.advanceTimersByTimeAsync(999);
    expect([a.done, b.done]).toEqual([false, false]);
    await vi.advanceTimersByTimeAsync(1);
    expect([a.done, b.done]).toEqual([true, false]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(b.done).toBe(true);
  });

  it('refills while idle, never past one second of bytes', async () => {
    const rate = new ByteRate(1000);
    await rate.take(1000);
    await vi.advanceTimersByTimeAsync(10_000);
    // Ten idle seconds still allow only one second's burst.
    expect(track(rate.take(1000)).done).toBe(false);
    await vi.advanceTimersByTimeAsync(0);
    const over = track(rate.take(1));
    await vi.advanceTimersByTimeAsync(0);
    expect(over.done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(over.done).toBe(true);
  });
});
