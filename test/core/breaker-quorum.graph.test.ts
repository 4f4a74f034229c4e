/**
 * The quorum before a provider is declared down (so one bad key cannot open it), over the breaker's graph
 * explored
 * together with an oracle of its own. The rule is written out here, not read from src (neither the
 * quorum rule nor the machine's `streakKeys` is consulted):
 * - a streak is the counted failures since the breaker last closed, a success while closed, or a reset;
 * - the breaker opens from closed on a counted failure only when the streak has reached the threshold
 *   (here 2) AND its failures come from at least BREAKER_MIN_DISTINCT_KEYS distinct keys (here 2, and
 *   3 in a second run); it does open then;
 * - a counted failure that reaches the threshold with fewer keys leaves the breaker closed and reports
 *   `breaker.keyStreak` for the failing key (that key gets its own circuit);
 * - the breaker never keeps more key ids than the quorum.
 * Kept mutants (the seeds' rule without the quorum, a key counted twice, keys kept across a success,
 * no key streak reported) turn it red.
 */
import { admit } from './breaker-admit.js';
import { describe, expect, it } from 'vitest';
import { assign, getNextTransitions, initialTransition, transition, type SnapshotFrom } from 'xstate';
import { breakerMachine, type BreakerEvent } from '../../src/machines/breaker.machine.js';

type AnyBreaker = typeof breakerMachine;
type BreakerSnapshot = SnapshotFrom<AnyBreaker>;

const threshold = 2;
const keys = ['key-a', 'key-b', 'key-c'] as const;
const at = 50_000;

/** The oracle's streak: its own count and the set of keys that failed in it (unbounded). */
interface Streak {
  readonly count: number;
  readonly keys: ReadonlySet<string>;
}
const noStreak: Streak = { count: 0, keys: new Set() };

/** Every event the breaker hears from its provider (operators: reset), delayed ones from the graph. */
function events(snapshot: BreakerSnapshot): BreakerEvent[] {
  const ids = snapshot.context.probeCallId === null ? ['other'] : [snapshot.context.probeCallId, 'other'];
  const delayed = [...new Set(getNextTransitions(snapshot).map((t) => t.eventType))]
    .filter((type) => type.startsWith('xstate.after'))
    .map((type) => ({ type }) as BreakerEvent);
  return [
    admit('probe', at),
    ...ids.flatMap((callId): BreakerEvent[] => [
      { type: 'call.succeeded', callId, at },
      ...keys.map((keyId): BreakerEvent => ({
        type: 'call.failed',
        callId,
        errorClass: 'timeout',
        keyId,
        at,
      })),
      { type: 'call.ignored', callId, errorClass: 'rate_limited', at },
    ]),
    { type: 'breaker.reset', at },
    ...delayed,
  ];
}

interface Edge {
  readonly state: BreakerSnapshot;
  readonly streak: Streak;
  readonly event: BreakerEvent;
  readonly next: BreakerSnapshot;
  /** Key ids the transition reported in `breaker.keyStreak`. */
  readonly reported: readonly string[];
}

const keyOf = (snapshot: BreakerSnapshot, streak: Streak): string =>
  JSON.stringify([
    snapshot.value,
    snapshot.context.consecutiveFailures,
    snapshot.context.probeCallId,
    snapshot.context.streakKeys,
    streak.count,
    [...streak.keys].sort(),
  ]);

/** The oracle's streak after `event` moved the breaker from `state` to `next`. */
function nextStreak(
  streak: Streak,
  state: BreakerSnapshot,
  event: BreakerEvent,
  next: BreakerSnapshot,
): Streak {
  if (event.type === 'breaker.reset' || !next.matches('closed')) return noStreak;
  if (!state.matches('closed')) return streak;
  if (event.type === 'call.succeeded') return noStreak;
  if (event.type === 'call.failed')
    return { count: streak.count + 1, keys: new Set([...streak.keys, event.keyId]) };
  return streak;
}

function reportedKeys(actions: readonly { type: string; params?: unknown }[]): string[] {
  return actions.flatMap((action) => {
    const emitted = (action.params as { event?: { type?: string; keyId?: string } } | undefined)?.event;
    return String(action.type) === 'xstate.emit' && emitted?.type === 'breaker.keyStreak' && emitted.keyId
      ? [emitted.keyId]
      : [];
  });
}

/**
 * Every edge of the breaker × oracle graph reachable from the start, breadth first. The count of a
 * streak below the quorum grows without end (the streak goes on), so the walk stops at `maxStates`.
 */
function edgesOf(machine: AnyBreaker, quorum: number, maxStates = 600): Edge[] {
  const [initial] = initialTransition(machine, {
    providerId: 'claude',
    threshold,
    recoveryMs: 1000,
    minDistinctKeys: quorum,
  });
  const seen = new Set([keyOf(initial, noStreak)]);
  const queue: [BreakerSnapshot, Streak][] = [[initial, noStreak]];
  const edges: Edge[] = [];
  while (queue.length > 0 && seen.size <= maxStates) {
    const [state, streak] = queue.shift()!;
    for (const event of events(state)) {
      const [next, actions] = transition(machine, state, event);
      edges.push({ state, streak, event, next, reported: reportedKeys(actions) });
      const after = nextStreak(streak, state, event, next);
      const key = keyOf(next, after);
      if (!seen.has(key)) {
        seen.add(key);
        queue.push([next, after]);
      }
    }
  }
  return edges;
}

/** The rules broken on an edge (none: an empty list). */
function violations(edge: Edge, quorum: number): string[] {
  const { state, streak, event, next, reported } = edge;
  const where = `${JSON.stringify(state.value)} (streak ${streak.count} from ${[...streak.keys].join(',') || 'none'}) --${event.type}${'keyId' in event ? ` ${event.keyId}` : ''}--> ${JSON.stringify(next.value)}`;
  const broken: string[] = [];
  if (next.context.streakKeys.length > quorum) broken.push(`more key ids kept than the quorum: ${where}`);
  const counted = state.matches('closed') && event.type === 'call.failed';
  const count = counted ? streak.count + 1 : streak.count;
  const distinct = counted ? new Set([...streak.keys, event.keyId]).size : streak.keys.size;
  const opened = state.matches('closed') && next.matches('open');
  if (opened && distinct < quorum)
    broken.push(`opened on failures from ${distinct} key(s), quorum ${quorum}: ${where}`);
  if (opened && count < threshold) broken.push(`opened below the threshold: ${where}`);
  if (counted && count >= threshold && distinct >= quorum && !opened)
    broken.push(`did not open on ${count} failures from ${distinct} keys: ${where}`);
  const streakOfTooFewKeys = counted && count >= threshold && distinct < quorum;
  const expected = streakOfTooFewKeys && event.type === 'call.failed' ? [event.keyId] : [];
  if (JSON.stringify(reported) !== JSON.stringify(expected))
    broken.push(
      `reported key streak ${JSON.stringify(reported)}, expected ${JSON.stringify(expected)}: ${where}`,
    );
  return broken;
}

const violationsOf = (machine: AnyBreaker, quorum: number): string[] =>
  edgesOf(machine, quorum).flatMap((edge) => violations(edge, quorum));

describe('the quorum of distinct keys, over the breaker graph with its own oracle', () => {
  it.each([2, 3])(
    'never opens on failures from fewer than %i distinct keys, and opens once they are reached',
    (quorum) => {
      const edges = edgesOf(breakerMachine, quorum);
      const openings = edges.filter(({ state, next }) => state.matches('closed') && next.matches('open'));
      const streaks = edges.filter(({ reported }) => reported.length > 0);
      console.log(
        `quorum ${quorum} graph: ${edges.length} edges, ${openings.length} openings, ${streaks.length} key streaks kept closed`,
      );
      // The graph reaches both sides of the rule: streaks of one key past the threshold, and openings.
      expect(openings.length).toBeGreaterThan(0);
      expect(streaks.some(({ streak }) => streak.keys.size === 1 && streak.count >= threshold)).toBe(true);
      expect(violationsOf(breakerMachine, quorum)).toEqual([]);
    },
  );

  it("goes red on the seeds' rule, where one key alone opens the breaker (kept mutant)", () => {
    const seeds = breakerMachine.provide({
      guards: {
        isQuorumReached: ({ context }) =>
          !context.shared && context.consecutiveFailures + 1 >= context.threshold,
      },
    });
    expect(violationsOf(seeds, 2).some((text) => text.startsWith('opened on failures from 1 key(s)'))).toBe(
      true,
    );
  });

  it('goes red on a breaker that counts the same key twice (kept mutant)', () => {
    const twice = breakerMachine.provide({
      actions: {
        countFailure: assign(({ context, event }) => ({
          consecutiveFailures: context.consecutiveFailures + 1,
          streakKeys:
            event.type === 'call.failed' ? [...context.streakKeys, event.keyId] : context.streakKeys,
        })),
      },
    });
    expect(violationsOf(twice, 2).some((text) => text.startsWith('opened on failures from 1 key(s)'))).toBe(
      true,
    );
  });

  it('goes red on a breaker whose success clears the count but keeps the keys (kept mutant)', () => {
    const sticky = breakerMachine.provide({
      actions: {
        clearFailures: assign(({ context }) => ({
          consecutiveFailures: 0,
          openedAt: null,
          retryAt: null,
          probeCallId: null,
          openPeriodMs: context.recoveryMs,
        })),
      },
    });
    expect(violationsOf(sticky, 2).some((text) => text.startsWith('opened on failures from 1 key(s)'))).toBe(
      true,
    );
  });

  it('goes red on a breaker that keeps a one-key streak closed without reporting the key (kept mutant)', () => {
    const silent = breakerMachine.provide({ actions: { reportKeyStreak: () => undefined } });
    expect(violationsOf(silent, 2).some((text) => text.startsWith('reported key streak []'))).toBe(true);
  });
});
