import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor, fromCallback, type AnyActorRef } from 'xstate';
import { createAbortControllers } from '../../src/actors/abort-controllers.js';
import { createUpstreamCalls, type UpstreamEvent } from '../../src/actors/call-upstream.js';
import type { ProviderAdapter, ProviderAnswer } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { request } from './gateway-harness.js';

/**
 * Upstream calls reuse their abort controllers (src/actors/abort-controllers.ts): a controller comes back
 * only as good as new, so a reused signal fires for its new call alone.
 */
describe('abort controllers kept for reuse', () => {
  it('hands back a controller that never aborted and that nobody listens to', () => {
    const pool = createAbortControllers();
    const first = pool.take();
    const listener = (): void => undefined;
    first.signal.addEventListener('abort', listener);
    first.signal.removeEventListener('abort', listener);
    pool.giveBack(first);
    expect(pool.size).toBe(1);
    expect(pool.take()).toBe(first);
    expect(pool.size).toBe(0);
  });

  it('drops a controller that aborted, or whose signal someone still listens to', () => {
    const pool = createAbortControllers();
    const aborted = pool.take();
    aborted.abort();
    const listened = pool.take();
    listened.signal.addEventListener('abort', () => undefined);
    const handled = pool.take();
    handled.signal.onabort = () => undefined;
    for (const controller of [aborted, listened, handled]) pool.giveBack(controller);
    expect(pool.size).toBe(0);
    const fresh = pool.take();
    expect([aborted, listened, handled]).not.toContain(fresh);
    expect(fresh.signal.aborted).toBe(false);
  });

  it('keeps at most its limit', () => {
    const pool = createAbortControllers(2);
    for (let index = 0; index < 5; index += 1) pool.giveBack(new AbortController());
    expect(pool.size).toBe(2);
  });
});

describe('the upstream calls reuse a settled call’s controller, never an aborted one', () => {
  const t0 = 1_800_000_000_000;
  const answer: ProviderAnswer = {
    text: '{}',
    model: 'm',
    usage: { inputTokens: 1, outputTokens: 1 },
    truncated: false,
  };
  const replyTo: AnyActorRef = createActor(fromCallback(() => undefined));
  const apiKey = new Secret('test-claude-key-reuse');
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(t0);
  });
  afterEach(() => vi.useRealTimers());

  it('gives the next call the signal of one that answered; a timed-out call’s aborted signal goes to no one', async () => {
    const pending: { resolve: (answer: ProviderAnswer) => void; signal: AbortSignal }[] = [];
    const adapter: ProviderAdapter = {
      id: 'claude',
      model: 'm',
      // Listens while in flight and lets go when done, as undici does with a request's signal.
      generate: (_request, _key, signal) =>
        new Promise<ProviderAnswer>((resolve, reject) => {
          const onAbort = (): void => reject(new DOMException('aborted', 'AbortError'));
          signal.addEventListener('abort', onAbort, { once: true });
          pending.push({
            signal,
            resolve: (value) => {
              signal.removeEventListener('abort', onAbort);
              resolve(value);
            },
          });
        }),
      classify: () => ({ errorClass: 'server_error', message: 'failed' }),
    };
    const runtime = createUpstreamCalls({
      adapters: { claude: adapter, gpt: adapter, timelygpt: adapter },
      timeoutMs: 1000,
    });
    const reported: UpstreamEvent[] = [];
    const start = (callId: string): void =>
      runtime.start(
        {
          providerId: 'claude',
          callId,
          replyTo,
          keyId: 'key-1',
          request,
          apiKey,
          validate: () => ({ ok: true, value: 1 }),
        },
        (event) => reported.push(event),
      );

    start('c1');
    pending[0]?.resolve(answer);
    await vi.advanceTimersByTimeAsync(0);
    start('c2');
    expect(pending[1]?.signal).toBe(pending[0]?.signal);
    expect(pending[1]?.signal.aborted).toBe(false);
    // c2 times out: its signal aborts, and the late cancel of the long-settled c1 changes nothing.
    await vi.advanceTimersByTimeAsync(1000);
    runtime.cancel('c1', t0 + 1000);
    expect(pending[1]?.signal.aborted).toBe(true);
    start('c3');
    expect(pending[2]?.signal).not.toBe(pending[1]?.signal);
    expect(pending[2]?.signal.aborted).toBe(false);
    pending[2]?.resolve(answer);
    await vi.advanceTimersByTimeAsync(0);
    expect(reported.map((event) => `${event.callId} ${event.type}`)).toEqual([
      'c1 upstream.succeeded',
      'c2 upstream.failed',
      'c3 upstream.succeeded',
    ]);
  });
});
