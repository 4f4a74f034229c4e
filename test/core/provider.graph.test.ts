import { describe, expect, it } from 'vitest';
import { createActor, setup, transition, type ActorLogic, type SnapshotFrom } from 'xstate';
import type { CallRequest } from '../../src/machines/call-request.js';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import type { ErrorClass } from '../../src/errors/index.js';
import {
  createProviderMachine,
  providerMachine,
  type ProviderEvent,
} from '../../src/machines/provider.machine.js';
import { documentClasses, errorsMd, withRow } from './errors-md.js';
import type { ProviderAnswer } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { sentEventTypes } from './graph-events.js';
import { request } from './gateway-harness.js';

type ProviderLogic = typeof providerMachine;
type ProviderSnapshot = SnapshotFrom<ProviderLogic>;

const replyTo = createActor(setup({}).createMachine({}));
const apiKey = new Secret('test-claude-key-graph');
const answer: ProviderAnswer = {
  text: '{}',
  model: 'claude-model',
  usage: { inputTokens: 1, outputTokens: 1 },
  truncated: false,
};
const validate = () => ({ ok: true as const, value: {} });
const callIds = ['c1', 'c2'];
const upstreamClasses: readonly ErrorClass[] = documentClasses.filter(
  (errorClass) => errorClass !== 'circuit_open',
);

const at = 1_000;
const callOf = (callId: string): CallRequest => ({ callId, request, apiKey, keyId: 'key-1', replyTo, validate, at });

function payloadsFor(type: string): ProviderEvent[] {
  switch (type) {
    case 'call.requested':
      return callIds.map((callId) => ({ type, ...callOf(callId) }));
    case 'key.refused':
      return callIds.map((callId) => ({
        type,
        call: callOf(callId),
        reason: 'key_quarantined',
        errorClass: 'auth',
        until: 61_000,
      }));
    case 'key.admitted':
    case 'breaker.admitted':
    case 'breaker.leaseNeeded':
      return callIds.map((callId) => ({ type, call: callOf(callId) }));
    case 'breaker.rejected':
      return callIds.map((callId) => ({ type, call: callOf(callId), retryAt: 61_000 }));
    case 'upstream.succeeded':
      return callIds.flatMap((callId) => [
        { type, callId, replyTo, keyId: 'key-1', answer, verdict: { ok: true, value: {} }, durationMs: 5, streamed: null, at },
        {
          type,
          callId,
          replyTo,
          keyId: 'key-1',
          answer,
          verdict: { ok: false, errors: ['questions: expected array'] },
          durationMs: 5,
          streamed: null,
          at,
        },
      ]);
    case 'upstream.failed':
      return callIds.flatMap((callId) =>
        upstreamClasses.map((errorClass) => ({
          type,
          callId,
          replyTo,
          keyId: 'key-1',
          failure: { errorClass, message: `graph ${errorClass}` },
          durationMs: 5,
          streamed: null,
          at,
        })),
      );
    case 'call.cancelled':
      return callIds.map((callId) => ({ type, callId, at }));
    case 'upstream.cancelled':
      return callIds.map((callId) => ({ type, callId, replyTo, keyId: 'key-1', durationMs: 5, at }));
    case 'breaker.control':
      return (['reset', 'forceOpen', 'release'] as const).map((action) => ({ type, action, at }));
    case 'probe.leased':
      return callIds.flatMap((callId) => [true, false].map((granted) => ({ type, callId, granted, at })));
    default:
      return [];
  }
}

const eventTypes = [
  'call.requested',
  'key.admitted',
  'key.refused',
  'breaker.admitted',
  'breaker.rejected',
  'breaker.leaseNeeded',
  'upstream.succeeded',
  'upstream.failed',
  'call.cancelled',
  'upstream.cancelled',
  'breaker.control',
  'probe.leased',
];
const events = () => eventTypes.flatMap(payloadsFor);

/**
 * The bounded state key: which calls wait for a lease. Calls in flight are child actors (each one's life
 * is call.machine.ts, explored in call.graph.test.ts; its outcome brings the call back), and the breaker
 * is asked by message, so its answers are events here: no breaker stand-ins are needed.
 */
function serializeState(snapshot: ProviderSnapshot): string {
  return JSON.stringify([snapshot.value, Object.keys(snapshot.context.leasing).sort()]);
}

const input = { providerId: 'claude' as const, model: 'claude-model', threshold: 5, recoveryMs: 60_000 };

/**
 * A call actor is spawned under the system id `call.<callId>`; the graph's pure transitions share one
 * inert system, where the same id would be registered twice, so `startCall` is explored by name (the
 * spawn itself runs in provider.lifecycle.test.ts and gateway.test.ts).
 */
function explorable(machine: ProviderLogic): ProviderLogic {
  return machine.provide({ actions: { startCall: () => undefined } });
}

/** xstate/graph types logic with untyped emitted events; the provider's are typed (`call.finished`). */
function adjacencyOf(machine: ProviderLogic) {
  const logic = machine as unknown as ActorLogic<ProviderSnapshot, ProviderEvent, typeof input>;
  return getAdjacencyMap(logic, { input, events, serializeState });
}

interface Violation {
  readonly breaker: string;
  readonly event: string;
  readonly sent: readonly string[];
}

/**
 * Explores the provider and replays every edge through the pure
 * `transition()` to read the actions it takes: a user-side class, an invalid answer or a cancel
 * must never send the breaker a FAILURE (`call.failed`); a provider-side class must send exactly one.
 * "Provider-side" is docs/errors.md's column B as written in errors-md.ts, not the code's table.
 */
function checkEveryEdge(logic: ProviderLogic): { states: number; edges: number; violations: Violation[] } {
  let states = 0;
  let edgeCount = 0;
  const violations: Violation[] = [];
  {
    const name = 'any breaker';
    const machine = explorable(logic);
    const adjacency = adjacencyOf(machine);
    const edges = adjacencyMapToArray(adjacency);
    states += Object.keys(adjacency).length;
    edgeCount += edges.length;
    for (const { state, event } of edges) {
      const [, actions] = transition(machine, state, event);
      const sent = sentEventTypes(actions);
      const failures = sent.filter((type) => type === 'call.failed').length;
      // The fleet (Redis, when configured) hears exactly what the breaker hears.
      const fleetFailures = sent.filter((type) => type === 'fleet:call.failed').length;
      const counted = event.type === 'upstream.failed' && errorsMd[event.failure.errorClass].B;
      // GET /v1/providers' stats follow the same column: a counted class is a failure, any other ignored.
      const stats = actions
        .filter((action) => action.type === 'countStat')
        .map((action) => (action.params as { stat: string }).stat);
      const expectedStats = expectedStatsOf(event);
      const statsWrong = expectedStats !== undefined && JSON.stringify(stats) !== JSON.stringify(expectedStats);
      if (failures !== (counted ? 1 : 0) || fleetFailures !== failures || statsWrong) {
        const detail =
          event.type === 'upstream.failed' ? `${event.type}(${event.failure.errorClass})` : event.type;
        violations.push({ breaker: name, event: detail, sent });
      }
    }
  }
  return { states, edges: edgeCount, violations };
}

/** The stat an outcome adds (docs/errors.md column B, literally), or undefined for events that are not outcomes. */
function expectedStatsOf(event: ProviderEvent): string[] | undefined {
  switch (event.type) {
    case 'upstream.failed':
      return [errorsMd[event.failure.errorClass].B ? 'failures' : 'ignored'];
    case 'upstream.succeeded':
      return [event.verdict.ok ? 'successes' : errorsMd.invalid_output.B ? 'failures' : 'ignored'];
    case 'upstream.cancelled':
      return [errorsMd.aborted.B ? 'failures' : 'ignored'];
    default:
      return undefined;
  }
}

const EXPECTED_STATES = 4;
const EXPECTED_EDGES = 212;

const actionTypes = (machine: ProviderLogic, state: ProviderSnapshot, event: ProviderEvent) =>
  transition(machine, state, event)[1].map((action) => action.type);

describe('provider actor, over every edge of its graph', () => {
  const provider = explorable(providerMachine);
  const edges = adjacencyMapToArray(adjacencyOf(provider));

  it('asks the key book for every call, the breaker for every call the key admits, and starts a call actor exactly when the breaker admits it', () => {
    let asked = 0;
    let started = 0;
    for (const { state, event } of edges) {
      const [, actions] = transition(provider, state, event);
      const spawned = actions.filter((action) => action.type === 'startCall');
      const sent = sentEventTypes(actions);
      // A request is asked of the caller's key first (the key book), never straight of the breaker or upstream;
      // the key's admission goes to the breaker; its refusal is answered at once, the breaker never asked.
      if (event.type === 'call.requested') expect(sent).toEqual(['key.admit']);
      if (event.type === 'key.admitted') expect(sent).toEqual(['breaker.admit']);
      if (event.type === 'key.refused') expect(sent).toEqual(['provider.keySkipped']);
      expect(spawned.length, event.type).toBe(event.type === 'breaker.admitted' ? 1 : 0);
      if (event.type === 'breaker.admitted')
        expect((spawned[0]?.params as CallRequest | undefined)?.callId).toBe(event.call.callId);
      asked += sent.filter((type) => type === 'breaker.admit').length;
      started += spawned.length;
    }
    expect(asked).toBeGreaterThan(0);
    expect(started).toBeGreaterThan(0);
  });

  it('forgets a call that only waits for a lease when its caller cancels it', () => {
    let cancelled = 0;
    for (const { state, event, nextState } of edges) {
      if (event.type !== 'call.cancelled') continue;
      const leasing = event.callId in state.context.leasing;
      expect(event.callId in nextState.context.leasing).toBe(false);
      cancelled += leasing ? 0 : 1;
    }
    expect(cancelled).toBeGreaterThan(0);
  });

  it('ends the call actor with its one outcome', () => {
    for (const { state, event } of edges) {
      if (!event.type.startsWith('upstream.')) continue;
      expect(actionTypes(provider, state, event).filter((type: string) => type === 'xstate.stopChild')).toHaveLength(1);
    }
  });

  it('sends the breaker a FAILURE exactly for provider-side classes, never for 401, 429 or any user-side class', () => {
    const { states, edges: edgeCount, violations } = checkEveryEdge(providerMachine);
    console.log(`provider graph: ${states} states, ${edgeCount} edges; ${violations.length} violations`);
    // No call, c1, c2, or both waiting for the lease (4 states). Each takes 53 events: 2 requests,
    // 4 key answers, 6 breaker answers, 4 answers, 2 × 13 failure classes, 2 cancels, 2 cancelled calls, 3 operator
    // actions, 4 lease answers.
    expect(states).toBe(EXPECTED_STATES);
    expect(edgeCount).toBe(EXPECTED_EDGES);
    expect(violations).toEqual([]);
  });

  it('explores the fleet-lease branch: a call waits for the lease, then is asked of the breaker again, as leased', () => {
    const leaseNeeded = edges.filter(({ event }) => event.type === 'breaker.leaseNeeded');
    expect(leaseNeeded.length).toBeGreaterThan(0);
    for (const { event, nextState } of leaseNeeded) {
      if (event.type !== 'breaker.leaseNeeded') continue;
      expect(Object.keys(nextState.context.leasing)).toContain(event.call.callId);
    }
    const granted = edges.filter(
      ({ state, event }) => event.type === 'probe.leased' && event.granted && event.callId in state.context.leasing,
    );
    expect(granted.length).toBeGreaterThan(0);
    for (const { state, event, nextState } of granted) {
      if (event.type !== 'probe.leased') continue;
      const [, actions] = transition(provider, state, event);
      const asks = actions.filter((action) => action.type === 'xstate.sendTo');
      expect(asks.map((action) => (action.params as { event: { type: string; leased?: boolean } }).event)).toEqual([
        expect.objectContaining({ type: 'breaker.admit', leased: true }),
      ]);
      expect(Object.keys(nextState.context.leasing)).not.toContain(event.callId);
    }
    // A lease granted to a call nobody waits for is freed at once, as an ignored (never counted) result.
    const orphan = edges.find(
      ({ state, event }) => event.type === 'probe.leased' && event.granted && !(event.callId in state.context.leasing),
    );
    expect(orphan).toBeDefined();
    if (orphan) expect(sentEventTypes(transition(provider, orphan.state, orphan.event)[1])).toEqual(['fleet:call.ignored']);
  });

  it.each([
    ['auth', '401'],
    ['rate_limited', '429'],
    ['invalid_output', 'an invalid answer'],
    ['aborted', 'a cancel'],
  ] as const)('goes red on the kept mutant whose table row counts %s (%s)', (errorClass, _what) => {
    const mutant = createProviderMachine(withRow(errorClass, { breaker: 'counts' }));
    const { violations } = checkEveryEdge(mutant);
    console.log(`mutant (${errorClass} counted): caught on ${violations.length} edges`);
    expect(violations.length).toBeGreaterThan(0);
  });

  it('goes red on the kept mutant whose table row stops counting timeout', () => {
    const { violations } = checkEveryEdge(createProviderMachine(withRow('timeout', { breaker: 'ignored' })));
    expect(violations.length).toBeGreaterThan(0);
    expect(violations.every((violation) => violation.event === 'upstream.failed(timeout)')).toBe(true);
  });

  it('never calls upstream when the breaker refuses: the request is answered provider.rejected with its retryAt', () => {
    for (const { state, event } of edges) {
      if (event.type !== 'breaker.rejected') continue;
      const [, actions] = transition(provider, state, event);
      expect(actions.some((action) => action.type === 'startCall')).toBe(false);
      expect(sentEventTypes(actions)).toEqual(['provider.rejected']);
    }
  });
});
