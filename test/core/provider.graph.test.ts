/**
 * Column B over every edge, and the provider as the owner it is. The attempt (one call's whole path,
 * attempt.machine.ts) is walked over every edge with every upstream class: a user-side class, an invalid
 * answer or a cancel never sends the breaker a FAILURE (`call.failed`), a provider-side class sends exactly
 * one, and the fleet hears exactly what the breaker hears. The provider is walked too: one state, and no
 * edge of it carries a step of a call (no key, breaker or lease question is ever its own); its counters
 * follow column B. "Provider-side" is docs/errors.md's column B as written in errors-md.ts, not the code's table.
 */
import { describe, expect, it } from 'vitest';
import {
  createActor,
  fromCallback,
  setup,
  transition,
  type ActorLogic,
  type AnyActorRef,
  type SnapshotFrom,
} from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import type { ErrorClass, ErrorTable } from '../../src/errors/index.js';
import {
  createAttemptMachine,
  UpstreamFailure,
  type AttemptEnded,
  type AttemptEvent,
  type AttemptInput,
} from '../../src/machines/attempt.machine.js';
import type { CallRequest } from '../../src/machines/call-request.js';
import {
  createProviderMachine,
  providerMachine,
  type ProviderEvent,
} from '../../src/machines/provider.machine.js';
import type { CallRecord, ProviderAnswer } from '../../src/machines/types.js';
import { Secret } from '../../src/security/secret.js';
import { documentClasses, errorsMd, withRow } from './errors-md.js';
import { eventsFrom, sentEventTypes } from './graph-events.js';
import { request } from './gateway-harness.js';
import { errorPolicy } from '../../src/errors/index.js';

const sink: AnyActorRef = createActor(setup({}).createMachine({}));
const apiKey = new Secret('test-claude-key-graph');
const at = 1_000;
const valid: ProviderAnswer = { text: '{}', model: 'claude-model', usage: { inputTokens: 1, outputTokens: 1 }, truncated: false };
const invalid: ProviderAnswer = { ...valid, text: 'not json' };
/** Valid exactly when the answer is `{}`: both branches of the verdict are walked. */
const validate = (answer: ProviderAnswer) =>
  answer.text === '{}' ? ({ ok: true, value: {} } as const) : ({ ok: false, errors: ['questions: expected array'] } as const);
const upstreamClasses: readonly ErrorClass[] = documentClasses.filter((errorClass) => errorClass !== 'circuit_open');
const call: CallRequest = { callId: 'c1', request, apiKey, keyId: 'key-1', replyTo: sink, validate, at };
const timings = { deadlineMs: 1000, firstTokenTimeoutMs: 400, streamIdleTimeoutMs: 100 };
const attemptInput: AttemptInput = { providerId: 'claude', owner: sink, call, timings, keyBook: sink, breaker: sink, fleetLink: sink };

function attemptPayloads(type: string): AttemptEvent[] {
  switch (type) {
    case 'key.admitted':
    case 'breaker.admitted':
    case 'breaker.leaseNeeded':
      return [{ type, call }];
    case 'key.refused':
      return [{ type, call, reason: 'key_quarantined', errorClass: 'auth', until: at + 60_000 }];
    case 'breaker.rejected':
      return [{ type, call, retryAt: at + 60_000 }];
    case 'probe.leased':
      return [true, false].map((granted) => ({ type, callId: 'c1', granted, at }));
    case 'breaker.admitting':
    case 'breaker.refusing':
      return [{ type }];
    case 'call.cancelled':
      return [{ type, at: at + 5 }];
    case 'upstream.delta':
      return [{ type, text: '{', pieces: 1, at: at + 2 }];
    case 'xstate.done.actor.upstream':
      return [valid, invalid].map((answer) => ({ type, output: { answer, at: at + 5 } }) as unknown as AttemptEvent);
    case 'xstate.error.actor.upstream':
      return upstreamClasses.map(
        (errorClass) =>
          ({ type, error: new UpstreamFailure({ errorClass, message: `graph ${errorClass}` }, at + 5) }) as unknown as AttemptEvent,
      );
    default:
      return type.startsWith('xstate.after.') ? [{ type } as unknown as AttemptEvent] : [];
  }
}

/** What class an edge ends the call in (undefined: the edge ends no call). */
function outcomeClass(event: AttemptEvent, nextValue: unknown): ErrorClass | 'succeeded' | undefined {
  if (event.type === 'xstate.done.actor.upstream' as string) {
    const { output } = event as unknown as { output: { answer: ProviderAnswer } };
    return output.answer.text === '{}' ? 'succeeded' : 'invalid_output';
  }
  if (event.type === 'xstate.error.actor.upstream' as string)
    return ((event as unknown as { error: UpstreamFailure }).error.failure.errorClass);
  // The call's own clocks (the deadline of a withdrawn call waiting for the fleet's answer ends no call).
  if (event.type.startsWith('xstate.after.') && event.type.includes('.attempt.calling')) return 'timeout';
  if (event.type === 'call.cancelled' && nextValue === 'aborted') return 'aborted';
  return undefined;
}

interface Violation {
  readonly event: string;
  readonly sent: readonly string[];
}

/**
 * The attempt is walked without a parent: the replies to the caller (their last step tells the provider)
 * are named no-ops; every message to the breaker, the fleet and the key is kept.
 */
function walkable(table: ErrorTable) {
  const noop = () => undefined;
  return createAttemptMachine(table).provide({
    actions: { replyFailed: noop, replyRejected: noop, replySkipped: noop, endWithdrawn: noop },
  });
}

function checkEveryEdge(table: ErrorTable): { states: number; edges: number; violations: Violation[] } {
  const machine = walkable(table);
  const adjacency = getAdjacencyMap(machine, {
    input: attemptInput,
    events: (snapshot) => eventsFrom(snapshot, attemptPayloads),
    serializeState: (snapshot) => `${JSON.stringify(snapshot.value)}|${snapshot.context.leased}|${snapshot.context.chunks > 0}`,
  });
  const edges = adjacencyMapToArray(adjacency);
  const violations: Violation[] = [];
  for (const { state, event, nextState } of edges) {
    const [, actions] = transition(machine, state, event);
    const sent = sentEventTypes(actions).filter((type) => type !== 'attempt.ended');
    const outcome = outcomeClass(event, nextState.value);
    const failures = sent.filter((type) => type === 'call.failed').length;
    const fleetFailures = sent.filter((type) => type === 'fleet:call.failed').length;
    const counted = outcome !== undefined && outcome !== 'succeeded' && errorsMd[outcome].B;
    const told = sent.filter((type) => ['call.failed', 'call.ignored', 'call.succeeded'].includes(type)).length;
    if (failures !== (counted ? 1 : 0) || fleetFailures !== failures || told !== (outcome === undefined ? 0 : 1))
      violations.push({ event: `${event.type}(${String(outcome)})`, sent });
  }
  return { states: Object.keys(adjacency).length, edges: edges.length, violations };
}

/** Every state by whether it is a leased probe and whether it streamed. */
const EXPECTED_STATES = 32;

describe('the attempt, over every edge, by column B', () => {
  it('sends the breaker a FAILURE exactly for provider-side classes, never for 401, 429 or any user-side class', () => {
    const { states, edges, violations } = checkEveryEdge(errorPolicy);
    console.log(`attempt graph: ${states} states, ${edges} edges; ${violations.length} violations`);
    expect(states).toBe(EXPECTED_STATES);
    expect(edges).toBe(107);
    expect(violations).toEqual([]);
  });

  it.each([
    ['auth', '401'],
    ['rate_limited', '429'],
    ['invalid_output', 'an invalid answer'],
    ['aborted', 'a cancel'],
  ] as const)('goes red on the kept mutant whose table row counts %s (%s)', (errorClass, _what) => {
    const { violations } = checkEveryEdge(withRow(errorClass, { breaker: 'counts' }));
    console.log(`mutant (${errorClass} counted): caught on ${violations.length} edges`);
    expect(violations.length).toBeGreaterThan(0);
  });

  it('goes red on the kept mutant whose table row stops counting timeout', () => {
    const { violations } = checkEveryEdge(withRow('timeout', { breaker: 'ignored' }));
    expect(violations.length).toBeGreaterThan(0);
    expect(violations.every((violation) => violation.event.endsWith('(timeout)'))).toBe(true);
  });
});

type ProviderLogic = typeof providerMachine;
type ProviderSnapshot = SnapshotFrom<ProviderLogic>;
const input = { providerId: 'claude' as const, model: 'claude-model', threshold: 5, recoveryMs: 60_000 };
const records: readonly (CallRecord | null)[] = [
  null,
  { provider: 'claude', outcome: 'succeeded', durationMs: 5 },
  { provider: 'claude', outcome: 'rejected', errorClass: 'circuit_open', durationMs: 0 },
  { provider: 'claude', outcome: 'skipped', errorClass: 'auth', durationMs: 0 },
  { provider: 'claude', outcome: 'aborted', errorClass: 'aborted', durationMs: 5 },
  ...upstreamClasses.map((errorClass): CallRecord => ({ provider: 'claude', outcome: 'failed', errorClass, durationMs: 5 })),
];

function providerPayloads(type: string): ProviderEvent[] {
  switch (type) {
    case 'call.requested':
      return [{ type, ...call }];
    case 'call.cancelled':
      return [{ type, callId: 'c1', at }];
    case 'attempt.ended':
      return records.map((record) => ({ type, callId: 'c1', record }));
    case 'breaker.control':
      return (['reset', 'forceOpen', 'release'] as const).map((action) => ({ type, action, at }));
    case 'breaker.keyStreak':
      return [{ type, keyId: 'key-1', errorClass: 'server_error', at }];
    default:
      return [];
  }
}

/**
 * An attempt is spawned under the system id `attempt.<callId>`; the graph's pure transitions share one
 * inert system, where the same id would be registered twice, so `startAttempt` is explored by name (the
 * spawn itself runs in attempt.graph.test.ts and gateway.test.ts).
 */
const explorable = providerMachine.provide({ actions: { startAttempt: () => undefined } });

describe('the provider, over every edge of its graph', () => {
  const logic = explorable as unknown as ActorLogic<ProviderSnapshot, ProviderEvent, typeof input>;
  const events = () =>
    ['call.requested', 'call.cancelled', 'attempt.ended', 'breaker.control', 'breaker.keyStreak'].flatMap(
      providerPayloads,
    );
  const adjacency = getAdjacencyMap(logic, { input, events, serializeState: (snapshot) => JSON.stringify(snapshot.value) });
  const edges = adjacencyMapToArray(adjacency);

  it('is one state that carries no step of a call: it never asks the key book, the breaker or the fleet for a call', () => {
    expect(Object.keys(adjacency)).toHaveLength(1);
    expect(edges.length).toBe(1 + 1 + records.length + 3 + 1);
    for (const { state, event } of edges) {
      const [, actions] = transition(explorable, state, event);
      const sent = sentEventTypes(actions);
      expect(sent.filter((type) => ['key.admit', 'key.called', 'breaker.admit', 'probe.requested'].includes(type))).toEqual([]);
      if (event.type === 'call.requested') {
        expect(actions.map((action) => action.type)).toEqual(['startAttempt']);
        expect((actions[0]?.params as CallRequest).callId).toBe('c1');
      }
    }
  });

  it('stops an ended attempt, counts its record and tells the listeners (a withdrawn one has nothing to count)', () => {
    for (const { state, event } of edges) {
      if (event.type !== 'attempt.ended') continue;
      const [next, actions] = transition(explorable, state, event);
      const types: string[] = actions.map((action) => action.type);
      expect(types.filter((type) => type === 'xstate.stopChild')).toHaveLength(1);
      // Counted: one of the counters moved on (a skip moves none), never for a withdrawn attempt.
      const moved = Object.entries(next.context.stats).filter(([name, value]) => value !== state.context.stats[name as keyof typeof state.context.stats]);
      expect(moved.length).toBeLessThanOrEqual(event.record === null || event.record.outcome === 'skipped' ? 0 : 2);
      if (event.record !== null && event.record.outcome !== 'skipped') expect(moved.length).toBeGreaterThan(0);
      expect(types.filter((type) => type === 'xstate.emit')).toHaveLength(event.record === null ? 0 : 1);
    }
  });
});

describe("the provider's counters, by column B", () => {
  /** A provider whose attempts end at once with the record the test gives them. */
  function counted(table: ErrorTable, ended: readonly CallRecord[]) {
    let next = 0;
    const attempt = fromCallback<AttemptEvent, AttemptInput>(({ input: given, sendBack }) => {
      const record = ended[next] ?? null;
      next += 1;
      sendBack({ type: 'attempt.ended', callId: given.call.callId, record } satisfies AttemptEnded);
    });
    const machine = createProviderMachine(table).provide({
      actors: { attempt: attempt as unknown as ReturnType<typeof createAttemptMachine> },
    });
    const provider = createActor(machine, { input }).start();
    ended.forEach((_, i) => provider.send({ type: 'call.requested', ...call, callId: `c${i}` }));
    const { stats, breaker: _breaker } = provider.getSnapshot().context;
    provider.stop();
    return stats;
  }

  it('counts each call once: a provider-side class a failure, any other class ignored, refusals apart, skips nowhere', () => {
    const failed = upstreamClasses.filter((errorClass) => errorClass !== 'invalid_output' && errorClass !== 'aborted');
    const stats = counted(errorPolicy, records.filter((record): record is CallRecord => record !== null));
    const providerSide = failed.filter((errorClass) => errorsMd[errorClass].B).length;
    expect(stats).toEqual({
      calls: 1 + 1 + upstreamClasses.length,
      successes: 1,
      failures: providerSide,
      // the cancel, and every class column B does not count (invalid_output and aborted among them)
      ignored: 1 + upstreamClasses.length - providerSide,
      rejected: 1,
      opens: 0,
    });
  });

  it('goes red on the kept mutant whose table row counts auth', () => {
    const stats = counted(withRow('auth', { breaker: 'counts' }), [
      { provider: 'claude', outcome: 'failed', errorClass: 'auth', durationMs: 5 },
    ]);
    expect(stats.failures).toBe(1);
    expect(errorsMd.auth.B).toBe(false);
  });
});
