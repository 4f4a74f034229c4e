/**
 * The fallback runs stepped without an actor per run (src/actors/fallback-runs.ts): what an actor would
 * do for them by itself — its backoff timer armed and cancelled, events that arrive while a step's
 * actions run taken after them, nothing kept once a run is over — checked against rules written out here.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createActor, fromCallback } from 'xstate';
import { createFallbackRuns, type RunObserver } from '../../src/actors/fallback-runs.js';
import type { FallbackEmitted, FallbackOutput } from '../../src/machines/fallback.machine.js';
import type { ProviderReply, ProviderRequestEvent } from '../../src/machines/provider.machine.js';
import { Secret } from '../../src/security/secret.js';
import { request } from './gateway-harness.js';

type CallRequested = Extract<ProviderRequestEvent, { type: 'call.requested' }>;

/** A stand-in provider actor: `answer` decides each call's reply (undefined: no reply yet). */
function provider(answer: (call: CallRequested) => ProviderReply | undefined) {
  const calls: CallRequested[] = [];
  const ref = createActor(
    fromCallback<ProviderRequestEvent>(({ receive }) => {
      receive((event) => {
        if (event.type !== 'call.requested') return;
        calls.push(event);
        const reply = answer(event);
        if (reply !== undefined) event.replyTo.send(reply);
      });
    }),
  ).start();
  return { ref, calls };
}

const serverError = (call: CallRequested): ProviderReply => ({
  type: 'provider.failed',
  callId: call.callId,
  providerId: 'claude',
  failure: { errorClass: 'server_error', message: 'down' },
  countedByBreaker: true,
  durationMs: 1,
  at: call.at,
});
const answered = (call: CallRequested): ProviderReply => ({
  type: 'provider.succeeded',
  callId: call.callId,
  providerId: 'claude',
  answer: { text: 'ok', model: 'm', truncated: false, usage: { inputTokens: 1, outputTokens: 2 } },
  verdict: { ok: true, value: 'ok' },
  durationMs: 1,
  at: call.at,
});

function observer() {
  const emitted: FallbackEmitted[] = [];
  const outputs: FallbackOutput[] = [];
  const errors: Error[] = [];
  const watch: RunObserver = {
    emitted: (event) => emitted.push(event),
    done: (output) => outputs.push(output),
    error: (error) => errors.push(error),
  };
  return { watch, emitted, outputs, errors };
}

function inputFor(ref: ReturnType<typeof provider>['ref']) {
  return {
    runId: 'run',
    links: [
      {
        provider: 'claude' as const,
        model: 'm',
        apiKey: new Secret('test-claude-key-runs'),
        keyId: 'k',
        ref,
      },
    ],
    request,
    validate: () => ({ ok: true as const, value: 'ok' }),
    policy: 'retry-then-fallback' as const,
    retryMax: 2,
    backoffMs: [1000, 2000],
    startedAt: 0,
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('fallback runs stepped without an actor per run', () => {
  it('retries after each backoff (1000 then 2000 ms) and keeps no run and no timer once it ends', async () => {
    vi.useFakeTimers();
    const runs = createFallbackRuns();
    let failures = 2;
    // Synchronous replies: each arrives while the step that sent the request still runs its actions.
    const claude = provider((call) => (failures-- > 0 ? serverError(call) : answered(call)));
    const seen = observer();
    runs.create(inputFor(claude.ref), seen.watch).start();
    expect(claude.calls).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(999);
    expect(claude.calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(claude.calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1999);
    expect(claude.calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(claude.calls).toHaveLength(3);
    expect(seen.errors).toEqual([]);
    expect(seen.outputs).toHaveLength(1);
    expect(seen.outputs[0]?.status).toBe('succeeded');
    expect(seen.outputs[0]?.attempts.map((a) => [a.outcome, a.retry])).toEqual([
      ['failed', 0],
      ['failed', 1],
      ['succeeded', 2],
    ]);
    // Each attempt announced as it happened.
    expect(seen.emitted.filter((e) => e.type === 'attempt.recorded')).toHaveLength(3);
    expect(runs.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    runs.stop();
  });

  it('an abort during the backoff ends the run aborted and clears its timer', () => {
    vi.useFakeTimers();
    const runs = createFallbackRuns();
    const claude = provider(serverError);
    const seen = observer();
    const run = runs.create(inputFor(claude.ref), seen.watch);
    run.start();
    expect(vi.getTimerCount()).toBe(1);
    run.send({ type: 'request.aborted', at: 5 });
    expect(seen.outputs.map((o) => o.status)).toEqual(['aborted']);
    expect(vi.getTimerCount()).toBe(0);
    expect(runs.size).toBe(0);
    runs.stop();
  });

  it('a reply that comes after the run ended reaches no run and changes nothing', () => {
    const runs = createFallbackRuns();
    const claude = provider(() => undefined);
    const seen = observer();
    const run = runs.create(inputFor(claude.ref), seen.watch);
    run.start();
    expect(runs.size).toBe(1);
    run.send({ type: 'request.aborted', at: 5 });
    const call = claude.calls[0];
    if (call === undefined) throw new Error('no call went out');
    call.replyTo.send(answered(call));
    expect(seen.outputs.map((o) => o.status)).toEqual(['aborted']);
    expect(seen.errors).toEqual([]);
    expect(runs.size).toBe(0);
    runs.stop();
  });
});
