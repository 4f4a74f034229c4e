/**
 * The breaker's graph test with Redis: the breaker machine is the model, and the system under test is
 * two instances sharing one fleet breaker through the real Redis (REDIS_TEST_URL), each with its own
 * breaker actor, fleet link and connections. For every edge of the model's graph, the shortest path to
 * the edge's source and then the edge is walked, the events dealt to the two instances in turn (a
 * probe's result goes to the instance that admitted it), and after every step both instances and the
 * record in Redis must show the model's state: its state, count, openings and open period, a probe held
 * exactly when the model holds one (with its lease), and every admission answered as the model answers.
 * So the fleet behaves as one breaker, decided by the machine, whichever instance hears what.
 */
import { describe, expect, it } from 'vitest';
import { getNextTransitions, initialTransition, transition, type SnapshotFrom } from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap } from 'xstate/graph';
import { breakerMachine, type BreakerEvent } from '../../src/machines/breaker.machine.js';
import { admit } from '../core/breaker-admit.js';
import { startFleetPair, type FleetPair, type PairInstance } from './fleet-pair.js';
import { redisTestUrl, uniquePrefix } from './support.js';

type BreakerSnapshot = SnapshotFrom<typeof breakerMachine>;

const recoveryMs = 1000;
/** A failed probe doubles the open period once, to the cap: both periods are in the graph. */
const settings = { threshold: 2, recoveryMs, maxRecoveryMs: 2 * recoveryMs, minDistinctKeys: 1 };
const input = { providerId: 'claude', ...settings };
/** The model's time: it only orders events here (the walk's time is the instances' own). */
const modelAt = 1_000;
const startAt = 1_800_000_000_000;

/** Results come from the held probe (when there is one) and from some other call. */
function callIds(snapshot: BreakerSnapshot): string[] {
  return snapshot.context.probeCallId === null ? ['other'] : [snapshot.context.probeCallId, 'other'];
}

/** One payload per event type (one counted class, one ignored), and the machine's delayed event. */
function events(snapshot: BreakerSnapshot): BreakerEvent[] {
  const delayed = [...new Set(getNextTransitions(snapshot).map((t) => t.eventType))]
    .filter((type) => type.startsWith('xstate.after'))
    .map((type) => ({ type }) as unknown as BreakerEvent);
  return [
    admit('probe', modelAt),
    ...callIds(snapshot).flatMap((callId): BreakerEvent[] => [
      { type: 'call.succeeded', callId, at: modelAt },
      { type: 'call.failed', callId, errorClass: 'server_error', keyId: 'key-a', at: modelAt },
      { type: 'call.ignored', callId, errorClass: 'rate_limited', at: modelAt },
    ]),
    { type: 'breaker.reset', at: modelAt },
    { type: 'breaker.forceOpen', at: modelAt },
    { type: 'breaker.release', at: modelAt },
    ...delayed,
  ];
}

function serializeState(snapshot: BreakerSnapshot): string {
  const { consecutiveFailures, probeCallId, openPeriodMs } = snapshot.context;
  return JSON.stringify([snapshot.value, consecutiveFailures, probeCallId, openPeriodMs]);
}

const adjacency = getAdjacencyMap(breakerMachine, { input, events, serializeState });
const edges = adjacencyMapToArray(adjacency);

/** For every edge: the shortest event sequence to its source (breadth first), then its event. */
function edgeCover(): BreakerEvent[][] {
  const [initial] = initialTransition(breakerMachine, input);
  const reach = new Map<string, BreakerEvent[]>([[serializeState(initial), []]]);
  const queue = [serializeState(initial)];
  while (queue.length > 0) {
    const key = queue.shift()!;
    for (const { state, event, nextState } of edges) {
      const next = serializeState(nextState);
      if (serializeState(state) !== key || reach.has(next)) continue;
      reach.set(next, [...reach.get(key)!, event]);
      queue.push(next);
    }
  }
  return edges.map(({ state, event }) => [...(reach.get(serializeState(state)) ?? []), event]);
}

const paths = edgeCover();

/** The state's name as the service shows it: half-open whether or not its probe is out. */
function nameOf(value: unknown): string {
  return typeof value === 'string' ? value : (Object.keys(value as object)[0] ?? '?');
}

/** What must hold once a step settled (an empty list: all of it), for both instances and Redis. */
async function mismatches(pair: FleetPair, model: BreakerSnapshot): Promise<string[]> {
  const found: string[] = [];
  const expected = {
    state: nameOf(model.value),
    consecutiveFailures: model.context.consecutiveFailures,
    opens: model.context.opens,
    openPeriodMs: model.context.openPeriodMs,
  };
  pair.instances.forEach((instance, index) => {
    const { value, context } = instance.breaker();
    const seen = {
      state: nameOf(value),
      consecutiveFailures: context.consecutiveFailures,
      opens: context.opens,
      openPeriodMs: context.openPeriodMs,
    };
    if (JSON.stringify(seen) !== JSON.stringify(expected))
      found.push(`instance ${index}: ${JSON.stringify(seen)}`);
  });
  const { record, lease } = await pair.stored();
  const probing = model.matches({ halfOpen: 'probing' });
  if (record === null) {
    // Nothing written yet: the fleet breaker is still the initial one.
    if (expected.state !== 'closed' || expected.consecutiveFailures !== 0) found.push('Redis: no record');
  } else {
    const { value, context } = record.snapshot;
    const stored = {
      state: nameOf(value),
      consecutiveFailures: context.consecutiveFailures,
      opens: context.opens,
      openPeriodMs: context.openPeriodMs,
    };
    // Half-open by time alone: Redis still holds `open` with its delayed event due (no write since).
    const dueOpen =
      expected.state === 'halfOpen' &&
      !probing &&
      stored.state === 'open' &&
      Number(context.retryAt) <= pair.now();
    const wanted = dueOpen ? { ...expected, state: 'open' } : expected;
    if (JSON.stringify(stored) !== JSON.stringify(wanted)) found.push(`Redis: ${JSON.stringify(stored)}`);
    const storedProbe =
      nameOf(value) === 'halfOpen' && JSON.stringify(value).includes('probing') ? context.probeCallId : null;
    if (storedProbe !== (probing ? 'probe' : null)) found.push(`Redis probe: ${String(storedProbe)}`);
  }
  if ((lease?.startsWith('probe|') ?? false) !== probing) found.push(`lease: ${String(lease)}`);
  return found;
}

async function settled(pair: FleetPair, model: BreakerSnapshot, step: string): Promise<void> {
  const deadline = Date.now() + 3000;
  for (;;) {
    const found = await mismatches(pair, model);
    if (found.length === 0) return;
    if (Date.now() > deadline)
      expect.fail(
        `after ${step}, model ${JSON.stringify(model.value)} ${model.context.consecutiveFailures}: ${found.join('; ')}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

async function answered(instance: PairInstance): Promise<string> {
  const deadline = Date.now() + 3000;
  while (instance.admission() === null) {
    if (Date.now() > deadline) return 'no answer';
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return instance.admission() ?? 'no answer';
}

/** The model's answer to an admission, as it sends it. */
function modelAnswer(actions: readonly { type: string; params?: unknown }[]): string {
  const sent = actions
    .filter((action) => action.type === 'xstate.sendTo')
    .map((action) => (action.params as { event?: { type?: string } }).event?.type);
  if (sent.includes('breaker.admitted')) return 'admitted';
  if (sent.includes('breaker.rejected')) return 'rejected';
  return 'none';
}

async function walk(path: readonly BreakerEvent[]): Promise<void> {
  const pair = await startFleetPair(redisTestUrl, uniquePrefix('fleet-graph'), settings, startAt);
  try {
    // Both links have reconciled with the (empty) fleet: the fleet decides from here.
    const deadline = Date.now() + 3000;
    while (!pair.instances.every((instance) => instance.breaker().context.shared)) {
      if (Date.now() > deadline) expect.fail('the links did not share the fleet breaker');
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    let [model] = initialTransition(breakerMachine, input);
    let prober = 0;
    for (const [index, event] of path.entries()) {
      const [next, actions] = transition(breakerMachine, model, event);
      const step = `step ${index + 1} ${event.type}${'callId' in event ? ` ${event.callId}` : ''} of ${path.map((e) => e.type).join(' → ')}`;
      pair.advance(1);
      const isProbe = 'callId' in event && event.callId === model.context.probeCallId;
      const by = isProbe ? prober : index % 2;
      const instance = pair.instances[by]!;
      if (event.type === 'breaker.admit') {
        instance.admit('probe');
        expect(await answered(instance), step).toBe(modelAnswer(actions));
        if (next.matches({ halfOpen: 'probing' })) prober = by;
      } else if (event.type.startsWith('xstate.after')) {
        const retryAt = instance.breaker().context.retryAt ?? pair.now();
        pair.advance(Math.max(0, retryAt - pair.now()));
      } else {
        instance.report({ ...event, at: pair.now() } as BreakerEvent);
      }
      await settled(pair, next, step);
      model = next;
    }
  } finally {
    await pair.stop();
  }
}

describe('the fleet breaker on Redis follows the breaker machine on every edge of its graph', () => {
  it('explores the graph it walks', () => {
    // closed × 0..1 failures; open, half-open awaiting and probing × the two open periods; forced open × 0..2
    // failures, and × the grown period after a failed probe.
    expect(Object.keys(adjacency)).toHaveLength(12);
    expect(edges).toHaveLength(92);
    expect(paths).toHaveLength(92);
  });

  it('two instances sharing one breaker through Redis show the model after every step', async () => {
    const start = performance.now();
    let steps = 0;
    for (const path of paths) {
      await walk(path);
      steps += path.length;
    }
    console.log(
      `fleet graph: ${paths.length} paths, ${steps} steps on two instances in ${(performance.now() - start).toFixed(0)} ms`,
    );
  }, 300_000);
});
