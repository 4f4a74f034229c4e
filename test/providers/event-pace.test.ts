/**
 * How fast a call reads its provider's events (src/providers/streamed-text.ts `readEvents`, issue 28): the
 * first `burst` at once, then no more than `perSecond` a second, the stream left unread (paused) meanwhile;
 * an abort while it waits ends the wait at once. The answers through the real SDKs are paced too:
 * answer-ceiling.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { readEvents } from '../../src/providers/streamed-text.js';
import { UpstreamAbortError } from '../../src/providers/upstream-errors.js';

/** `count` events, each recorded with the time it was pulled. */
function recordedStream(count: number, pulledAt: number[]): AsyncIterable<unknown> {
  return {
    async *[Symbol.asyncIterator]() {
      for (let index = 0; index < count; index += 1) {
        pulledAt.push(performance.now());
        yield { index };
      }
    },
  };
}

describe('readEvents pace', () => {
  it('hands on the first 20 at once, then no more than 100 a second', async () => {
    const pulledAt: number[] = [];
    const read: number[] = [];
    const started = performance.now();
    await readEvents<{ index?: number }>(recordedStream(60, pulledAt), new AbortController().signal, (event) => read.push(event.index ?? -1), {
      burst: 20,
      perSecond: 100,
    });
    expect(read).toEqual(Array.from({ length: 60 }, (_, index) => index));
    // Event n (from 0) past the burst is pulled no sooner than (n + 1 − 20) / 100 s after the start.
    for (let n = 20; n < 60; n += 1) expect((pulledAt[n] ?? 0) - started).toBeGreaterThanOrEqual(((n - 20) * 1000) / 100 - 2);
    // The first 20 did not wait.
    expect((pulledAt[19] ?? 0) - started).toBeLessThan(200);
  });

  it('stops waiting when the call is aborted, and fails as aborted', async () => {
    const controller = new AbortController();
    const read: unknown[] = [];
    const started = performance.now();
    setTimeout(() => controller.abort(new Error('deadline')), 100);
    const error = await readEvents(recordedStream(1_000, []), controller.signal, (event) => read.push(event), { burst: 5, perSecond: 1 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(UpstreamAbortError);
    expect(read.length).toBe(6);
    expect(performance.now() - started).toBeLessThan(900);
  });
});
