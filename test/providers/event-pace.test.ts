/**
 * How fast a call reads its provider's events (src/providers/streamed-text.ts `readEvents`): the
 * first `burst` at once, then no more than `perSecond` a second, `batch` at a time (a batch is read in one
 * turn of the event loop: one message to the call actor), the stream left unread (paused) meanwhile;
 * an abort while it waits ends the wait at once. The answers through the real SDKs are paced too:
 * answer-ceiling.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { paceFor, readEvents } from '../../src/providers/streamed-text.js';
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
  it('hands on the first 20 at once, then no more than 100 a second, 10 at a time', async () => {
    const pulledAt: number[] = [];
    const read: number[] = [];
    const started = performance.now();
    await readEvents<{ index?: number }>(recordedStream(60, pulledAt), new AbortController().signal, { burst: 20, perSecond: 100, batch: 10 }, (event) =>
      read.push(event.index ?? -1),
    );
    expect(read).toEqual(Array.from({ length: 60 }, (_, index) => index));
    // Event n (from 0) past the burst is in batch ⌊(n − 20) / 10⌋, pulled no sooner than that many batches
    // of 10 at 100 a second after the start (0.1 s each); the events of a batch follow each other at once.
    for (let n = 20; n < 60; n += 1) expect((pulledAt[n] ?? 0) - started).toBeGreaterThanOrEqual(Math.floor((n - 20) / 10) * 100 - 2);
    for (const first of [30, 40, 50]) expect((pulledAt[first + 9] ?? 0) - (pulledAt[first] ?? 0)).toBeLessThan(50);
    // The first 20 did not wait.
    expect((pulledAt[19] ?? 0) - started).toBeLessThan(200);
  });

  it('stops waiting when the call is aborted, and fails as aborted', async () => {
    const controller = new AbortController();
    const read: unknown[] = [];
    const started = performance.now();
    setTimeout(() => controller.abort(new Error('deadline')), 100);
    const error = await readEvents(recordedStream(1_000, []), controller.signal, { burst: 5, perSecond: 1, batch: 1 }, (event) => read.push(event)).catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(UpstreamAbortError);
    expect(read.length).toBe(6);
    expect(performance.now() - started).toBeLessThan(900);
  });

  it('reads 1 000 events at once then 500 a second, faster only when the call\'s deadline needs it', () => {
    // Rule: a call's longest answer (its pieces, and as many other events) is read within half its deadline.
    expect(paceFor({ maxChars: 65_536, maxPieces: 4_160 }, undefined)).toEqual({ burst: 1_000, perSecond: 500, batch: 50 });
    // 60 s: 8 320 events, 7 320 past the burst, in 30 s → 244 a second: the floor of 500 holds.
    expect(paceFor({ maxChars: 65_536, maxPieces: 4_160 }, 60_000).perSecond).toBe(500);
    // 3 s: 7 320 paced events within 1.5 s → 4 880 a second.
    expect(paceFor({ maxChars: 65_536, maxPieces: 4_160 }, 3_000).perSecond).toBe(4_880);
  });
});

