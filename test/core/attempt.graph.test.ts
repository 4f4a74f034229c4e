/**
 * One call's whole path (src/machines/attempt.machine.ts): over every edge of its graph, then as the
 * real actor it is in production — spawned by its provider actor, asking the provider's real key book
 * and breaker, its `upstream` the gateway's (src/actors/upstream.ts) over a hand-driven adapter, its
 * three clocks on a SimulatedClock. The oracle is written out here: the key is asked first, then the
 * breaker (then, shared and recovering, the fleet's probe lease); from `calling`, the first of the
 * answer, the failure, a clock (the overall deadline, the first token's, a stream's idle one) or the
 * cancel ends the call; a failure waits for the breaker's word on whether it still admits; the caller
 * hears one reply and nothing after it (docs/errors.md: a timeout counts, a cancel is `aborted` and
 * counts nowhere).
 */
import { describe, expect, it } from 'vitest';
import { createActor, fromCallback, getNextTransitions, SimulatedClock, transition, type AnyActorRef } from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import { createUpstreamLogic } from '../../src/actors/upstream.js';
import {
  attemptMachine,
  type AttemptEvent,
  type AttemptInput,
  type ProviderReply,
} from '../../src/machines/attempt.machine.js';
import type { CallRequest } from '../../src/machines/call-request.js';
import { providerMachine } from '../../src/machines/provider.machine.js';
import type { CallRecord, ProviderAnswer, UpstreamStreamObserver } from '../../src/machines/types.js';
import type { ProviderAdapter } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { eventsFrom } from './graph-events.js';
import { request } from './gateway-harness.js';

const answer: ProviderAnswer = { text: '{}', model: 'claude-model', usage: { inputTokens: 1, outputTokens: 2 }, truncated: false };
const apiKey = new Secret('test-claude-key-attempt');
const sink: AnyActorRef = createActor(fromCallback(() => undefined));
const t0 = 1_800_000_000_000;
const timings = { deadlineMs: 1000, firstTokenTimeoutMs: 400, streamIdleTimeoutMs: 100 };

function callOf(overrides: Partial<CallRequest> = {}): CallRequest {
  return {
    callId: 'c1',
    replyTo: sink,
    keyId: 'key-1',
    request,
    apiKey,
    validate: () => ({ ok: true, value: 1 }),
    at: t0,
    ...overrides,
  };
}

function inputOf(): AttemptInput {
  return { providerId: 'claude', owner: sink, call: callOf(), timings, keyBook: sink, breaker: sink, fleetLink: sink };
}

const after = {
  deadline: 'xstate.after.deadline.attempt.calling',
  firstToken: 'xstate.after.firstTokenTimeout.attempt.calling.awaitingFirstToken',
  idle: 'xstate.after.streamIdleTimeout.attempt.calling.streaming',
  withdrawing: 'xstate.after.deadline.attempt.withdrawingProbe',
};
const doneEvent = 'xstate.done.actor.upstream';
const errorEvent = 'xstate.error.actor.upstream';

function payloadsFor(type: string): AttemptEvent[] {
  const call = callOf();
  switch (type) {
    case 'key.admitted':
      return [{ type, call }];
    case 'key.refused':
      return [{ type, call, reason: 'key_quarantined', errorClass: 'auth', until: t0 + 60_000 }];
    case 'breaker.admitted':
    case 'breaker.leaseNeeded':
      return [{ type, call }];
    case 'breaker.rejected':
      return [{ type, call, retryAt: t0 + 30_000 }];
    case 'probe.leased':
      return [
        { type, callId: 'c1', granted: true, at: t0 + 5 },
        { type, callId: 'c1', granted: false, probeEndsBy: t0 + 900, at: t0 + 5 },
      ];
    case 'breaker.admitting':
    case 'breaker.refusing':
      return [{ type }];
    case 'upstream.delta':
      return [{ type, text: 'two pieces', pieces: 2, at: t0 + 10 }];
    case 'call.cancelled':
      return [{ type, at: t0 + 10 }];
    case doneEvent:
      return [{ type, output: { answer, at: t0 + 10 } } as unknown as AttemptEvent];
    case errorEvent:
      return [{ type, error: new Error('boom') } as unknown as AttemptEvent];
    default:
      return type.startsWith('xstate.after.') ? [{ type } as unknown as AttemptEvent] : [];
  }
}

type Step = { readonly to: string; readonly does: readonly string[] };
const ending: Record<string, Step> = {
  [doneEvent]: { to: 'done', does: ['reportAnswer'] },
  [errorEvent]: { to: 'reporting', does: ['reportFailure'] },
  'call.cancelled': { to: 'aborted', does: ['reportCancelled'] },
  [after.deadline]: { to: 'reporting', does: ['reportFailure'] },
};
/**
 * The path written out: from each state, each event's next state and what is done (`send:` a message
 * to the key book, the breaker or the fleet link; the replies are named actions).
 */
const pathOracle: Record<string, Record<string, Step>> = {
  checkingKey: {
    'key.admitted': { to: 'admitting', does: ['send:breaker.admit'] },
    'key.refused': { to: 'skipped', does: ['replySkipped'] },
    'call.cancelled': { to: 'withdrawn', does: ['endWithdrawn'] },
  },
  admitting: {
    'breaker.admitted': { to: 'calling.awaitingFirstToken', does: ['send:key.called'] },
    'breaker.rejected': { to: 'rejected', does: ['replyRejected'] },
    'breaker.leaseNeeded': { to: 'awaitingProbeLease', does: ['send:probe.requested'] },
    'call.cancelled': { to: 'withdrawn', does: ['endWithdrawn'] },
  },
  awaitingProbeLease: {
    'probe.leased:granted': { to: 'admitting', does: ['send:breaker.admit'] },
    'probe.leased:refused': { to: 'rejected', does: ['replyRejected'] },
    'call.cancelled': { to: 'withdrawingProbe', does: [] },
  },
  withdrawingProbe: {
    'probe.leased:granted': { to: 'withdrawn', does: ['send:fleet.report', 'endWithdrawn'] },
    'probe.leased:refused': { to: 'withdrawn', does: ['endWithdrawn'] },
    [after.withdrawing]: { to: 'withdrawn', does: ['endWithdrawn'] },
  },
  'calling.awaitingFirstToken': {
    'upstream.delta': { to: 'calling.streaming', does: ['relayDelta'] },
    ...ending,
    [after.firstToken]: { to: 'reporting', does: ['reportFailure'] },
  },
  'calling.streaming': {
    'upstream.delta': { to: 'calling.streaming', does: ['relayDelta'] },
    ...ending,
    [after.idle]: { to: 'reporting', does: ['reportFailure'] },
  },
  reporting: {
    'breaker.admitting': { to: 'failed', does: ['replyFailed'] },
    'breaker.refusing': { to: 'failed', does: ['replyFailed'] },
  },
};
const stateName = (value: unknown): string =>
  typeof value === 'string' ? value : `calling.${String(Object.values(value as object)[0])}`;
const eventName = (event: AttemptEvent): string =>
  event.type === 'probe.leased' ? `probe.leased:${event.granted ? 'granted' : 'refused'}` : event.type;
/** The machine's own actions by name, and each message sent by its type (XState's assigns, timers and invokes are its bookkeeping). */
function does(actions: readonly { type: string; params?: unknown }[]): string[] {
  return actions.flatMap((action) => {
    if (action.type === 'xstate.sendTo') {
      const sent = (action.params as { event?: { type?: string } } | undefined)?.event?.type;
      return [`send:${sent ?? '?'}`];
    }
    return action.type.startsWith('xstate.') ? [] : [action.type];
  });
}

/**
 * The graph is walked without a parent, so the reports (which end in `sendParent`) are named no-ops
 * here: the oracle checks which report each edge runs, by name.
 */
const walked = attemptMachine.provide({
  actions: {
    reportAnswer: () => undefined,
    reportFailure: () => undefined,
    reportCancelled: () => undefined,
    replyFailed: () => undefined,
    replyRejected: () => undefined,
    replySkipped: () => undefined,
    endWithdrawn: () => undefined,
  },
});

describe('attempt machine, over every edge of its graph', () => {
  const adjacency = getAdjacencyMap(walked, {
    events: (snapshot) => eventsFrom(snapshot, payloadsFor),
    input: inputOf(),
    serializeState: (snapshot) =>
      `${JSON.stringify(snapshot.value)}|${snapshot.context.chunks > 1 ? 'n' : snapshot.context.chunks}|${snapshot.context.leased}`,
  });
  const edges = adjacencyMapToArray(adjacency);

  it('walks a call through key, breaker, lease, upstream and report, each step a state, each edge as written', () => {
    const seen = new Set<string>();
    for (const { state, event, nextState } of edges) {
      const from = stateName(state.value);
      const expected = pathOracle[from]?.[eventName(event)];
      expect(expected, `${from} ${eventName(event)}`).toBeDefined();
      const [, actions] = transition(walked, state, event);
      expect(does(actions), `${from} ${eventName(event)}`).toEqual(expected?.does);
      expect(stateName(nextState.value)).toBe(expected?.to);
      seen.add(`${from} ${eventName(event)}`);
      if (['done', 'failed', 'rejected', 'skipped', 'aborted', 'withdrawn'].includes(stateName(nextState.value))) {
        // Over: nothing moves it any more (its provider stops it), and it is not final (no done event).
        expect(nextState.hasTag('over')).toBe(true);
        expect(nextState.status).toBe('active');
        expect(getNextTransitions(nextState)).toEqual([]);
      }
      // Each piece is counted, two in this delta (the first one with its time: 10 ms after the start).
      if (event.type === 'upstream.delta') {
        expect(nextState.context.chunks).toBe(state.context.chunks + 2);
        expect(nextState.context.firstTokenMs).toBe(10);
      }
      // The breaker is asked again after a granted lease, as a leased probe; a withdrawn call frees it
      // as an aborted call, which no breaker counts.
      if (eventName(event) === 'probe.leased:granted') {
        const sent = actions.find((action) => action.type === 'xstate.sendTo');
        const message = (sent?.params as unknown as { event: { type: string; leased?: boolean; event?: { type: string; errorClass: string } } }).event;
        if (from === 'withdrawingProbe') expect(message.event).toMatchObject({ type: 'call.ignored', errorClass: 'aborted' });
        else expect(message.leased).toBe(true);
      }
    }
    // Every state's every event, as written: nothing in the oracle left unwalked.
    const written = Object.entries(pathOracle).flatMap(([from, byEvent]) => Object.keys(byEvent).map((e) => `${from} ${e}`));
    expect([...seen].sort()).toEqual(written.sort());
  });

  it('tells the caller, with the failure, what the breaker answered about the next call', () => {
    const reporting = edges.find(({ nextState }) => nextState.matches('reporting'))?.nextState;
    expect(reporting).toBeDefined();
    if (reporting === undefined) return;
    for (const [type, refusing] of [['breaker.admitting', false], ['breaker.refusing', true]] as const) {
      const [, actions] = transition(walked, reporting, { type });
      expect(actions.find((action) => action.type === 'replyFailed')?.params).toEqual({ breakerRefusing: refusing });
    }
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
/** One turn of the event loop: the pieces read in the last one reach the attempt. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('an attempt as the actor it is in production (a child of its provider, on the actor clock)', () => {
  function start(overrides: Partial<CallRequest> = {}, settings: { timings?: typeof timings; threshold?: number } = {}) {
    const clock = new SimulatedClock();
    clock.set(t0);
    const upstream = handUpstream();
    const adapters = { claude: upstream.adapter, gpt: upstream.adapter, timelygpt: upstream.adapter };
    const reported: ProviderReply[] = [];
    const records: CallRecord[] = [];
    const caller: AnyActorRef = createActor(
      fromCallback<ProviderReply>(({ receive }) => receive((reply) => void reported.push(reply))),
    ).start();
    const machine = providerMachine.provide({
      actors: { attempt: attemptMachine.provide({ actors: { upstream: createUpstreamLogic(adapters, () => clock.now()) } }) },
    });
    const provider = createActor(machine, {
      clock,
      input: {
        providerId: 'claude',
        model: 'claude-model',
        threshold: settings.threshold ?? 5,
        recoveryMs: 60_000,
        timings: settings.timings ?? timings,
      },
    }).start();
    provider.on('call.finished', ({ record }) => void records.push(record));
    provider.send({ type: 'call.requested', ...callOf({ replyTo: caller, ...overrides }) });
    const call = upstream.calls[0];
    if (call === undefined) throw new Error('no upstream call started');
    const child = provider.getSnapshot().children['c1'] as AnyActorRef;
    return { clock, reported, records, call, child, provider };
  }

  it('reports an answer before its clocks once, with its verdict; the clocks then do nothing', async () => {
    const { clock, reported, call } = start();
    clock.increment(40);
    call.resolve(answer);
    await settle();
    clock.increment(5000);
    expect(reported).toEqual([
      {
        type: 'provider.succeeded',
        callId: 'c1',
        providerId: 'claude',
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
    const { clock, reported, call } = start({}, { timings: { ...timings, firstTokenTimeoutMs: 5000 } });
    clock.increment(999);
    expect(reported).toEqual([]);
    clock.increment(1);
    expect(call.signal.aborted).toBe(true);
    await settle();
    expect(reported).toEqual([
      expect.objectContaining({
        type: 'provider.failed',
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
        type: 'provider.failed',
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
        type: 'provider.failed',
        failure: { errorClass: 'timeout', message: "The provider's answer stalled for 100 ms." },
        streamed: { chunks: 3, firstTokenMs: 50 },
        at: t0 + 50 + 90 + 90 + 100,
      }),
    ]);
  });

  it('a stall after the first piece is timed from that piece, and the failure carries the text so far', async () => {
    const { clock, reported, call } = start();
    clock.increment(30);
    call.observer?.onDelta('Photo');
    await nextTurn();
    clock.increment(20);
    call.observer?.onDelta('synthesis');
    await nextTurn();
    clock.increment(100);
    expect(reported).toEqual([
      expect.objectContaining({
        type: 'provider.failed',
        failure: { errorClass: 'timeout', message: "The provider's answer stalled for 100 ms." },
        partialText: 'Photosynthesis',
        at: t0 + 30 + 20 + 100,
      }),
    ]);
    const single = start();
    single.clock.increment(30);
    single.call.observer?.onDelta('P');
    await nextTurn();
    single.clock.increment(100);
    expect(single.reported).toEqual([expect.objectContaining({ partialText: 'P', at: t0 + 30 + 100 })]);
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
    expect(reported).toEqual([expect.objectContaining({ type: 'provider.succeeded', streamed: { chunks: 2, firstTokenMs: 30 }, durationMs: 50 })]);
  });

  it('hands on the pieces read in one turn of the event loop as one delta, each piece still counted, before the answer', async () => {
    const deltas: string[] = [];
    const { clock, reported, call, child } = start({ onDelta: (provider, text) => deltas.push(`${provider}:${text}`) });
    clock.increment(30);
    for (const text of ['x', 'y', 'z']) call.observer?.onDelta(text);
    // Nothing reaches the call within the turn that read the pieces …
    expect(deltas).toEqual([]);
    expect((child.getSnapshot() as { value: unknown }).value).toEqual({ calling: 'awaitingFirstToken' });
    await nextTurn();
    // … then all three at once: one message, three pieces.
    expect(deltas).toEqual(['claude:xyz']);
    expect((child.getSnapshot() as { value: unknown }).value).toEqual({ calling: 'streaming' });
    call.observer?.onDelta('!');
    // The answer right after a piece: the piece is handed on first.
    call.resolve(answer);
    await settle();
    expect(deltas).toEqual(['claude:xyz', 'claude:!']);
    expect(reported).toEqual([expect.objectContaining({ type: 'provider.succeeded', streamed: { chunks: 4, firstTokenMs: 30 } })]);
  });

  it('records a cancel in flight as aborted (counted nowhere), aborts the call, answers no one gone; a late answer and the clocks add nothing', async () => {
    const { clock, reported, records, call, provider } = start();
    provider.send({ type: 'call.cancelled', callId: 'c1', at: t0 + 250 });
    expect(call.signal.aborted).toBe(true);
    call.resolve(answer);
    await settle();
    clock.increment(5000);
    expect(reported).toEqual([]);
    expect(records).toEqual([{ provider: 'claude', outcome: 'aborted', errorClass: 'aborted', durationMs: 250 }]);
    expect(provider.getSnapshot().context.breaker.getSnapshot().context.consecutiveFailures).toBe(0);
    expect(provider.getSnapshot().children['c1']).toBeUndefined();
  });

  it('ends once: the provider stops the attempt and counts its record', async () => {
    const { clock, records, call, provider } = start();
    clock.increment(40);
    call.resolve(answer);
    await settle();
    expect(records).toEqual([{ provider: 'claude', outcome: 'succeeded', durationMs: 40, usage: answer.usage }]);
    expect(provider.getSnapshot().children['c1']).toBeUndefined();
    expect(provider.getSnapshot().context.stats).toMatchObject({ calls: 1, successes: 1, failures: 0, ignored: 0 });
  });

  it('tells the caller, with a failure that opened the breaker, that the breaker now refuses', async () => {
    const { reported, call } = start({}, { threshold: 1 });
    call.reject(new Error('down'));
    await settle();
    expect(reported).toEqual([expect.objectContaining({ type: 'provider.failed', countedByBreaker: true, breakerRefusing: true })]);
  });

  it('says nothing of a refusal when the breaker still admits after the failure', async () => {
    const { reported, call } = start({}, { threshold: 2 });
    call.reject(new Error('down'));
    await settle();
    expect(reported).toEqual([expect.objectContaining({ type: 'provider.failed', countedByBreaker: true })]);
    expect(reported[0]).not.toHaveProperty('breakerRefusing');
  });

  it('reads a classifier that throws as a provider-side server_error (the provider actor must not crash)', async () => {
    const { reported, call } = start();
    call.reject(new Error('classifier bug'));
    await settle();
    expect(reported).toEqual([
      expect.objectContaining({
        type: 'provider.failed',
        failure: { errorClass: 'server_error', message: 'The provider failed in a way that could not be classified.' },
      }),
    ]);
    expect(call.signal.aborted).toBe(false);
  });
});
