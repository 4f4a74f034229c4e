/**
 * Breaker rules the graph tests do not reach, event by event on a live actor (fake timers for the
 * recovery timer): the fleet's state followed from every state, including an operator's forced open;
 * a shared breaker's recovery timer set by the fleet's `retryAt` (wall clock) and re-armed when the
 * fleet re-opens; an opening from closed always starting from the recovery time; a streak below the
 * key quorum told to the parent. Expected values are written out here.
 */
import { admit } from './breaker-admit.js';
import { distinctKeyQuorum } from '../../src/machines/breaker-strategy.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor, setup, type AnyActorRef } from 'xstate';
import {
  breakerMachine,
  type BreakerEvent,
  type BreakerKeyStreak,
  type SharedBreakerState,
} from '../../src/machines/breaker.machine.js';

const now = 1_800_000_000_000;
const recoveryMs = 1_000;

function shared(
  state: SharedBreakerState['state'],
  fields: Partial<SharedBreakerState> = {},
): SharedBreakerState {
  return {
    state,
    consecutiveFailures: 2,
    openedAt: state === 'closed' ? null : now - 10,
    retryAt: state === 'open' || state === 'halfOpen' ? now + 5_000 : null,
    opens: 4,
    openPeriodMs: 8_000,
    version: 1,
    changedAt: now - 10,
    streakKeys: [],
    ...fields,
  };
}

function breaker(input: { minDistinctKeys?: number } = {}) {
  const actor = createActor(breakerMachine, {
    input: { providerId: 'claude', threshold: 1, recoveryMs, ...input },
  }).start();
  const send = (event: BreakerEvent) => actor.send(event);
  return { actor, send, snapshot: () => actor.getSnapshot() };
}

beforeEach(() => {
  vi.useFakeTimers({ now });
});

afterEach(() => {
  vi.useRealTimers();
});

describe("the fleet's state, followed from every state", () => {
  it('an operator-forced open follows the fleet when it closes, opens or half-opens', () => {
    for (const state of ['closed', 'open', 'halfOpen'] as const) {
      const b = breaker();
      b.send({ type: 'breaker.forceOpen', at: now });
      b.send({ type: 'breaker.synced', shared: shared(state), at: now });
      expect(b.snapshot().matches(state), state).toBe(true);
      expect(b.snapshot().context).toMatchObject({ opens: 4, shared: true });
    }
  });

  it('an open breaker takes the fleet closing with its count and opens; a half-open one takes the fleet half-open', () => {
    const b = breaker();
    b.send({ type: 'call.failed', callId: 'c1', errorClass: 'server_error', keyId: 'k1', at: now });
    expect(b.snapshot().matches('open')).toBe(true);
    b.send({ type: 'breaker.synced', shared: shared('closed', { consecutiveFailures: 0 }), at: now + 1 });
    expect(b.snapshot().matches('closed')).toBe(true);
    expect(b.snapshot().context).toMatchObject({ consecutiveFailures: 0, opens: 4, shared: true });

    const h = breaker();
    h.send({ type: 'breaker.synced', shared: shared('halfOpen'), at: now });
    h.send(admit('probe', now + 1, { leased: true }));
    h.send({
      type: 'breaker.synced',
      shared: shared('halfOpen', { opens: 6, retryAt: now + 7_000 }),
      at: now + 2,
    });
    expect(h.snapshot().matches({ halfOpen: 'probing' })).toBe(true);
    expect(h.snapshot().context).toMatchObject({ opens: 6, retryAt: now + 7_000, probeCallId: 'probe' });
  });
});

describe("a shared breaker's recovery timer", () => {
  it("half-opens at the fleet's retryAt by the wall clock, not after its own open period", () => {
    const b = breaker();
    b.send({
      type: 'breaker.synced',
      shared: shared('open', { retryAt: now + 5_000, openPeriodMs: recoveryMs }),
      at: now,
    });
    vi.advanceTimersByTime(recoveryMs + 1);
    expect(b.snapshot().matches('open')).toBe(true);
    vi.advanceTimersByTime(5_000 - recoveryMs - 1);
    expect(b.snapshot().matches('halfOpen')).toBe(true);
  });

  it('re-arms the timer when the fleet re-opens with a later retryAt', () => {
    const b = breaker();
    b.send({ type: 'breaker.synced', shared: shared('open', { retryAt: now + 5_000 }), at: now });
    vi.advanceTimersByTime(1_000);
    b.send({
      type: 'breaker.synced',
      shared: shared('open', { retryAt: now + 20_000, opens: 5 }),
      at: now + 1_000,
    });
    vi.advanceTimersByTime(5_000);
    expect(b.snapshot().matches('open')).toBe(true);
    vi.advanceTimersByTime(14_000);
    expect(b.snapshot().matches('halfOpen')).toBe(true);
  });

  it('runs from the time stamped on the event that brought retryAt, not from when the event is handled', () => {
    const b = breaker();
    // Heard 2 s after the link stamped it (a busy event loop): the timer still counts from the stamp.
    b.send({
      type: 'breaker.synced',
      shared: shared('open', { retryAt: now + 3_000, openPeriodMs: recoveryMs }),
      at: now - 2_000,
    });
    vi.advanceTimersByTime(4_999);
    expect(b.snapshot().matches('open')).toBe(true);
    vi.advanceTimersByTime(1);
    expect(b.snapshot().matches('halfOpen')).toBe(true);
  });

  it('after a failed probe while shared, waits the grown period from the failure', () => {
    const b = breaker();
    b.send({ type: 'breaker.synced', shared: shared('halfOpen', { retryAt: now }), at: now });
    b.send(admit('probe', now, { leased: true }));
    b.send({
      type: 'call.failed',
      callId: 'probe',
      errorClass: 'server_error',
      keyId: 'k1',
      at: now - 1_000,
    });
    expect(b.snapshot().matches('open')).toBe(true);
    // The fleet's period 8 000 doubled: retryAt = now - 1 000 + 16 000; the timer runs 16 000 from now.
    expect(b.snapshot().context).toMatchObject({ openPeriodMs: 16_000, retryAt: now + 15_000 });
    vi.advanceTimersByTime(15_999);
    expect(b.snapshot().matches('open')).toBe(true);
    vi.advanceTimersByTime(1);
    expect(b.snapshot().matches('halfOpen')).toBe(true);
  });

  it('waits the open period when the fleet is open without a retryAt', () => {
    const b = breaker();
    b.send({ type: 'breaker.synced', shared: shared('open', { retryAt: null }), at: now });
    vi.advanceTimersByTime(8_000 - 1);
    expect(b.snapshot().matches('open')).toBe(true);
    vi.advanceTimersByTime(1);
    expect(b.snapshot().matches('halfOpen')).toBe(true);
  });

  it('an unshared breaker waits its open period from the opening, whatever the time stamped on the event', () => {
    const b = breaker();
    // The failure is stamped 10 s in the past (a busy event loop): the timer still runs the open period.
    b.send({ type: 'call.failed', callId: 'c1', errorClass: 'server_error', keyId: 'k1', at: now - 10_000 });
    vi.advanceTimersByTime(recoveryMs - 1);
    expect(b.snapshot().matches('open')).toBe(true);
    vi.advanceTimersByTime(1);
    expect(b.snapshot().matches('halfOpen')).toBe(true);
  });
});

describe('opening from closed', () => {
  it("opens for the recovery time, even after adopting the fleet's longer period", () => {
    const b = breaker();
    b.send({
      type: 'breaker.synced',
      shared: shared('closed', { consecutiveFailures: 0, openPeriodMs: 8_000 }),
      at: now,
    });
    b.send({ type: 'breaker.unshared', at: now });
    b.send({ type: 'call.failed', callId: 'c1', errorClass: 'server_error', keyId: 'k1', at: now + 1 });
    expect(b.snapshot().matches('open')).toBe(true);
    expect(b.snapshot().context).toMatchObject({ openPeriodMs: recoveryMs, retryAt: now + 1 + recoveryMs });
  });
});

describe('a streak below the key quorum', () => {
  it('is told to the owner that runs the breaker (which trips the key)', () => {
    const heard: BreakerKeyStreak[] = [];
    const parent = setup({
      actors: { breaker: breakerMachine },
    }).createMachine({
      context: ({ spawn, self }) => ({
        breaker: spawn('breaker', {
          id: 'breaker',
          input: { providerId: 'claude', threshold: 1, recoveryMs, minDistinctKeys: 2, owner: self },
        }) as AnyActorRef,
      }),
      on: {
        'breaker.keyStreak': { actions: ({ event }) => void heard.push(event as BreakerKeyStreak) },
      },
    });
    const actor = createActor(parent).start();
    actor.getSnapshot().context.breaker.send({
      type: 'call.failed',
      callId: 'c1',
      errorClass: 'timeout',
      keyId: 'k1',
      at: now,
    } satisfies BreakerEvent);
    expect(heard).toEqual([{ type: 'breaker.keyStreak', keyId: 'k1', errorClass: 'timeout', at: now }]);
    expect(actor.getSnapshot().context.breaker.getSnapshot().matches('closed')).toBe(true);
  });
});

describe("the quorum's voters, written out", () => {
  it('an origin id of 1 to 128 word characters or . : + / = - votes as itself; anything else is no origin, and the key votes', () => {
    const { voter } = distinctKeyQuorum;
    expect(voter('key-1', undefined)).toBe('key-1');
    for (const origin of ['a', 'addr:9f2c', 'A.b:c+d/e=f-g_h', 'x'.repeat(128)]) expect(voter('key-1', origin)).toBe(`origin:${origin}`);
    for (const origin of ['', 'x'.repeat(129), 'has space', 'semi;colon', 'bad\nline', ' lead', 'trail ', 'ünicode', '*']) {
      expect(voter('key-1', origin), JSON.stringify(origin)).toBe('key-1');
    }
  });

  it('keeps each voter once, in order, and at most the quorum of them', () => {
    const { withKey } = distinctKeyQuorum;
    expect(withKey([], 'a', 3)).toEqual(['a']);
    expect(withKey(['a'], 'a', 3)).toEqual(['a']);
    expect(withKey(['a'], 'b', 3)).toEqual(['a', 'b']);
    expect(withKey(['a', 'b'], 'c', 3)).toEqual(['a', 'b', 'c']);
    expect(withKey(['a', 'b', 'c'], 'd', 3)).toEqual(['a', 'b', 'c']);
    expect(withKey(['a', 'b'], 'c', 2)).toEqual(['a', 'b']);
  });
});
