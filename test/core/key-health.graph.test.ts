/**
 * Per-key health, over every edge of the key machine's graph and out of an attempt's key check. The oracle is written out here, not read from src:
 * - column K: `auth`, `permission` and `quota_exhausted` quarantine a key for KEY_QUARANTINE_MS (here
 *   10 000 ms); `rate_limited` cools it until the upstream's `Retry-After` (here 2 000 ms), else
 *   KEY_COOLING_MS (here 3 000 ms); every other class says nothing of the key;
 * - a class that says nothing of the key never refuses it nor moves its `until`;
 * - a refused key lets a call out only once `until` has passed, and then exactly one (its probe);
 * - asked `key.admit`, the key answers (`key.admitted`, or `key.refused` with its reason, class and
 *   `until` while refused and no probe is due) and changes nothing;
 * - in a call's attempt: every call is asked of the key book first; a call whose key is refused never
 *   reaches the network (no upstream call, no breaker event at all), and is answered
 *   `provider.keySkipped` with the key's reason.
 * Kept mutants (a table row that stops quarantining on 401, one that quarantines on a 5xx, a key that
 * admits every call, an attempt that forgets to ask the key book) turn it red.
 */
import { describe, expect, it } from 'vitest';
import { createActor, initialTransition, sendTo, setup, transition, type SnapshotFrom } from 'xstate';
import type { ErrorClass } from '../../src/errors/index.js';
import type { CallRequest } from '../../src/machines/call-request.js';
import {
  createKeyHealthMachine,
  keyHealthMachine,
  type KeyHealthEvent,
} from '../../src/machines/key-health.machine.js';
import { attemptMachine } from '../../src/machines/attempt.machine.js';
import { Secret } from '../../src/security/secret.js';
import { documentClasses, withRow } from './errors-md.js';
import { request } from './gateway-harness.js';
import { sentEventTypes } from './graph-events.js';

type KeyMachine = typeof keyHealthMachine;
type KeySnapshot = SnapshotFrom<KeyMachine>;

const quarantineMs = 10_000;
const coolingMs = 3_000;
const retryAfterMs = 2_000;
const keyInput = { keyId: 'key-1', quarantineMs, coolingMs };

// prettier-ignore
/** Column K as docs/api.md and the issue state it: what each class does to the caller's key. */
const keyColumn: Readonly<Record<ErrorClass, 'quarantine' | 'cool' | 'none'>> = {
  auth: 'quarantine', permission: 'quarantine', quota_exhausted: 'quarantine', rate_limited: 'cool',
  bad_request: 'none', context_too_long: 'none', not_found: 'none', server_error: 'none', overloaded: 'none',
  timeout: 'none', connection: 'none', aborted: 'none', invalid_output: 'none', circuit_open: 'none',
};

const stateName = (snapshot: KeySnapshot): 'healthy' | 'quarantined' | 'cooling' =>
  snapshot.matches('healthy') ? 'healthy' : snapshot.matches('quarantined') ? 'quarantined' : 'cooling';

/** Two times: a refusal made at the first has ended by the second (so its probe is due), not the reverse. */
const times = [100_000, 100_000 + quarantineMs + coolingMs];

const replyTo = createActor(setup({}).createMachine({}));
const apiKey = new Secret('test-claude-key-health');
const validate = () => ({ ok: true as const, value: {} });
const callOf = (callId: string, keyId: string, at: number): CallRequest => ({
  callId,
  request,
  apiKey,
  keyId,
  replyTo,
  validate,
  at,
});

function events(snapshot: KeySnapshot): KeyHealthEvent[] {
  const ids = snapshot.context.probeCallId === null ? ['other'] : [snapshot.context.probeCallId, 'other'];
  return times.flatMap((at): KeyHealthEvent[] => [
    { type: 'key.admit', call: callOf('asked', 'key-1', at), replyTo, at },
    { type: 'key.called', callId: 'probe', at },
    ...ids.flatMap((callId): KeyHealthEvent[] => [
      { type: 'key.answered', callId, at },
      ...documentClasses.map((errorClass): KeyHealthEvent => ({
        type: 'key.failed',
        callId,
        errorClass,
        at,
      })),
      { type: 'key.failed', callId, errorClass: 'rate_limited', retryAfterMs, at },
    ]),
  ]);
}

const key = (snapshot: KeySnapshot): string =>
  JSON.stringify([
    snapshot.value,
    snapshot.context.errorClass,
    snapshot.context.until,
    snapshot.context.probeCallId,
  ]);

interface Edge {
  readonly state: KeySnapshot;
  readonly event: KeyHealthEvent;
  readonly next: KeySnapshot;
  readonly actions: readonly { type: string; params?: unknown }[];
}

/** Every edge reachable from a healthy key (breadth first, bounded so a runaway mutant ends too). */
function edgesOf(machine: KeyMachine, maxStates = 400): { states: number; edges: Edge[] } {
  const [initial] = initialTransition(machine, keyInput);
  const seen = new Set([key(initial)]);
  const queue = [initial];
  const edges: Edge[] = [];
  while (queue.length > 0 && seen.size <= maxStates) {
    const state = queue.shift()!;
    for (const event of events(state)) {
      const [next, actions] = transition(machine, state, event);
      edges.push({ state, event, next, actions });
      if (!seen.has(key(next))) {
        seen.add(key(next));
        queue.push(next);
      }
    }
  }
  return { states: seen.size, edges };
}

/** The oracle's judgement of one edge: a list of what went wrong (empty when right). */
function violationsOf({ state, event, next, actions }: Edge): string[] {
  const wrong: string[] = [];
  const before = stateName(state);
  const after = stateName(next);
  const label = `${JSON.stringify(state.value)} --${event.type}${'errorClass' in event ? `(${event.errorClass})` : ''}@${event.at}`;
  if (event.type === 'key.failed' && keyColumn[event.errorClass] === 'none') {
    // Says nothing of the key: never refuses it, never moves `until`.
    if (before === 'healthy' && after !== 'healthy')
      wrong.push(`${label}: refused a key on a class that says nothing of it`);
    if (
      next.context.until !== null &&
      state.context.until !== null &&
      next.context.until !== state.context.until
    )
      wrong.push(`${label}: moved until`);
  }
  if (event.type === 'key.failed' && before === 'healthy') {
    const column = keyColumn[event.errorClass];
    if (
      column === 'quarantine' &&
      (after !== 'quarantined' || next.context.until !== event.at + quarantineMs)
    )
      wrong.push(`${label}: not quarantined for KEY_QUARANTINE_MS`);
    const cooledFor = event.retryAfterMs ?? coolingMs;
    if (column === 'cool' && (after !== 'cooling' || next.context.until !== event.at + cooledFor))
      wrong.push(`${label}: not cooling until Retry-After (or KEY_COOLING_MS)`);
  }
  if (event.type === 'key.called' && before !== 'healthy') {
    const due = state.context.until !== null && event.at >= state.context.until;
    const probing = state.context.probeCallId !== null;
    const letThrough = next.context.probeCallId === event.callId && !probing;
    // The key lets one call out once `until` has passed, and only one.
    if (letThrough !== (due && !probing))
      wrong.push(`${label}: probe admission wrong (due ${due}, probing ${probing})`);
  }
  if (event.type === 'key.admit') {
    // Answered, never changed: the probe is taken when the call starts (`key.called`).
    if (key(next) !== key(state)) wrong.push(`${label}: an admission changed the key`);
    const answers = sentEvents(actions);
    const due = state.context.until !== null && event.at >= state.context.until;
    const probing = state.context.probeCallId !== null;
    const refused = before !== 'healthy' && !(due && !probing);
    const expected: Record<string, unknown> = refused
      ? {
          type: 'key.refused',
          call: event.call,
          reason: before === 'quarantined' ? 'key_quarantined' : 'key_cooling',
          errorClass: state.context.errorClass,
          until: state.context.until,
        }
      : { type: 'key.admitted', call: event.call };
    const [answer, ...more] = answers;
    const same =
      answer !== undefined &&
      more.length === 0 &&
      Object.keys(answer).length === Object.keys(expected).length &&
      Object.entries(expected).every(([field, value]) => answer[field] === value);
    if (!same)
      wrong.push(`${label}: answered ${answers.map((sent) => String(sent['type'])).join(',')}, not ${String(expected['type'])}`);
  }
  if (event.type === 'key.answered' && before !== 'healthy') {
    const isProbe = event.callId === state.context.probeCallId;
    if ((after === 'healthy') !== isProbe)
      wrong.push(
        `${label}: ${isProbe ? 'probe success kept refusing' : 'a non-probe success healed the key'}`,
      );
  }
  return wrong;
}

/** The events a transition's `sendTo` actions send (the key's answers to `key.admit`). */
function sentEvents(actions: readonly { type: string; params?: unknown }[]): Record<string, unknown>[] {
  return actions
    .filter((action) => action.type === 'xstate.sendTo')
    .map((action) => (action.params as { event: Record<string, unknown> }).event);
}

function check(machine: KeyMachine): { states: number; edges: number; violations: string[] } {
  const { states, edges } = edgesOf(machine);
  return { states, edges: edges.length, violations: edges.flatMap(violationsOf) };
}

describe('key health, over every edge of its graph', () => {
  it('refuses a key exactly on column K, for the right period, and lets one probe out once until has passed', () => {
    const { states, edges, violations } = check(keyHealthMachine);
    console.log(`key health graph: ${states} states, ${edges} edges; ${violations.length} violations`);
    // Healthy, and each refusal (class, until) waiting or probing, over two times: bounded. Each state
    // takes per time one admission, one call, and one answer and 14 failures per call id (1 or 2 ids).
    expect(states).toBe(22);
    expect(edges).toBe(952);
    expect(violations).toEqual([]);
  });

  it('reaches every state: healthy, quarantined and cooling, waiting and probing', () => {
    const { edges } = edgesOf(keyHealthMachine);
    const values = new Set(edges.map(({ next }) => JSON.stringify(next.value)));
    expect([...values].sort()).toEqual(
      [
        '"healthy"',
        '{"cooling":"probing"}',
        '{"cooling":"waiting"}',
        '{"quarantined":"probing"}',
        '{"quarantined":"waiting"}',
      ].sort(),
    );
  });

  it.each([
    ['auth', { key: 'none' }],
    ['rate_limited', { key: 'quarantine' }],
    ['server_error', { key: 'quarantine' }],
    ['timeout', { key: 'cool' }],
  ] as const)('goes red on the kept mutant whose table row for %s changes column K', (errorClass, change) => {
    const { violations } = check(createKeyHealthMachine(withRow(errorClass, change)));
    console.log(`mutant (${errorClass} → ${change.key}): caught on ${violations.length} edges`);
    expect(violations.length).toBeGreaterThan(0);
  });

  it('goes red on the kept mutant key that answers every admission key.admitted', () => {
    const mutant = keyHealthMachine.provide({
      actions: {
        refuseCall: sendTo(
          ({ event }) => (event as Extract<KeyHealthEvent, { type: 'key.admit' }>).replyTo,
          ({ event }) => ({ type: 'key.admitted', call: (event as Extract<KeyHealthEvent, { type: 'key.admit' }>).call }),
        ),
      },
    });
    const { violations } = check(mutant);
    expect(violations.length).toBeGreaterThan(0);
    expect(violations.every((violation) => violation.includes('key.admit'))).toBe(true);
  });

  it('goes red on the kept mutant whose refusal lets every call out (no probe limit)', () => {
    const mutant = keyHealthMachine.provide({ guards: { isUntilPassed: () => true } });
    expect(check(mutant).violations.length).toBeGreaterThan(0);
  });
});

// A call's attempt asks the key book by message: its answers (`key.admitted`, `key.refused`, which the key
// graph above proves) are events here, so no key book stand-in is needed: one key quarantined until
// 61 000, one cooling until 61 000, one healthy.
const until = 61_000;
const keyIds = ['key-quarantined', 'key-cooling', 'key-healthy'];
const refusals: Readonly<Record<string, { reason: 'key_quarantined' | 'key_cooling'; errorClass: ErrorClass }>> = {
  'key-quarantined': { reason: 'key_quarantined', errorClass: 'quota_exhausted' },
  'key-cooling': { reason: 'key_cooling', errorClass: 'rate_limited' },
};
const sink = createActor(setup({}).createMachine({}));

type AttemptLogic = typeof attemptMachine;

function attemptInput(call: CallRequest) {
  return {
    providerId: 'claude' as const,
    owner: sink,
    call,
    timings: { deadlineMs: 60_000, firstTokenTimeoutMs: 30_000, streamIdleTimeoutMs: 20_000 },
    keyBook: sink,
    breaker: sink,
    fleetLink: sink,
  };
}

/**
 * Every call is asked of the key book first, and of nothing else; a refused key's call reaches neither
 * the network nor the breaker and is answered `provider.keySkipped`; an admitted one is asked of the breaker.
 */
function networkViolations(machine: AttemptLogic): { checked: number; violations: string[] } {
  let checked = 0;
  const violations: string[] = [];
  for (const [index, keyId] of keyIds.entries()) {
    for (const at of [1_000, until + 1]) {
      const call = callOf(`c${index}`, keyId, at);
      const where = `${keyId}@${at}`;
      const [start, first] = initialTransition(machine, attemptInput(call));
      const asked = sentEventTypes(first);
      if (JSON.stringify(asked) !== JSON.stringify(['key.admit'])) violations.push(`${where}: asked ${asked.join(',')}, not the key book alone`);
      const admitted = transition(machine, start, { type: 'key.admitted', call });
      if (!sentEventTypes(admitted[1]).includes('breaker.admit')) violations.push(`${where}: an admitted key was not asked of the breaker`);
      const refusal = refusals[keyId];
      if (refusal === undefined) continue;
      checked += 1;
      const [next, actions] = transition(machine, start, { type: 'key.refused', call, ...refusal, until });
      const sent = sentEventTypes(actions);
      if (next.matches('calling') || sent.includes('breaker.admit')) violations.push(`${where}: upstream call started`);
      if (!sent.includes('provider.keySkipped')) violations.push(`${where}: not answered keySkipped`);
      const breakerEvents = sent.filter((type) => type.startsWith('call.') || type.startsWith('breaker.') || type.startsWith('fleet:'));
      if (breakerEvents.length > 0) violations.push(`${where}: breaker heard ${breakerEvents.join(',')}`);
    }
  }
  return { checked, violations };
}

describe("a call's attempt with refused keys, over every edge out of its key check", () => {
  const machine = attemptMachine;

  it('asks the key book first; never lets a refused key reach the network, nor the breaker; an admitted key goes on', () => {
    const { checked, violations } = networkViolations(machine);
    console.log(`attempt with refused keys: ${checked} refused calls checked; ${violations.length} violations`);
    expect(checked).toBe(4);
    expect(violations).toEqual([]);
  });

  it('answers the key reason, the class that refused it and its until', () => {
    const reasons = ['key-quarantined', 'key-cooling'].map((keyId) => {
      const call = callOf('c1', keyId, 1_000);
      const [state] = initialTransition(machine, attemptInput(call));
      const [, actions] = transition(machine, state, { type: 'key.refused', call, ...refusals[keyId]!, until });
      const reply = actions.find((action) => action.type === 'xstate.sendTo')?.params as
        { event: { type: string; reason: string; errorClass: string; until: number } } | undefined;
      return reply?.event;
    });
    expect(reasons).toEqual([
      expect.objectContaining({ type: 'provider.keySkipped', reason: 'key_quarantined', errorClass: 'quota_exhausted', until }),
      expect.objectContaining({ type: 'provider.keySkipped', reason: 'key_cooling', errorClass: 'rate_limited', until }),
    ]);
  });

  it('goes red on the kept mutant attempt that never asks the key book (it asks the breaker straight away)', () => {
    const mutant = machine.provide({
      actions: {
        askKeyBook: sendTo(
          ({ context }) => context.input.breaker,
          ({ context, self }) => ({ type: 'breaker.admit' as const, call: context.input.call, replyTo: self, leased: false, at: context.input.call.at }),
        ),
      },
    });
    expect(networkViolations(mutant).violations.length).toBeGreaterThan(0);
  });

  it('goes red on the kept mutant attempt that asks the breaker on a refused key', () => {
    const mutant = machine.provide({
      actions: {
        replySkipped: sendTo(
          ({ context }) => context.input.breaker,
          ({ context, self }) => ({ type: 'breaker.admit' as const, call: context.input.call, replyTo: self, leased: false, at: context.input.call.at }),
        ),
      },
    });
    expect(networkViolations(mutant).violations.length).toBeGreaterThan(0);
  });
});
