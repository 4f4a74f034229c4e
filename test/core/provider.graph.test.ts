import { describe, expect, it } from 'vitest';
import { createActor, setup, transition, type ActorLogic, type SnapshotFrom } from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import type { ErrorClass } from '../../src/errors/index.js';
import { breakerMachine } from '../../src/machines/breaker.machine.js';
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

/**
 * Breaker stand-ins (docs/testing.md graph-test pitfall 3: spawned children are frozen during traversal, so the
 * provider is explored once per breaker situation instead of with a live breaker). `shared` is a
 * breaker that a fleet shares while it recovers: a call must first get the fleet's probe lease.
 */
function standIn(admitting: boolean, shared = false): typeof breakerMachine {
  const logic = setup({}).createMachine({
    id: 'breaker',
    context: { retryAt: admitting ? null : 61_000, shared },
    initial: 'standIn',
    states: { standIn: { tags: admitting ? ['admitting'] : [] } },
  });
  // The provider reads only the `admitting` tag, `context.retryAt` and `context.shared` of its breaker.
  return logic as unknown as typeof breakerMachine;
}

/** The breaker situations the provider is explored under. */
const situations = [
  ['admitting', standIn(true)],
  ['refusing', standIn(false)],
  ['fleet half-open', standIn(true, true)],
] as const;

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

function payloadsFor(type: string): ProviderEvent[] {
  const at = 1_000;
  switch (type) {
    case 'call.requested':
      return callIds.map((callId) => ({ type, callId, request, apiKey, keyId: 'key-1', replyTo, validate, at }));
    case 'upstream.succeeded':
      return callIds.flatMap((callId) => [
        { type, callId, replyTo, keyId: 'key-1', answer, verdict: { ok: true, value: {} }, durationMs: 5, at },
        {
          type,
          callId,
          replyTo,
          keyId: 'key-1',
          answer,
          verdict: { ok: false, errors: ['questions: expected array'] },
          durationMs: 5,
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
  'upstream.succeeded',
  'upstream.failed',
  'call.cancelled',
  'upstream.cancelled',
  'breaker.control',
  'probe.leased',
];
const events = () => eventTypes.flatMap(payloadsFor);

/**
 * The bounded state key: which calls wait for a lease. Calls in flight are not the provider's to keep
 * (each one's life is call.machine.ts, explored in call.graph.test.ts; its outcome brings the call back).
 */
function serializeState(snapshot: ProviderSnapshot): string {
  return JSON.stringify([snapshot.value, Object.keys(snapshot.context.leasing).sort()]);
}

const input = { providerId: 'claude' as const, model: 'claude-model', threshold: 5, recoveryMs: 60_000 };

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
 * Explores the provider with each breaker stand-in and replays every edge through the pure
 * `transition()` to read the actions it takes: a user-side class, an invalid answer or a cancel
 * must never send the breaker a FAILURE (`call.failed`); a provider-side class must send exactly one.
 * "Provider-side" is docs/errors.md's column B as written in errors-md.ts, not the code's table.
 */
function checkEveryEdge(logic: ProviderLogic): { states: number; edges: number; violations: Violation[] } {
  let states = 0;
  let edgeCount = 0;
  const violations: Violation[] = [];
  for (const [name, breaker] of situations) {
    const machine = logic.provide({ actors: { breaker } });
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

const EXPECTED_STATES = 6;
const EXPECTED_EDGES = 258;

describe('provider actor, over every edge of its graph', () => {
  it('starts exactly one upstream call per admitted request, and aborts it when the caller cancels', () => {
    const machine = providerMachine.provide({ actors: { breaker: standIn(true) } });
    const adjacency = adjacencyOf(machine);
    let admitted = 0;
    let cancelled = 0;
    for (const { state, event } of adjacencyMapToArray(adjacency)) {
      const [, actions] = transition(machine, state, event);
      const starts = actions.filter((action) => action.type === 'startUpstream').length;
      const aborts = actions.filter((action) => action.type === 'abortUpstream').length;
      const leasing = 'callId' in event && event.callId in state.context.leasing;
      expect(starts).toBe(event.type === 'call.requested' ? 1 : 0);
      expect(aborts).toBe(event.type === 'call.cancelled' && !leasing ? 1 : 0);
      admitted += starts;
      cancelled += aborts;
    }
    expect(admitted).toBeGreaterThan(0);
    expect(cancelled).toBeGreaterThan(0);
  });

  it('sends the breaker a FAILURE exactly for provider-side classes, never for 401, 429 or any user-side class', () => {
    const { states, edges, violations } = checkEveryEdge(providerMachine);
    console.log(
      `provider graph: ${states} states, ${edges} edges over 3 breaker stand-ins; ${violations.length} violations`,
    );
    // Admitting: one state (calls in flight are their call machines'); refusing: one; fleet half-open: no
    // call, c1, c2, or both waiting for the lease (4). Each state takes 43 events: 2 requests, 4 answers,
    // 2 × 13 failure classes, 2 cancels, 2 cancelled calls, 3 operator actions, 4 lease answers.
    expect(states).toBe(EXPECTED_STATES);
    expect(edges).toBe(EXPECTED_EDGES);
    expect(violations).toEqual([]);
  });

  it('explores the fleet-lease branch: a call waits for the lease, then runs or is refused', () => {
    const [, breaker] = situations[2];
    const machine = providerMachine.provide({ actors: { breaker } });
    const edges = adjacencyMapToArray(adjacencyOf(machine));
    const leaseAsked = edges.filter(({ event }) => event.type === 'call.requested');
    expect(leaseAsked.length).toBeGreaterThan(0);
    for (const { state, event, nextState } of leaseAsked) {
      if (
        !('callId' in event) ||
        event.callId in state.context.leasing
      )
        continue;
      expect(Object.keys(nextState.context.leasing)).toContain(event.callId);
      expect(transition(machine, state, event)[1].map((action) => action.type)).not.toContain('startUpstream');
    }
    const granted = edges.filter(
      ({ state, event }) =>
        event.type === 'probe.leased' && event.granted && event.callId in state.context.leasing,
    );
    expect(granted.length).toBeGreaterThan(0);
    for (const { state, event, nextState } of granted) {
      if (event.type !== 'probe.leased') continue;
      const started = transition(machine, state, event)[1].filter((action) => action.type === 'startUpstream');
      expect(started.map((action) => (action.params as { callId: string }).callId)).toEqual([event.callId]);
      expect(Object.keys(nextState.context.leasing)).not.toContain(event.callId);
    }
    // A lease granted to a call nobody waits for is freed at once, as an ignored (never counted) result.
    const orphan = edges.find(
      ({ state, event }) =>
        event.type === 'probe.leased' && event.granted && !(event.callId in state.context.leasing),
    );
    expect(orphan).toBeDefined();
    if (orphan)
      expect(sentEventTypes(transition(machine, orphan.state, orphan.event)[1])).toEqual([
        'fleet:call.ignored',
      ]);
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

  it('never calls upstream while the breaker refuses: the request is answered provider.rejected', () => {
    const machine = providerMachine.provide({ actors: { breaker: standIn(false) } });
    const adjacency = adjacencyOf(machine);
    for (const { state, event } of adjacencyMapToArray(adjacency)) {
      if (event.type !== 'call.requested') continue;
      const [next, actions] = transition(machine, state, event);
      expect(actions.some((action) => action.type === 'startUpstream')).toBe(false);
      expect(sentEventTypes(actions)).toEqual(['provider.rejected']);
      expect(Object.keys((next as ProviderSnapshot).context.leasing)).toEqual([]);
    }
  });
});
