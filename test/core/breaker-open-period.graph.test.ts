/**
 * The breaker's growing open period, over every edge of its graph: the rule is
 * written out here, not read from src (the strategy is not called):
 * - opening from closed: the open period is BREAKER_RECOVERY_MS (here 1000 ms);
 * - a failed half-open probe: the next period is twice the last, never above BREAKER_MAX_RECOVERY_MS
 *   (here 5000 ms: 1000, 2000, 4000, 5000, 5000, …), so it never shrinks and never exceeds the cap;
 * - a probe success closes and resets it to 1000 ms;
 * - `retryAt` is always the opening time plus the period (the truth shown everywhere).
 * Kept mutants (an uncapped period, one that does not grow, one that falls back after growing, one
 * not reset on success) turn it red.
 */
import { admit } from './breaker-admit.js';
import { describe, expect, it } from 'vitest';
import { assign, getNextTransitions, initialTransition, transition, type SnapshotFrom } from 'xstate';
import { breakerMachine, type BreakerEvent } from '../../src/machines/breaker.machine.js';

type AnyBreaker = typeof breakerMachine;
type BreakerSnapshot = SnapshotFrom<AnyBreaker>;

const recoveryMs = 1000;
const capMs = 5000;
const input = { providerId: 'claude', threshold: 2, recoveryMs, maxRecoveryMs: capMs };
const at = 50_000;

/** Every event type, for the probe and for some other call; delayed transitions from the graph. */
function events(snapshot: BreakerSnapshot): BreakerEvent[] {
  const ids = snapshot.context.probeCallId === null ? ['other'] : [snapshot.context.probeCallId, 'other'];
  const delayed = [...new Set(getNextTransitions(snapshot).map((t) => t.eventType))]
    .filter((type) => type.startsWith('xstate.after'))
    .map((type) => ({ type }) as BreakerEvent);
  return [
    admit('probe', at),
    ...ids.flatMap((callId): BreakerEvent[] => [
      { type: 'call.succeeded', callId, at },
      { type: 'call.failed', callId, errorClass: 'server_error', keyId: 'key-a', at },
      { type: 'call.ignored', callId, errorClass: 'rate_limited', at },
    ]),
    { type: 'breaker.reset', at },
    { type: 'breaker.forceOpen', at },
    { type: 'breaker.release', at },
    ...delayed,
  ];
}

const key = (snapshot: BreakerSnapshot): string =>
  JSON.stringify([
    snapshot.value,
    snapshot.context.consecutiveFailures,
    snapshot.context.probeCallId,
    snapshot.context.openPeriodMs,
  ]);

interface Edge {
  readonly state: BreakerSnapshot;
  readonly event: BreakerEvent;
  readonly next: BreakerSnapshot;
}

/** Every edge reachable from the initial state (breadth first; bounded, so an uncapped mutant ends too). */
function edgesOf(machine: AnyBreaker, maxStates = 200): Edge[] {
  const [initial] = initialTransition(machine, input);
  const seen = new Set([key(initial)]);
  const queue = [initial];
  const edges: Edge[] = [];
  while (queue.length > 0 && seen.size <= maxStates) {
    const state = queue.shift()!;
    for (const event of events(state)) {
      const [next] = transition(machine, state, event);
      edges.push({ state, event, next });
      if (!seen.has(key(next))) {
        seen.add(key(next));
        queue.push(next);
      }
    }
  }
  return edges;
}

const isProbeFailure = ({ state, event }: Edge): boolean =>
  state.matches({ halfOpen: 'probing' }) &&
  event.type === 'call.failed' &&
  event.callId === state.context.probeCallId;

/** The rule broken on an edge, or undefined. */
function violation(edge: Edge): string | undefined {
  const { state, event, next } = edge;
  const before = state.context.openPeriodMs;
  const after = next.context.openPeriodMs;
  const where = `${JSON.stringify(state.value)} --${event.type}--> ${JSON.stringify(next.value)} (${before} -> ${after} ms)`;
  if (after > capMs) return `period above the cap: ${where}`;
  if (after < recoveryMs) return `period below the recovery time: ${where}`;
  if (isProbeFailure(edge)) {
    if (!next.matches('open')) return `failed probe did not re-open: ${where}`;
    if (after < before) return `period shrank on a failed probe: ${where}`;
    if (after !== Math.min(2 * before, capMs)) return `period not doubled up to the cap: ${where}`;
  }
  if (next.matches('closed') && after !== recoveryMs)
    return `closed with a period other than the recovery time: ${where}`;
  if (state.matches('closed') && next.matches('open') && after !== recoveryMs)
    return `opened from closed with a grown period: ${where}`;
  const entered = !state.matches('open') || isProbeFailure(edge);
  if (next.matches('open') && entered && next.context.retryAt !== next.context.openedAt! + after)
    return `retryAt is not the opening time plus the period: ${where}`;
  return undefined;
}

const violations = (machine: AnyBreaker): string[] =>
  edgesOf(machine).flatMap((edge) => violation(edge) ?? []);

describe('the breaker open period, over every edge of its graph', () => {
  it('grows 1000, 2000, 4000, 5000 ms on failed probes, never above the cap, back to 1000 ms on success', () => {
    const edges = edgesOf(breakerMachine);
    const periods = [...new Set(edges.map(({ next }) => next.context.openPeriodMs))].sort((a, b) => a - b);
    const probeFailures = edges.filter(isProbeFailure);
    console.log(
      `open period graph: ${edges.length} edges, ${probeFailures.length} failed probes, periods ${periods.join(', ')}`,
    );
    // The whole ladder is reached, the cap included, and a failed probe at the cap keeps it.
    expect(periods).toEqual([1000, 2000, 4000, 5000]);
    expect(probeFailures.some(({ state }) => state.context.openPeriodMs === capMs)).toBe(true);
    expect(
      edges.some(
        ({ state, next }) =>
          state.matches({ halfOpen: 'probing' }) &&
          state.context.openPeriodMs === capMs &&
          next.matches('closed'),
      ),
    ).toBe(true);
    expect(violations(breakerMachine)).toEqual([]);
  });

  it('goes red on a breaker whose period doubles without the cap (kept mutant)', () => {
    const uncapped = breakerMachine.provide({
      actions: { growOpenPeriod: assign({ openPeriodMs: ({ context }) => context.openPeriodMs * 2 }) },
    });
    expect(violations(uncapped).some((text) => text.startsWith('period above the cap'))).toBe(true);
  });

  it('goes red on a breaker whose period does not grow on a failed probe (kept mutant)', () => {
    const flat = breakerMachine.provide({
      actions: { growOpenPeriod: assign({ openPeriodMs: ({ context }) => context.recoveryMs }) },
    });
    expect(violations(flat).some((text) => text.startsWith('period not doubled'))).toBe(true);
  });

  it('goes red on a breaker whose period falls back after growing, below the cap (kept mutant)', () => {
    const wrapping = breakerMachine.provide({
      actions: {
        growOpenPeriod: assign({
          openPeriodMs: ({ context }) =>
            context.openPeriodMs >= 4000 ? context.recoveryMs : context.openPeriodMs * 2,
        }),
      },
    });
    expect(violations(wrapping).some((text) => text.startsWith('period shrank on a failed probe'))).toBe(
      true,
    );
  });

  it('goes red on a breaker that keeps the grown period when a probe succeeds (kept mutant)', () => {
    const sticky = breakerMachine.provide({
      actions: {
        clearFailures: assign({ consecutiveFailures: 0, openedAt: null, retryAt: null, probeCallId: null }),
      },
    });
    expect(violations(sticky).some((text) => text.startsWith('closed with a period other'))).toBe(true);
  });
});
