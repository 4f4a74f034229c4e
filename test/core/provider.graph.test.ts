import { describe, expect, it } from 'vitest';
import { createActor, setup, transition, type ActorLogic, type SnapshotFrom } from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import { errorClasses, isCountedErrorClass, type ErrorClass } from '../../src/errors/index.js';
import { breakerMachine } from '../../src/machines/breaker.machine.js';
import { providerMachine, type ProviderEvent } from '../../src/actors/provider.machine.js';
import type { ProviderAnswer } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { sentEventTypes } from './graph-events.js';
import { request } from './gateway-harness.js';

type ProviderLogic = typeof providerMachine;
type ProviderSnapshot = SnapshotFrom<ProviderLogic>;

/**
 * Breaker stand-ins (XSTATE.md pitfall 3: spawned children are frozen during traversal, so the
 * provider is explored once per breaker situation instead of with a live breaker).
 */
function standIn(admitting: boolean): typeof breakerMachine {
  const logic = setup({}).createMachine({
    id: 'breaker',
    context: { retryAt: admitting ? null : 61_000 },
    initial: 'standIn',
    states: { standIn: { tags: admitting ? ['admitting'] : [] } },
  });
  // The provider reads only the `admitting` tag and `context.retryAt` of its breaker.
  return logic as unknown as typeof breakerMachine;
}

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
const upstreamClasses: readonly ErrorClass[] = errorClasses.filter(
  (errorClass) => errorClass !== 'circuit_open',
);

function payloadsFor(type: string): ProviderEvent[] {
  const at = 1_000;
  switch (type) {
    case 'call.requested':
      return callIds.map((callId) => ({ type, callId, request, apiKey, replyTo, validate, at }));
    case 'upstream.succeeded':
      return callIds.flatMap((callId) => [
        { type, callId, answer, verdict: { ok: true, value: {} }, durationMs: 5, at },
        {
          type,
          callId,
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
          failure: { errorClass, message: `graph ${errorClass}` },
          durationMs: 5,
          at,
        })),
      );
    case 'call.cancelled':
      return callIds.map((callId) => ({ type, callId, at }));
    case 'breaker.control':
      return (['reset', 'forceOpen', 'release'] as const).map((action) => ({ type, action, at }));
    default:
      return [];
  }
}

const eventTypes = [
  'call.requested',
  'upstream.succeeded',
  'upstream.failed',
  'call.cancelled',
  'breaker.control',
];
const events = () => eventTypes.flatMap(payloadsFor);

/** The bounded state key: which calls are in flight (stats only grow, so they stay out). */
function serializeState(snapshot: ProviderSnapshot): string {
  return JSON.stringify([snapshot.value, Object.keys(snapshot.context.pending).sort()]);
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
 */
function checkEveryEdge(logic: ProviderLogic): { states: number; edges: number; violations: Violation[] } {
  let states = 0;
  let edgeCount = 0;
  const violations: Violation[] = [];
  for (const [name, admitting] of [
    ['admitting', true],
    ['refusing', false],
  ] as const) {
    const machine = logic.provide({ actors: { breaker: standIn(admitting) } });
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
      const pending = 'callId' in event && event.callId in state.context.pending;
      const counted =
        event.type === 'upstream.failed' && isCountedErrorClass(event.failure.errorClass) && pending;
      if (failures !== (counted ? 1 : 0) || fleetFailures !== failures) {
        const detail =
          event.type === 'upstream.failed' ? `${event.type}(${event.failure.errorClass})` : event.type;
        violations.push({ breaker: name, event: detail, sent });
      }
    }
  }
  return { states, edges: edgeCount, violations };
}

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
      const pending = 'callId' in event && event.callId in state.context.pending;
      expect(starts).toBe(event.type === 'call.requested' ? 1 : 0);
      expect(aborts).toBe(event.type === 'call.cancelled' && pending ? 1 : 0);
      admitted += starts;
      cancelled += aborts;
    }
    expect(admitted).toBeGreaterThan(0);
    expect(cancelled).toBeGreaterThan(0);
  });

  it('sends the breaker a FAILURE exactly for provider-side classes, never for 401, 429 or any user-side class', () => {
    const { states, edges, violations } = checkEveryEdge(providerMachine);
    console.log(
      `provider graph: ${states} states, ${edges} edges over 2 breaker stand-ins; ${violations.length} violations`,
    );
    // Each stand-in: no call, c1, c2, or both in flight (the refusing breaker admits none).
    expect(states).toBe(5);
    expect(edges).toBe(185);
    expect(violations).toEqual([]);
  });

  it('catches the kept mutant that counts 429 as a provider failure', () => {
    const mutant = providerMachine.provide({
      guards: {
        isCountedFailure: ({ event }) =>
          event.type === 'upstream.failed' &&
          (isCountedErrorClass(event.failure.errorClass) || event.failure.errorClass === 'rate_limited'),
      },
    });
    const { violations } = checkEveryEdge(mutant);
    console.log(`mutant (429 counted): caught on ${violations.length} edges`);
    expect(violations.length).toBeGreaterThan(0);
    expect(violations.every((violation) => violation.event === 'upstream.failed(rate_limited)')).toBe(true);
  });

  it('never calls upstream while the breaker refuses: the request is answered provider.rejected', () => {
    const machine = providerMachine.provide({ actors: { breaker: standIn(false) } });
    const adjacency = adjacencyOf(machine);
    for (const { state, event } of adjacencyMapToArray(adjacency)) {
      if (event.type !== 'call.requested') continue;
      const [next, actions] = transition(machine, state, event);
      expect(actions.some((action) => action.type === 'startUpstream')).toBe(false);
      expect(sentEventTypes(actions)).toEqual(['provider.rejected']);
      expect(Object.keys((next as ProviderSnapshot).context.pending)).toEqual([]);
    }
  });
});
