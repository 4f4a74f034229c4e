import { admit } from './breaker-admit.js';
import { describe, expect, it } from 'vitest';
import { getNextTransitions, initialTransition, transition, type SnapshotFrom } from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import type { CountedErrorClass, IgnoredErrorClass } from '../../src/errors/index.js';
import { breakerMachine, type BreakerEvent } from '../../src/machines/breaker.machine.js';

// docs/errors.md column B, written out: the classes that count, and every other class.
const countedErrorClasses: readonly CountedErrorClass[] = [
  'server_error',
  'overloaded',
  'timeout',
  'connection',
];
const ignoredErrorClasses: readonly IgnoredErrorClass[] = [
  'auth',
  'permission',
  'quota_exhausted',
  'rate_limited',
  'bad_request',
  'context_too_long',
  'not_found',
  'aborted',
  'invalid_output',
  'circuit_open',
];

type BreakerSnapshot = SnapshotFrom<typeof breakerMachine>;

const threshold = 3;
const input = { providerId: 'claude', threshold, recoveryMs: 60_000 };
const at = 1_000;

/** Results arrive for the probe (when one is held) and for some other call. */
function callIds(snapshot: BreakerSnapshot): string[] {
  return snapshot.context.probeCallId === null ? ['other'] : [snapshot.context.probeCallId, 'other'];
}

function payloadsFor(type: string, snapshot: BreakerSnapshot): BreakerEvent[] {
  switch (type) {
    case 'breaker.admit':
      return [admit('probe', at)];
    case 'call.succeeded':
      return callIds(snapshot).map((callId) => ({ type, callId, at }));
    case 'call.failed':
      return callIds(snapshot).flatMap((callId) =>
        countedErrorClasses.map((errorClass) => ({ type, callId, errorClass, keyId: 'key-a', at })),
      );
    case 'call.ignored':
      return callIds(snapshot).flatMap((callId) =>
        ignoredErrorClasses.map((errorClass) => ({ type, callId, errorClass, at })),
      );
    case 'breaker.reset':
    case 'breaker.forceOpen':
    case 'breaker.release':
      return [{ type, at }];
    default:
      // Delayed transitions (xstate.after.recoveryTimeout.breaker.open) carry no payload.
      return [{ type } as BreakerEvent];
  }
}

/** Every event type the breaker knows, so closed also gets `breaker.admit` / `call.ignored`. */
const allTypes = [
  'breaker.admit',
  'call.succeeded',
  'call.failed',
  'call.ignored',
  'breaker.reset',
  'breaker.forceOpen',
  'breaker.release',
];

function events(snapshot: BreakerSnapshot): BreakerEvent[] {
  const delayed = [...new Set(getNextTransitions(snapshot).map((t) => t.eventType))].filter((t) =>
    t.startsWith('xstate.after'),
  );
  return [...allTypes, ...delayed].flatMap((type) => payloadsFor(type, snapshot));
}

/** The state key: state value and the bounded parts of the context (not timestamps or `opens`). */
function serializeState(snapshot: BreakerSnapshot): string {
  const { consecutiveFailures, probeCallId, openedAt } = snapshot.context;
  return JSON.stringify([snapshot.value, consecutiveFailures, probeCallId, openedAt === null]);
}

function stateName(snapshot: BreakerSnapshot): string {
  return typeof snapshot.value === 'string' ? snapshot.value : JSON.stringify(snapshot.value);
}

const t0 = performance.now();
const adjacency = getAdjacencyMap(breakerMachine, { input, events, serializeState });
const edges = adjacencyMapToArray(adjacency);
console.log(`adjacency built in ${(performance.now() - t0).toFixed(0)} ms`);

describe('breaker machine, over every edge of its graph', () => {
  it('explores the whole graph', () => {
    const states = Object.keys(adjacency).length;
    console.log(`breaker graph: ${states} states, ${edges.length} edges (threshold ${threshold})`);
    // closed × counts 0..2, open, forcedOpen × counts 0..3, halfOpen.awaitingProbe, halfOpen.probing.
    expect(states).toBe(10);
    expect(edges.length).toBe(206);
    // The explorer also follows the delayed recovery transition (docs/testing.md graph-test pitfall 1).
    expect(edges.some((edge) => edge.event.type.startsWith('xstate.after.recoveryTimeout'))).toBe(true);
  });

  it('never lets a user-side class or an abort move the failure count or open the breaker', () => {
    const ignored = edges.filter((edge) => edge.event.type === 'call.ignored');
    expect(ignored.length).toBeGreaterThan(0);
    for (const { state, event, nextState } of ignored) {
      expect(nextState.context.consecutiveFailures).toBe(state.context.consecutiveFailures);
      expect(nextState.matches('open')).toBe(state.matches('open'));
      // The only state change allowed: a probe that proved nothing frees the probe slot.
      if (stateName(nextState) !== stateName(state)) {
        expect(state.matches({ halfOpen: 'probing' })).toBe(true);
        expect(nextState.matches({ halfOpen: 'awaitingProbe' })).toBe(true);
        expect('callId' in event && event.callId).toBe(state.context.probeCallId);
      }
    }
    console.log(`breaker: ${ignored.length} ignored-class edges checked`);
  });

  it('opens from closed exactly when the counted failure reaches the threshold', () => {
    for (const { state, event, nextState } of edges) {
      if (!state.matches('closed')) continue;
      const reaches = event.type === 'call.failed' && state.context.consecutiveFailures + 1 === threshold;
      expect(nextState.matches('open')).toBe(reaches);
    }
  });

  it('admits at most one probe per half-open window', () => {
    const halfOpenEdges = edges.filter(({ state }) => state.matches('halfOpen'));
    for (const { state, event, nextState } of halfOpenEdges) {
      // Taking the probe slot leaves the breaker refusing everything else.
      if (state.hasTag('admitting') && event.type === 'breaker.admit') {
        expect(nextState.hasTag('admitting')).toBe(false);
      }
      // Once probing, only the probe's own result (or an operator) reopens admission.
      if (!state.hasTag('admitting') && nextState.hasTag('admitting')) {
        const operator = event.type.startsWith('breaker.');
        const probeResult = 'callId' in event && event.callId === state.context.probeCallId;
        expect(operator || probeResult).toBe(true);
      }
    }
    expect(
      edges.filter(({ state }) => state.matches('open')).every(({ state }) => !state.hasTag('admitting')),
    ).toBe(true);
  });
});

describe('breaker machine, over every event sequence up to a depth', () => {
  it('opens exactly when threshold consecutive counted failures are reached, on every sequence', () => {
    // Simple paths collapse here (the bounded state key makes nearly every path revisit a vertex),
    // so the sequences are enumerated directly through the pure transition function.
    const depth = 6;
    const small = { ...input, threshold: 2 };
    const reduced = (snapshot: BreakerSnapshot): BreakerEvent[] =>
      events(snapshot).filter(
        (event) =>
          event.type !== 'breaker.forceOpen' &&
          event.type !== 'breaker.release' &&
          (!('callId' in event) ||
            event.callId === (snapshot.context.probeCallId ?? 'other')) &&
          (!('errorClass' in event) ||
            event.errorClass === 'server_error' ||
            event.errorClass === 'rate_limited'),
      );
    const [initial] = initialTransition(breakerMachine, small);
    let sequences = 0;
    let steps = 0;
    const walk = (
      snapshot: BreakerSnapshot,
      streak: number,
      probesInWindow: number,
      remaining: number,
    ): void => {
      if (remaining === 0) {
        sequences += 1;
        return;
      }
      for (const event of reduced(snapshot)) {
        const [next] = transition(breakerMachine, snapshot, event);
        steps += 1;
        let nextStreak = streak;
        if (snapshot.matches('closed')) {
          if (event.type === 'call.failed') nextStreak += 1;
          if (event.type === 'call.succeeded') nextStreak = 0;
          expect(next.matches('open')).toBe(event.type === 'call.failed' && nextStreak === small.threshold);
        }
        if (!next.matches('closed') || event.type === 'breaker.reset') nextStreak = 0;
        const admitted =
          snapshot.matches('halfOpen') && snapshot.hasTag('admitting') && event.type === 'breaker.admit';
        const nextProbes = next.matches('halfOpen') ? probesInWindow + (admitted ? 1 : 0) : 0;
        // At most one probe in flight per half-open window: the slot frees only when the probe ends.
        const inFlight = next.matches({ halfOpen: 'probing' }) ? 1 : 0;
        expect(inFlight).toBeLessThanOrEqual(1);
        if (admitted) expect(next.hasTag('admitting')).toBe(false);
        walk(next, nextStreak, nextProbes, remaining - 1);
      }
    };
    const start = performance.now();
    walk(initial, 0, 0, depth);
    const ms = performance.now() - start;
    console.log(
      `breaker sequences: ${sequences} sequences of ${depth} events, ${steps} steps checked in ${ms.toFixed(0)} ms`,
    );
    expect(sequences).toBeGreaterThan(5_000);
  });

  it('replays a path through the pure transition function to the same state', () => {
    const [open] = [1, 2, 3].reduce<[BreakerSnapshot]>(
      ([snapshot]) => {
        const [next] = transition(breakerMachine, snapshot, {
          type: 'call.failed',
          callId: 'x',
          errorClass: 'timeout',
          keyId: 'key-a',
          at,
        });
        return [next];
      },
      [adjacency[Object.keys(adjacency)[0] as keyof typeof adjacency]!.state],
    );
    expect(open.value).toBe('open');
    expect(open.context.retryAt).toBe(at + input.recoveryMs);
  });
});
