/**
 * Model-based test of a call's path in the running actor system. The model is attempt.model.ts (the
 * attempt machine with its clocks and its upstream's end made explicit events); every path of its edge
 * cover is one call made through the gateway facade (`createGateway`, the object the HTTP layer talks
 * to) on a fresh system with a `SimulatedClock` and a hand-driven adapter: the executors make the
 * system see each event (a key refused by an earlier 401, a breaker forced open, a piece of the stream,
 * the answer, a failure, time passing, the caller going away), and the real attempt's states, read by
 * the inspector, must be the model's path state for state. Each end is also checked from outside: the
 * run's outcome and attempt, and the breaker's state (a failure that opens it is the one the breaker
 * answered `breaker.refusing` to).
 */
import { describe, expect, it } from 'vitest';
import { getNextTransitions, SimulatedClock, type AnyActorRef, type InspectionEvent } from 'xstate';
import { createGateway } from '../../src/actors/gateway.js';
import type { Gateway, GenerateOutcome } from '../../src/actors/types.js';
import { attemptMachine } from '../../src/machines/attempt.machine.js';
import type { ProviderAdapter, ProviderAnswer, UpstreamStreamObserver } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { request } from '../core/gateway-harness.js';
import { attemptModel, type AttemptModelEvent } from './attempt.model.js';
import { statePaths, transitionLines } from './machine-edges.js';
import { edgeCover, expectComplete } from './walk.js';

/** The production lines the model leaves out, and why; the upstream's end read as the model names it. */
const leftOut = {
  /** A single instance without Redis never needs the fleet's probe lease. */
  fleet: [
    'admitting --breaker.leaseNeeded--> awaitingProbeLease',
    'awaitingProbeLease --call.cancelled--> withdrawingProbe',
    'awaitingProbeLease --probe.leased--> admitting',
    'awaitingProbeLease --probe.leased--> rejected',
    'withdrawingProbe --probe.leased--> withdrawn',
    'withdrawingProbe --time passes--> withdrawn',
  ],
  /** The key book and the breaker answer within the turn that asked them: no caller cancels in between. */
  cancelBeforeTheCall: ['admitting --call.cancelled--> withdrawn', 'checkingKey --call.cancelled--> withdrawn'],
};
const renamed = (line: string) =>
  line.replace('--xstate.done.actor.upstream-->', '--upstream.answered-->').replace('--xstate.error.actor.upstream-->', '--upstream.failed-->');

describe('the attempt model mirrors src/machines/attempt.machine.ts', () => {
  it('has the same state nodes, but the fleet lease and the withdrawal', () => {
    expect(statePaths(attemptModel)).toEqual(
      statePaths(attemptMachine).filter((path) => !['awaitingProbeLease', 'withdrawingProbe', 'withdrawn'].includes(path)),
    );
  });

  it('has the same transitions (event and target per state), the fleet lease and the cancels before the call left out, and `after` as a time event', () => {
    const production = transitionLines(attemptMachine).map(renamed);
    const excluded = [...leftOut.fleet, ...leftOut.cancelBeforeTheCall];
    expect(production.filter((line) => excluded.includes(line))).toEqual([...excluded].sort());
    expect(transitionLines(attemptModel)).toEqual(production.filter((line) => !excluded.includes(line)).sort());
  });
});

const cover = edgeCover(attemptModel);

it('covers 10 states and 18 edges, one path per edge', () => {
  expect(cover.vertices).toBe(10);
  expect(cover.edges).toBe(18);
  expect(cover.paths).toHaveLength(18);
});

const answer: ProviderAnswer = { text: '{"ok":true}', model: 'claude-model', usage: { inputTokens: 1, outputTokens: 2 }, truncated: false };
const settle = async () => {
  for (let i = 0; i < 10; i += 1) await Promise.resolve();
};
/** One turn of the event loop: the pieces read in the last one reach the attempt. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** An adapter driven by hand: each call waits until the test answers, streams or fails it. */
function handAdapter() {
  const calls: { resolve: (answer: ProviderAnswer) => void; reject: (error: unknown) => void; observer: UpstreamStreamObserver | undefined }[] = [];
  const adapter: ProviderAdapter = {
    id: 'claude',
    model: 'claude-model',
    generate: (_request, _key, signal, observer) =>
      new Promise<ProviderAnswer>((resolve, reject) => {
        calls.push({ resolve, reject, observer });
        signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')), { once: true });
      }),
    classify: (error) =>
      error instanceof Error && error.message === 'auth'
        ? { errorClass: 'auth', message: 'the key was refused' }
        : { errorClass: 'server_error', message: 'the provider failed' },
  };
  return { adapter, calls };
}

/** The clocks of a path: only the one its time event names is short, so it alone can fire. */
function timingsFor(types: ReadonlySet<string>) {
  return {
    firstTokenTimeoutMs: types.has('time.firstTokenElapsed') ? 400 : 30_000,
    streamIdleTimeoutMs: types.has('time.streamIdleElapsed') ? 100 : 30_000,
    providerTimeoutMs: types.has('time.deadlineElapsed') ? 300 : 60_000,
  };
}

const isAttempt = (id: string) => /^run\..+:\d+$/.test(id);

async function walk(path: (typeof cover.paths)[number]): Promise<void> {
  const types = new Set(path.steps.map((step) => step.event.type));
  const timings = timingsFor(types);
  const clock = new SimulatedClock();
  clock.set(1_800_000_000_000);
  const hand = handAdapter();
  /** Each attempt's states as the inspector saw them, by actor id. */
  const lived = new Map<string, unknown[]>();
  const gateway: Gateway = createGateway({
    adapters: { claude: hand.adapter, gpt: hand.adapter, timelygpt: hand.adapter },
    // A failure that should find the breaker refusing opens it (threshold 1); otherwise it stays closed.
    breaker: { threshold: types.has('breaker.refusing') ? 1 : 5, recoveryMs: 60_000 },
    retry: { max: 0, backoffMs: [0] },
    policy: 'retry-then-fallback',
    providerTimeoutMs: timings.providerTimeoutMs,
    firstTokenTimeoutMs: timings.firstTokenTimeoutMs,
    streamIdleTimeoutMs: timings.streamIdleTimeoutMs,
    keyHealth: { quarantineMs: 60_000, coolingMs: 5_000, maxKeys: 10 },
    clock,
    inspect: (event: InspectionEvent) => {
      const { id } = event.actorRef as AnyActorRef;
      if (event.type !== '@xstate.snapshot' || !isAttempt(id)) return;
      const snapshot = event.snapshot as unknown as { status: string; value: unknown };
      // An attempt's states while it runs (its provider stops it at its end: that snapshot is no state).
      if (snapshot.status !== 'active') return;
      lived.set(id, [...(lived.get(id) ?? []), snapshot.value]);
    },
  });
  const apiKey = new Secret('test-claude-key-attempt-model');
  const generate = (signal?: AbortSignal) =>
    gateway.generate({
      request,
      validate: (given: ProviderAnswer) => ({ ok: true as const, value: given.text }),
      chain: [{ provider: 'claude', apiKey }],
      ...(signal === undefined ? {} : { signal }),
    });
  // What the key's and the breaker's answers need, set up before the call (they come in its first turn).
  if (types.has('key.refused')) {
    const refusing = generate();
    hand.calls.at(-1)?.reject(new Error('auth'));
    expect((await refusing).status).toBe('failed');
  }
  if (types.has('breaker.rejected')) gateway.controlBreaker('claude', 'forceOpen');
  const before = new Set(lived.keys());
  const controller = new AbortController();
  let outcome: Promise<GenerateOutcome<string>> | undefined;
  const call = () => {
    const made = hand.calls.at(-1);
    if (made === undefined) throw new Error('no upstream call was made');
    return made;
  };
  const ended = async () => {
    if (outcome === undefined) throw new Error('no call was asked');
    return outcome;
  };

  const expected: unknown[] = [];
  const record = (state: { value: unknown }) => void expected.push(state.value);
  const lastAttempt = async () => (await ended()).attempts.at(-1);
  const states = {
    checkingKey: record,
    admitting: record,
    'calling.awaitingFirstToken': record,
    'calling.streaming': record,
    reporting: record,
    done: async (state: { value: unknown }) => {
      record(state);
      const result = await ended();
      expect(result.status).toBe('succeeded');
      expect(await lastAttempt()).toMatchObject({ outcome: 'succeeded' });
    },
    failed: async (state: { value: unknown }) => {
      record(state);
      const timedOut = [...types].some((type) => type.startsWith('time.'));
      expect(await lastAttempt()).toMatchObject({
        outcome: 'failed',
        errorClass: timedOut ? 'timeout' : 'server_error',
        countedByBreaker: true,
      });
      expect(gateway.provider('claude').breaker.state).toBe(types.has('breaker.refusing') ? 'open' : 'closed');
    },
    rejected: async (state: { value: unknown }) => {
      record(state);
      expect(await lastAttempt()).toMatchObject({ outcome: 'skipped', errorClass: 'circuit_open' });
      expect(hand.calls).toHaveLength(0);
    },
    skipped: async (state: { value: unknown }) => {
      record(state);
      expect(await lastAttempt()).toMatchObject({ outcome: 'skipped', reason: 'key_quarantined', errorClass: 'auth' });
      // Only the earlier call that got the key refused went out.
      expect(hand.calls).toHaveLength(1);
    },
    aborted: async (state: { value: unknown }) => {
      record(state);
      expect((await ended()).status).toBe('aborted');
      expect(gateway.provider('claude').stats).toMatchObject({ calls: 1, ignored: 1, failures: 0 });
    },
  };
  /** The key's and the breaker's answers come within the turn that asked them: the call is all it takes. */
  const answeredInTheSameTurn = async () => undefined;
  const events: Record<AttemptModelEvent['type'], () => Promise<void>> = {
    'key.admitted': async () => {
      outcome = generate(controller.signal);
    },
    'key.refused': async () => {
      outcome = generate(controller.signal);
    },
    'breaker.admitted': answeredInTheSameTurn,
    'breaker.rejected': answeredInTheSameTurn,
    'upstream.delta': async () => {
      call().observer?.onDelta('{"ok":');
      await nextTurn();
    },
    'upstream.answered': async () => {
      call().resolve(answer);
      await settle();
    },
    'upstream.failed': async () => {
      call().reject(new Error('down'));
      await settle();
    },
    'time.firstTokenElapsed': async () => {
      clock.increment(timings.firstTokenTimeoutMs);
      await settle();
    },
    'time.streamIdleElapsed': async () => {
      clock.increment(timings.streamIdleTimeoutMs);
      await settle();
    },
    'time.deadlineElapsed': async () => {
      clock.increment(timings.providerTimeoutMs);
      await settle();
    },
    'call.cancelled': async () => {
      controller.abort();
      await settle();
    },
    'breaker.admitting': answeredInTheSameTurn,
    'breaker.refusing': answeredInTheSameTurn,
  };

  expectComplete([path as never], events, states);
  try {
    await path.test({ events: events as never, states: states as never });
    // The call's own attempt lived the model's path, state for state (a path that ends before the
    // call's end is the beginning of what it lived).
    const ids = [...lived.keys()].filter((id) => !before.has(id));
    expect(ids).toHaveLength(1);
    const real = [...(lived.get(ids[0] ?? '') ?? [])];
    const over = getNextTransitions(path.state).length === 0;
    expect(over ? real : real.slice(0, expected.length)).toEqual(expected);
  } finally {
    await gateway.stop();
  }
}

describe('the running system follows the attempt model on every edge', () => {
  it.each(cover.paths.map((path) => [path.steps.map((step) => step.event.type as string).filter((type) => type !== 'xstate.init').join(' → '), path] as const))(
    '%s',
    async (_name, path) => {
      await walk(path);
    },
  );
});
