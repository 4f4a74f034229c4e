/**
 * A call's life (src/machines/call.machine.ts): over every edge of its graph, then as the real actor it
 * is in production — spawned by a parent, its `upstream` the gateway's (src/actors/upstream.ts) over a
 * hand-driven adapter, its three clocks on a SimulatedClock. The oracle is written out here: from
 * `calling`, the first of the answer, the failure, a clock (the overall deadline, the first token's, a
 * stream's idle one) or the cancel ends the call, is reported once, and nothing after it is reported
 * (docs/errors.md: a timeout counts, a cancel is `aborted` and counts nowhere).
 */
import { describe, expect, it } from 'vitest';
import { createActor, fromCallback, setup, SimulatedClock, spawnChild, transition, type AnyActorRef } from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import { createUpstreamLogic } from '../../src/actors/upstream.js';
import {
  callMachine,
  type CallEvent,
  type CallInput,
  type UpstreamEvent,
} from '../../src/machines/call.machine.js';
import type { ProviderAdapter, ProviderAnswer, UpstreamStreamObserver } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { eventsFrom } from './graph-events.js';
import { request } from './gateway-harness.js';

const answer: ProviderAnswer = { text: '{}', model: 'claude-model', usage: { inputTokens: 1, outputTokens: 2 }, truncated: false };
const apiKey = new Secret('test-claude-key-call');
const sink: AnyActorRef = createActor(fromCallback(() => undefined));
const t0 = 1_800_000_000_000;
const timings = { deadlineMs: 1000, firstTokenTimeoutMs: 400, streamIdleTimeoutMs: 100 };

function inputOf(overrides: Partial<CallInput> = {}): CallInput {
  return {
    providerId: 'claude',
    callId: 'c1',
    replyTo: sink,
    keyId: 'key-1',
    request,
    apiKey,
    validate: () => ({ ok: true, value: 1 }),
    startedAt: t0,
    timings,
    ...overrides,
  };
}

const after = {
  deadline: 'xstate.after.deadline.call.calling',
  firstToken: 'xstate.after.firstTokenTimeout.call.calling.waitingFirstToken',
  idle: 'xstate.after.streamIdleTimeout.call.calling.streaming',
};
const doneEvent = 'xstate.done.actor.upstream';
const errorEvent = 'xstate.error.actor.upstream';

function payloadsFor(type: string): CallEvent[] {
  switch (type) {
    case 'upstream.delta':
      return [{ type, text: 'two pieces', pieces: 2, at: t0 + 10 }];
    case 'call.cancelled':
      return [{ type, at: t0 + 10 }];
    case doneEvent:
      return [{ type, output: { answer, at: t0 + 10 } } as unknown as CallEvent];
    case errorEvent:
      return [{ type, error: new Error('boom') } as unknown as CallEvent];
    default:
      return type.startsWith('xstate.after.') ? [{ type } as unknown as CallEvent] : [];
  }
}

/** The call's life written out: from each phase of `calling`, each event's end state and what is done. */
const lifeOracle: Record<string, Record<string, { readonly to: string; readonly does: readonly string[] }>> = {
  waitingFirstToken: {
    'upstream.delta': { to: 'calling.streaming', does: ['relayDelta'] },
    [doneEvent]: { to: 'answered', does: ['reportAnswer'] },
    [errorEvent]: { to: 'failed', does: ['reportFailure'] },
    'call.cancelled': { to: 'aborted', does: ['reportCancelled'] },
    [after.deadline]: { to: 'timedOut', does: ['reportFailure'] },
    [after.firstToken]: { to: 'timedOut', does: ['reportFailure'] },
  },
  streaming: {
    'upstream.delta': { to: 'calling.streaming', does: ['relayDelta'] },
    [doneEvent]: { to: 'answered', does: ['reportAnswer'] },
    [errorEvent]: { to: 'failed', does: ['reportFailure'] },
    'call.cancelled': { to: 'aborted', does: ['reportCancelled'] },
    [after.deadline]: { to: 'timedOut', does: ['reportFailure'] },
    [after.idle]: { to: 'timedOut', does: ['reportFailure'] },
  },
};
const stateName = (value: unknown): string =>
  typeof value === 'string' ? value : `calling.${String(Object.values(value as object)[0])}`;
/** The machine's own named actions (XState's assigns, timers and invoke stops are its bookkeeping). */
const own = (type: string) => !type.startsWith('xstate.');

/**
 * The graph is walked without a parent, so the reports (`sendParent` in production) are named no-ops
 * here: the oracle checks which report each edge runs, by name.
 */
const walked = callMachine.provide({
  actions: { reportAnswer: () => undefined, reportFailure: () => undefined, reportCancelled: () => undefined },
});

describe('call machine, over every edge of its graph', () => {
  const adjacency = getAdjacencyMap(walked, {
    events: (snapshot) => eventsFrom(snapshot, payloadsFor),
    input: inputOf(),
    serializeState: (snapshot) => `${JSON.stringify(snapshot.value)}|${snapshot.context.chunks > 1 ? 'n' : snapshot.context.chunks}`,
  });
  const edges = adjacencyMapToArray(adjacency);

  it('ends a call on the first of its answer, failure, a clock or a cancel, and reports that one', () => {
    expect(edges.length).toBeGreaterThanOrEqual(12);
    let checked = 0;
    for (const { state, event, nextState } of edges) {
      const phase = stateName(state.value).replace('calling.', '');
      const expected = lifeOracle[phase]?.[event.type];
      expect(expected, `${phase} ${event.type}`).toBeDefined();
      const [, actions] = transition(walked, state, event);
      expect(actions.map((action) => action.type).filter(own)).toEqual(expected?.does);
      expect(stateName(nextState.value)).toBe(expected?.to);
      if (!expected?.to.startsWith('calling')) {
        // Over: nothing moves it any more (its provider stops it), and it is not final (no done event).
        expect(nextState.hasTag('over')).toBe(true);
        expect(nextState.status).toBe('active');
      }
      // Each piece is counted, two in this delta (the first one with its time: 10 ms after the start).
      if (event.type === 'upstream.delta') {
        expect(nextState.context.chunks).toBe(state.context.chunks + 2);
        expect(nextState.context.firstTokenMs).toBe(10);
      }
      checked += 1;
    }
    // Both phases, every event each takes.
    expect(checked).toBeGreaterThanOrEqual(
      Object.keys(lifeOracle.waitingFirstToken ?? {}).length + Object.keys(lifeOracle.streaming ?? {}).length,
    );
  });
});

/** An adapter driven by hand: each call waits until the test answers, streams, fails it, or it is aborted. */
function handUpstream() {
  const calls: {
    resolve: (answer: ProviderAnswer) => void;
    reject: (error: unknown) => void;
    signal: AbortSignal;
    observer: UpstreamStreamObserver | undefined;
  }[] = [];
  const adapter: ProviderAdapter = {
    id: 'claude',
    model: 'claude-model',
    generate: (_request, _key, signal, observer) =>
      new Promise<ProviderAnswer>((resolve, reject) => {
        calls.push({ resolve, reject, signal, observer });
        signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')), { once: true });
      }),
    classify: (error) => {
      if (error instanceof Error && error.message === 'classifier bug') throw error;
      return { errorClass: 'server_error', message: `classified ${String(error)}` };
    },
  };
  return { adapter, calls };
}

const settle = async () => {
  for (let i = 0; i < 5; i += 1) await Promise.resolve();
};
/** One turn of the event loop: the pieces read in the last one reach the call actor. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('a call as the actor it is in production (a child of its parent, on the actor clock)', () => {
  function start(overrides: Partial<CallInput> = {}) {
    const clock = new SimulatedClock();
    clock.set(t0);
    const upstream = handUpstream();
    const adapters = { claude: upstream.adapter, gpt: upstream.adapter, timelygpt: upstream.adapter };
    const reported: UpstreamEvent[] = [];
    const parent = setup({
      actors: { call: callMachine.provide({ actors: { upstream: createUpstreamLogic(adapters, () => clock.now()) } }) },
    }).createMachine({
      entry: spawnChild('call', { id: 'c1', input: inputOf(overrides) }),
      on: {
        'upstream.succeeded': { actions: ({ event }) => void reported.push(event as UpstreamEvent) },
        'upstream.failed': { actions: ({ event }) => void reported.push(event as UpstreamEvent) },
        'upstream.cancelled': { actions: ({ event }) => void reported.push(event as UpstreamEvent) },
      },
    });
    const actor = createActor(parent, { clock }).start();
    const call = upstream.calls[0];
    if (call === undefined) throw new Error('no upstream call started');
    const child = actor.getSnapshot().children['c1'] as AnyActorRef;
    return { clock, reported, call, child };
  }

  it('reports an answer before its clocks once, with its verdict; the clocks then do nothing', async () => {
    const { clock, reported, call } = start();
    clock.increment(40);
    call.resolve(answer);
    await settle();
    clock.increment(5000);
    expect(reported).toEqual([
      {
        type: 'upstream.succeeded',
        callId: 'c1',
        replyTo: sink,
        keyId: 'key-1',
        origin: undefined,
        answer,
        verdict: { ok: true, value: 1 },
        durationMs: 40,
        streamed: null,
        at: t0 + 40,
      },
    ]);
    expect(call.signal.aborted).toBe(false);
  });

  it('reports the deadline as a timeout (counted) at start + PROVIDER_TIMEOUT_MS, aborts the SDK call through the signal, and drops its rejection', async () => {
    const { clock, reported, call } = start({ timings: { ...timings, firstTokenTimeoutMs: 5000 } });
    clock.increment(999);
    expect(reported).toEqual([]);
    clock.increment(1);
    expect(call.signal.aborted).toBe(true);
    await settle();
    expect(reported).toEqual([
      expect.objectContaining({
        type: 'upstream.failed',
        failure: { errorClass: 'timeout', message: 'The provider did not answer within 1000 ms.' },
        durationMs: 1000,
        at: t0 + 1000,
      }),
    ]);
  });

  it('times out a call with no first token after FIRST_TOKEN_TIMEOUT_MS', async () => {
    const { clock, reported, call } = start();
    clock.increment(399);
    expect(reported).toEqual([]);
    clock.increment(1);
    expect(call.signal.aborted).toBe(true);
    expect(reported).toEqual([
      expect.objectContaining({
        type: 'upstream.failed',
        failure: { errorClass: 'timeout', message: 'The provider sent nothing within 400 ms.' },
        durationMs: 400,
      }),
    ]);
  });

  it('streams: counts the pieces and the first token, hands each on, re-arms the idle clock per piece, and times out a stall', async () => {
    const deltas: string[] = [];
    const { clock, reported, call } = start({ onDelta: (provider, text) => deltas.push(`${provider}:${text}`) });
    clock.increment(50);
    call.observer?.onDelta('a');
    await nextTurn();
    // 3 pieces, 90 ms apart: each within the 100 ms idle clock, together past it.
    for (const text of ['b', 'c']) {
      clock.increment(90);
      call.observer?.onDelta(text);
      await nextTurn();
    }
    clock.increment(99);
    expect(reported).toEqual([]);
    clock.increment(1);
    expect(call.signal.aborted).toBe(true);
    expect(deltas).toEqual(['claude:a', 'claude:b', 'claude:c']);
    expect(reported).toEqual([
      expect.objectContaining({
        type: 'upstream.failed',
        failure: { errorClass: 'timeout', message: "The provider's answer stalled for 100 ms." },
        streamed: { chunks: 3, firstTokenMs: 50 },
        at: t0 + 50 + 90 + 90 + 100,
      }),
    ]);
  });

  it('reports a streamed answer with its pieces counted', async () => {
    const { clock, reported, call } = start();
    clock.increment(30);
    call.observer?.onDelta('x');
    await nextTurn();
    clock.increment(20);
    call.observer?.onDelta('y');
    call.resolve(answer);
    await settle();
    expect(reported).toEqual([expect.objectContaining({ type: 'upstream.succeeded', streamed: { chunks: 2, firstTokenMs: 30 }, durationMs: 50 })]);
  });

  it('hands on the pieces read in one turn of the event loop as one delta, each piece still counted, before the answer', async () => {
    const deltas: string[] = [];
    const { clock, reported, call, child } = start({ onDelta: (provider, text) => deltas.push(`${provider}:${text}`) });
    clock.increment(30);
    for (const text of ['x', 'y', 'z']) call.observer?.onDelta(text);
    // Nothing reaches the call within the turn that read the pieces …
    expect(deltas).toEqual([]);
    expect((child.getSnapshot() as { value: unknown }).value).toEqual({ calling: 'waitingFirstToken' });
    await nextTurn();
    // … then all three at once: one message, three pieces.
    expect(deltas).toEqual(['claude:xyz']);
    expect((child.getSnapshot() as { value: unknown }).value).toEqual({ calling: 'streaming' });
    call.observer?.onDelta('!');
    // The answer right after a piece: the piece is handed on first.
    call.resolve(answer);
    await settle();
    expect(deltas).toEqual(['claude:xyz', 'claude:!']);
    expect(reported).toEqual([expect.objectContaining({ type: 'upstream.succeeded', streamed: { chunks: 4, firstTokenMs: 30 } })]);
  });

  it('reports a cancel in flight as cancelled (aborted, counted nowhere), aborts the call; a late answer and the clocks add nothing', async () => {
    const { clock, reported, call, child } = start();
    child.send({ type: 'call.cancelled', at: t0 + 250 });
    expect(call.signal.aborted).toBe(true);
    call.resolve(answer);
    await settle();
    clock.increment(5000);
    expect(reported).toEqual([
      { type: 'upstream.cancelled', callId: 'c1', replyTo: sink, keyId: 'key-1', origin: undefined, durationMs: 250, at: t0 + 250 },
    ]);
  });

  it('reads a classifier that throws as a provider-side server_error (the provider actor must not crash)', async () => {
    const { reported, call } = start();
    call.reject(new Error('classifier bug'));
    await settle();
    expect(reported).toEqual([
      expect.objectContaining({
        type: 'upstream.failed',
        failure: { errorClass: 'server_error', message: 'The provider failed in a way that could not be classified.' },
      }),
    ]);
    expect(call.signal.aborted).toBe(false);
  });
});
