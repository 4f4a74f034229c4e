/**
 * A call's life (src/machines/call.machine.ts): over every edge of its graph, then through the runtime
 * that steps it (src/actors/call-upstream.ts) with fake timers and a hand-driven upstream. The oracle is
 * written out here: from `inFlight`, the first of the answer, the failure, the deadline or the cancel
 * ends the call, is reported once, and nothing after it is reported (docs/errors.md: a timeout counts, a
 * cancel is `aborted` and counts nowhere).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor, fromCallback, setup, transition, type AnyActorRef } from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import { assertStepsReusable, createUpstreamCalls, type UpstreamEvent } from '../../src/actors/call-upstream.js';
import { callMachine, type CallEvent } from '../../src/machines/call.machine.js';
import type { ProviderAdapter, ProviderAnswer } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { eventsFrom } from './graph-events.js';
import { request } from './gateway-harness.js';

const deadlineEvent = 'xstate.after.deadline.call.inFlight';
const answer: ProviderAnswer = { text: '{}', model: 'claude-model', usage: { inputTokens: 1, outputTokens: 2 }, truncated: false };

function payloadsFor(type: string): CallEvent[] {
  switch (type) {
    case 'upstream.answered':
      return [{ type, answer, at: 10 }];
    case 'upstream.threw':
      return [{ type, error: new Error('boom'), at: 10 }];
    case 'call.cancelled':
      return [{ type, at: 10 }];
    case deadlineEvent:
      return [{ type } as unknown as CallEvent];
    default:
      return [];
  }
}

/** docs/errors.md and docs/errors.md "Resilience rules" as the call's life: from `inFlight`, each event's end state and what is done. */
const lifeOracle: Record<string, { readonly to: string; readonly does: readonly string[] }> = {
  'upstream.answered': { to: 'settled', does: ['reportAnswer'] },
  'upstream.threw': { to: 'settled', does: ['reportFailure'] },
  'call.cancelled': { to: 'cancelled', does: ['abortRequest', 'reportCancelled'] },
  [deadlineEvent]: { to: 'timedOut', does: ['abortRequest', 'reportTimeout'] },
};
const reports = new Set(['reportAnswer', 'reportFailure', 'reportTimeout', 'reportCancelled']);
const finals = ['settled', 'cancelled', 'timedOut'];

describe('call machine, over every edge of its graph', () => {
  const adjacency = getAdjacencyMap(callMachine, { events: (snapshot) => eventsFrom(snapshot, payloadsFor) });
  const edges = adjacencyMapToArray(adjacency);

  it('ends a call in flight on the first of its answer, failure, deadline or cancel, and reports that one', () => {
    expect(Object.keys(adjacency)).toHaveLength(4);
    expect(edges).toHaveLength(4);
    for (const { state, event, nextState } of edges) {
      expect(state.value).toBe('inFlight');
      const expected = lifeOracle[event.type];
      expect(expected, event.type).toBeDefined();
      const [, actions] = transition(callMachine, state, event);
      // `xstate.cancel` clears the deadline's timer as the call leaves `inFlight`.
      expect(actions.map((action): string => action.type).filter((type) => type !== 'xstate.cancel')).toEqual(expected?.does);
      expect(nextState.value).toBe(expected?.to);
      expect(nextState.status).toBe('done');
    }
  });

  it('reports nothing once ended: a late answer, a failure after our own abort, a second cancel meet a final state', () => {
    const ended = edges.map(({ nextState }) => nextState);
    expect(ended.map((snapshot) => snapshot.value).sort()).toEqual([...finals, 'settled'].sort());
    for (const snapshot of ended) {
      for (const type of Object.keys(lifeOracle)) {
        for (const event of payloadsFor(type)) {
          const [next, actions] = transition(callMachine, snapshot, event);
          expect(actions.filter((action) => reports.has(action.type))).toEqual([]);
          expect(next.value).toBe(snapshot.value);
        }
      }
    }
  });

  it('arms the named deadline when the call goes out (PROVIDER_TIMEOUT_MS, provided by the runtime)', () => {
    const machine = callMachine.provide({ delays: { deadline: 1234 } });
    const raised: unknown[] = [];
    const actor = createActor(machine, { inspect: (event) => void (event.type === '@xstate.action' && raised.push(event.action)) });
    actor.start();
    expect(raised).toContainEqual(expect.objectContaining({ type: 'xstate.raise', params: expect.objectContaining({ delay: 1234 }) }));
    actor.stop();
  });

  it('stays a machine whose steps the runtime may reuse: no context, no guard (a mutant with a guard is refused)', () => {
    expect(() => assertStepsReusable(callMachine)).not.toThrow();
    const guarded = setup({ guards: { isLate: () => true } }).createMachine({
      initial: 'inFlight',
      states: { inFlight: { on: { 'upstream.answered': { guard: 'isLate', target: 'settled' } } }, settled: {} },
    });
    expect(() => assertStepsReusable(guarded)).toThrow(/guarded/);
  });
});

/** An upstream driven by hand: each call waits until the test answers, fails it, or it is aborted. */
function handUpstream() {
  const calls: { resolve: (answer: ProviderAnswer) => void; reject: (error: unknown) => void; signal: AbortSignal }[] = [];
  const adapter: ProviderAdapter = {
    id: 'claude',
    model: 'claude-model',
    generate: (_request, _key, signal) =>
      new Promise<ProviderAnswer>((resolve, reject) => {
        calls.push({ resolve, reject, signal });
        signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')), { once: true });
      }),
    classify: (error) => {
      if (error instanceof Error && error.message === 'classifier bug') throw error;
      return { errorClass: 'server_error', message: `classified ${String(error)}` };
    },
  };
  return { adapter, calls };
}

const t0 = 1_800_000_000_000;
const apiKey = new Secret('test-claude-key-call');
const replyTo: AnyActorRef = createActor(fromCallback(() => undefined));

describe('the runtime steps each call by the machine', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(t0);
  });
  afterEach(() => vi.useRealTimers());

  function start(timeoutMs = 1000) {
    const upstream = handUpstream();
    const runtime = createUpstreamCalls({
      adapters: { claude: upstream.adapter, gpt: upstream.adapter, timelygpt: upstream.adapter },
      timeoutMs,
    });
    const reported: UpstreamEvent[] = [];
    runtime.start(
      { providerId: 'claude', callId: 'c1', replyTo, keyId: 'key-1', request, apiKey, validate: () => ({ ok: true, value: 1 }) },
      (event) => reported.push(event),
    );
    const call = upstream.calls[0];
    if (call === undefined) throw new Error('no upstream call started');
    return { runtime, reported, call };
  }

  it('reports an answer before the deadline once, with its verdict; the deadline then does nothing', async () => {
    const { runtime, reported, call } = start();
    vi.setSystemTime(t0 + 40);
    call.resolve(answer);
    await vi.advanceTimersByTimeAsync(5000);
    expect(reported).toEqual([
      { type: 'upstream.succeeded', callId: 'c1', replyTo, keyId: 'key-1', answer, verdict: { ok: true, value: 1 }, durationMs: 40, at: t0 + 40 },
    ]);
    expect(call.signal.aborted).toBe(false);
    expect(runtime.size).toBe(0);
  });

  it('reports the deadline as a timeout failure (counted, docs/errors.md) at start + PROVIDER_TIMEOUT_MS, aborts the call, and drops its rejection', async () => {
    const { runtime, reported, call } = start(1000);
    await vi.advanceTimersByTimeAsync(999);
    expect(reported).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(call.signal.aborted).toBe(true);
    await vi.advanceTimersByTimeAsync(10);
    expect(reported).toEqual([
      {
        type: 'upstream.failed',
        callId: 'c1',
        replyTo,
        keyId: 'key-1',
        failure: { errorClass: 'timeout', message: 'The provider did not answer within 1000 ms.' },
        durationMs: 1000,
        at: t0 + 1000,
      },
    ]);
    runtime.cancel('c1', t0 + 2000);
    expect(reported).toHaveLength(1);
    expect(runtime.size).toBe(0);
  });

  it('reports a cancel in flight as cancelled (aborted, counted nowhere), aborts the call; a late answer and the deadline add nothing', async () => {
    const { runtime, reported, call } = start(1000);
    runtime.cancel('c1', t0 + 250);
    expect(call.signal.aborted).toBe(true);
    call.resolve(answer);
    await vi.advanceTimersByTimeAsync(5000);
    expect(reported).toEqual([{ type: 'upstream.cancelled', callId: 'c1', replyTo, keyId: 'key-1', durationMs: 250, at: t0 + 250 }]);
    expect(runtime.size).toBe(0);
  });

  it('leaves a settled call alone when its caller cancels afterwards', async () => {
    const { runtime, reported, call } = start();
    call.reject(new Error('503'));
    await vi.advanceTimersByTimeAsync(0);
    runtime.cancel('c1', t0 + 5);
    expect(reported.map((event) => event.type)).toEqual(['upstream.failed']);
    expect(call.signal.aborted).toBe(false);
  });

  it('reads a classifier that throws as a provider-side server_error (the provider actor must not crash)', async () => {
    const { reported, call } = start();
    call.reject(new Error('classifier bug'));
    await vi.advanceTimersByTimeAsync(0);
    expect(reported).toEqual([
      expect.objectContaining({
        type: 'upstream.failed',
        failure: { errorClass: 'server_error', message: 'The provider failed in a way that could not be classified.' },
      }),
    ]);
  });
});
