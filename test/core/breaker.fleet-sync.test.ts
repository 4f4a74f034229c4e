/**
 * The breaker machine's fleet rules (docs/fleet.md), event by event through the pure `transition`:
 * `breaker.synced` moves the local breaker to the fleet's state and takes its count and times; a local
 * probe survives only while the fleet is half-open too; while shared the fleet decides the opening;
 * `breaker.unshared` gives the decision back. Expected values are written out.
 */
import { admit } from './breaker-admit.js';
import { describe, expect, it } from 'vitest';
import { initialTransition, transition, type SnapshotFrom } from 'xstate';
import {
  breakerMachine,
  type BreakerEvent,
  type SharedBreakerState,
} from '../../src/machines/breaker.machine.js';

type Snapshot = SnapshotFrom<typeof breakerMachine>;

const t = 1_800_000_000_000;

function start(threshold = 2): Snapshot {
  return initialTransition(breakerMachine, { providerId: 'p', threshold, recoveryMs: 1000 })[0];
}

function send(snapshot: Snapshot, ...events: BreakerEvent[]): Snapshot {
  return events.reduce((current, event) => transition(breakerMachine, current, event)[0], snapshot);
}

function fleet(state: SharedBreakerState['state'], more: Partial<SharedBreakerState> = {}): BreakerEvent {
  const shared: SharedBreakerState = {
    state,
    consecutiveFailures: 7,
    streakKeys: ['key-a'],
    openedAt: state === 'closed' ? null : t - 10,
    retryAt: state === 'open' || state === 'halfOpen' ? t + 990 : null,
    opens: 4,
    openPeriodMs: 1000,
    version: 1,
    changedAt: t - 10,
    ...more,
  };
  return { type: 'breaker.synced', shared, at: t };
}

const failed = (callId: string, at = t): BreakerEvent => ({
  type: 'call.failed',
  callId,
  errorClass: 'server_error',
  keyId: 'key-a',
  at,
});

describe('breaker.synced: the local breaker follows the fleet', () => {
  it.each(['open', 'halfOpen', 'forcedOpen', 'closed'] as const)(
    'from closed to the fleet state %s, taking its count, times and opens',
    (state) => {
      const next = send(start(), fleet(state));
      expect(next.matches(state)).toBe(true);
      expect(next.context).toMatchObject({
        consecutiveFailures: 7,
        streakKeys: ['key-a'],
        openedAt: state === 'closed' ? null : t - 10,
        retryAt: state === 'open' || state === 'halfOpen' ? t + 990 : null,
        opens: 4,
        shared: true,
      });
    },
  );

  it('keeps the larger open count of the two', () => {
    const local = send(
      start(1),
      failed('a'),
      { type: 'breaker.reset', at: t },
      failed('b'),
      { type: 'breaker.reset', at: t },
      failed('c'),
    );
    expect(local.context.opens).toBe(3);
    expect(send(local, fleet('open', { opens: 1 })).context.opens).toBe(3);
    expect(send(local, fleet('open', { opens: 9 })).context.opens).toBe(9);
  });

  it('from open to the fleet state closed or half-open', () => {
    const open = send(start(1), failed('a'));
    expect(open.matches('open')).toBe(true);
    expect(send(open, fleet('closed')).matches('closed')).toBe(true);
    expect(send(open, fleet('halfOpen')).matches({ halfOpen: 'awaitingProbe' })).toBe(true);
  });

  it('re-opened elsewhere while open here: takes the new times', () => {
    const open = send(start(1), failed('a'));
    const next = send(open, fleet('open', { openedAt: t + 500, retryAt: t + 1500, opens: 2 }));
    expect(next.matches('open')).toBe(true);
    expect(next.context).toMatchObject({ openedAt: t + 500, retryAt: t + 1500, opens: 2 });
  });

  it('keeps its probe while the fleet is half-open too, and drops it otherwise', () => {
    const probing = send(start(1), failed('a'), admit('probe', t + 1000));
    expect(probing.matches({ halfOpen: 'probing' })).toBe(true);
    const stillProbing = send(probing, fleet('halfOpen'));
    expect(stillProbing.matches({ halfOpen: 'probing' })).toBe(true);
    expect(stillProbing.context.probeCallId).toBe('probe');
    expect(
      send(stillProbing, { type: 'call.succeeded', callId: 'probe', at: t + 1100 }).matches('closed'),
    ).toBe(true);
    const reopened = send(probing, fleet('open'));
    expect(reopened.matches('open')).toBe(true);
    expect(reopened.context.probeCallId).toBeNull();
  });

  it('adopts a fleet count while closed, and a forced open while forced open', () => {
    const closed = send(start(), fleet('closed', { consecutiveFailures: 1 }));
    expect(closed.context.consecutiveFailures).toBe(1);
    const forced = send(start(), { type: 'breaker.forceOpen', at: t }, fleet('forcedOpen', { opens: 6 }));
    expect(forced.matches('forcedOpen')).toBe(true);
    expect(forced.context.opens).toBe(6);
  });
});

describe('shared, the fleet decides the opening; unshared, the breaker decides again', () => {
  it('counts but does not open on its own while shared', () => {
    const shared = send(
      start(2),
      fleet('closed', { consecutiveFailures: 0 }),
      failed('a'),
      failed('b'),
      failed('c'),
    );
    expect(shared.matches('closed')).toBe(true);
    expect(shared.context.consecutiveFailures).toBe(3);
  });

  it('opens at its own threshold again after breaker.unshared', () => {
    const local = send(
      start(2),
      fleet('closed', { consecutiveFailures: 0 }),
      { type: 'breaker.unshared', at: t },
      failed('a'),
      failed('b'),
    );
    expect(local.context.shared).toBe(false);
    expect(local.matches('open')).toBe(true);
  });
});

describe("the quorum of keys while shared: the streak key ids are the fleet's", () => {
  const quorumStart = (): Snapshot =>
    initialTransition(breakerMachine, {
      providerId: 'p',
      threshold: 2,
      recoveryMs: 1000,
      minDistinctKeys: 2,
    })[0];
  const failedWith = (callId: string, keyId: string): BreakerEvent => ({
    type: 'call.failed',
    callId,
    errorClass: 'timeout',
    keyId,
    at: t,
  });

  it('reports a key streak from the adopted count and keys: the fleet saw key-a once, this instance once more', () => {
    const adopted = send(quorumStart(), fleet('closed', { consecutiveFailures: 1, streakKeys: ['key-a'] }));
    const [next, actions] = transition(breakerMachine, adopted, failedWith('here', 'key-a'));
    expect(next.matches('closed')).toBe(true);
    expect(next.context).toMatchObject({ consecutiveFailures: 2, streakKeys: ['key-a'] });
    expect(actions).toContainEqual(
      expect.objectContaining({
        params: { event: { type: 'breaker.keyStreak', keyId: 'key-a', errorClass: 'timeout', at: t } },
      }),
    );
  });

  it('does not open on a quorum reached here while shared (the fleet decides), and reports no key streak', () => {
    const adopted = send(quorumStart(), fleet('closed', { consecutiveFailures: 1, streakKeys: ['key-a'] }));
    const [next, actions] = transition(breakerMachine, adopted, failedWith('here', 'key-b'));
    expect(next.matches('closed')).toBe(true);
    expect(next.context).toMatchObject({ consecutiveFailures: 2, streakKeys: ['key-a', 'key-b'] });
    expect(actions.some((action) => String(action.type) === 'xstate.emit')).toBe(false);
  });
});
