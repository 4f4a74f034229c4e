import { admit } from './breaker-admit.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor, type Actor } from 'xstate';
import { breakerMachine, type BreakerMachine } from '../../src/machines/breaker.machine.js';

const threshold = 3;
const recoveryMs = 10_000;

type Breaker = Actor<BreakerMachine>;

function startBreaker(): Breaker {
  return createActor(breakerMachine, { input: { providerId: 'claude', threshold, recoveryMs } }).start();
}

let seq = 0;
/** One whole call as the provider actor reports it: started, then its result. */
function call(breaker: Breaker, result: 'succeeded' | 'failed' | 'ignored'): string {
  seq += 1;
  const callId = `call-${seq}`;
  const at = Date.now();
  breaker.send(admit(callId, at));
  if (result === 'succeeded') breaker.send({ type: 'call.succeeded', callId, at });
  else if (result === 'failed')
    breaker.send({ type: 'call.failed', callId, errorClass: 'server_error', keyId: 'key-a', at });
  else breaker.send({ type: 'call.ignored', callId, errorClass: 'rate_limited', at });
  return callId;
}

function openBreaker(breaker: Breaker): void {
  for (let i = 0; i < threshold; i += 1) call(breaker, 'failed');
}

function admitting(breaker: Breaker): boolean {
  return breaker.getSnapshot().hasTag('admitting');
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(new Date('2025-01-01T00:00:00Z'));
});

afterEach(() => {
  vi.useRealTimers();
});

describe('breaker machine', () => {
  it('starts closed, admitting, with nothing counted', () => {
    const breaker = startBreaker();
    const { context } = breaker.getSnapshot();
    expect(breaker.getSnapshot().value).toBe('closed');
    expect(admitting(breaker)).toBe(true);
    expect(context).toMatchObject({ consecutiveFailures: 0, openedAt: null, retryAt: null, opens: 0 });
  });

  it('stays closed below the threshold of consecutive counted failures', () => {
    const breaker = startBreaker();
    for (let i = 0; i < threshold - 1; i += 1) call(breaker, 'failed');
    expect(breaker.getSnapshot().value).toBe('closed');
    expect(breaker.getSnapshot().context.consecutiveFailures).toBe(threshold - 1);
  });

  it('opens after threshold consecutive counted failures, recording openedAt and retryAt', () => {
    const breaker = startBreaker();
    const now = Date.now();
    openBreaker(breaker);
    const snapshot = breaker.getSnapshot();
    expect(snapshot.value).toBe('open');
    expect(snapshot.context.consecutiveFailures).toBe(threshold);
    expect(snapshot.context.openedAt).toBe(now);
    expect(snapshot.context.retryAt).toBe(now + recoveryMs);
  });

  it('resets the count when a success comes between failures', () => {
    const breaker = startBreaker();
    for (let i = 0; i < threshold - 1; i += 1) call(breaker, 'failed');
    call(breaker, 'succeeded');
    expect(breaker.getSnapshot().context.consecutiveFailures).toBe(0);
    for (let i = 0; i < threshold - 1; i += 1) call(breaker, 'failed');
    expect(breaker.getSnapshot().value).toBe('closed');
  });

  it('never counts an ignored (user-side) failure while closed', () => {
    const breaker = startBreaker();
    for (let i = 0; i < threshold * 3; i += 1) call(breaker, 'ignored');
    expect(breaker.getSnapshot().value).toBe('closed');
    expect(breaker.getSnapshot().context.consecutiveFailures).toBe(0);
  });

  it('refuses calls while open (no admitting tag)', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    expect(admitting(breaker)).toBe(false);
  });

  it('stays open until recoveryMs has fully elapsed', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    vi.advanceTimersByTime(recoveryMs - 1);
    expect(breaker.getSnapshot().value).toBe('open');
    expect(admitting(breaker)).toBe(false);
  });

  it('moves to halfOpen after recoveryMs and admits one probe', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    vi.advanceTimersByTime(recoveryMs);
    expect(breaker.getSnapshot().value).toEqual({ halfOpen: 'awaitingProbe' });
    expect(admitting(breaker)).toBe(true);
  });

  it('admits no second call while the half-open probe is in flight', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    vi.advanceTimersByTime(recoveryMs);
    breaker.send(admit('probe', Date.now()));
    expect(breaker.getSnapshot().value).toEqual({ halfOpen: 'probing' });
    expect(breaker.getSnapshot().context.probeCallId).toBe('probe');
    expect(admitting(breaker)).toBe(false);
  });

  it('closes and resets the count when the probe succeeds', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    vi.advanceTimersByTime(recoveryMs);
    call(breaker, 'succeeded');
    const snapshot = breaker.getSnapshot();
    expect(snapshot.value).toBe('closed');
    expect(snapshot.context).toMatchObject({
      consecutiveFailures: 0,
      openedAt: null,
      retryAt: null,
      probeCallId: null,
    });
    expect(admitting(breaker)).toBe(true);
  });

  it('re-opens with a new openedAt and a doubled open period when the probe fails with a counted class', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    vi.advanceTimersByTime(recoveryMs);
    const probeAt = Date.now();
    call(breaker, 'failed');
    const snapshot = breaker.getSnapshot();
    expect(snapshot.value).toBe('open');
    expect(snapshot.context.openedAt).toBe(probeAt);
    // 10 s doubled: 20 s.
    expect(snapshot.context.retryAt).toBe(probeAt + 20_000);
    expect(snapshot.context.openPeriodMs).toBe(20_000);
    expect(snapshot.context.opens).toBe(2);
    expect(snapshot.context.probeCallId).toBeNull();
    vi.advanceTimersByTime(recoveryMs);
    expect(breaker.getSnapshot().value).toBe('open');
    vi.advanceTimersByTime(recoveryMs);
    expect(breaker.getSnapshot().value).toEqual({ halfOpen: 'awaitingProbe' });
  });

  it('grows the open period 10 s, 20 s, 40 s, then holds it at the 40 s cap, and resets it on a probe success', () => {
    const breaker = createActor(breakerMachine, {
      input: { providerId: 'claude', threshold, recoveryMs, maxRecoveryMs: 40_000 },
    }).start();
    openBreaker(breaker);
    const spacings: number[] = [];
    for (let probe = 0; probe < 4; probe += 1) {
      const { openedAt, retryAt } = breaker.getSnapshot().context;
      spacings.push((retryAt ?? 0) - (openedAt ?? 0));
      vi.advanceTimersByTime((retryAt ?? 0) - Date.now());
      call(breaker, 'failed');
    }
    expect(spacings).toEqual([10_000, 20_000, 40_000, 40_000]);
    vi.advanceTimersByTime(40_000);
    call(breaker, 'succeeded');
    expect(breaker.getSnapshot().value).toBe('closed');
    expect(breaker.getSnapshot().context.openPeriodMs).toBe(10_000);
    const reopenedAt = Date.now();
    openBreaker(breaker);
    expect(breaker.getSnapshot().context.retryAt).toBe(reopenedAt + 10_000);
  });

  it.each(['rate_limited', 'auth', 'quota_exhausted', 'aborted', 'invalid_output'] as const)(
    'frees the probe slot and stays halfOpen when the probe ends %s',
    (errorClass) => {
      const breaker = startBreaker();
      openBreaker(breaker);
      vi.advanceTimersByTime(recoveryMs);
      breaker.send(admit('probe', Date.now()));
      breaker.send({ type: 'call.ignored', callId: 'probe', errorClass, at: Date.now() });
      const snapshot = breaker.getSnapshot();
      expect(snapshot.value).toEqual({ halfOpen: 'awaitingProbe' });
      expect(snapshot.context.probeCallId).toBeNull();
      expect(snapshot.context.consecutiveFailures).toBe(threshold);
      expect(admitting(breaker)).toBe(true);
    },
  );

  it('ignores results of calls that are not the probe while halfOpen', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    vi.advanceTimersByTime(recoveryMs);
    breaker.send(admit('probe', Date.now()));
    const before = breaker.getSnapshot();
    breaker.send({ type: 'call.succeeded', callId: 'old-call', at: Date.now() });
    breaker.send({
      type: 'call.failed',
      callId: 'old-call-2',
      errorClass: 'timeout',
      keyId: 'key-a',
      at: Date.now(),
    });
    breaker.send({ type: 'call.ignored', callId: 'old-call-3', errorClass: 'aborted', at: Date.now() });
    const after = breaker.getSnapshot();
    expect(after.value).toEqual({ halfOpen: 'probing' });
    expect(after.context).toEqual(before.context);
  });

  it('ignores stray results while halfOpen awaits its probe', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    vi.advanceTimersByTime(recoveryMs);
    const before = breaker.getSnapshot();
    breaker.send({
      type: 'call.failed',
      callId: 'late',
      errorClass: 'server_error',
      keyId: 'key-a',
      at: Date.now(),
    });
    breaker.send({ type: 'call.succeeded', callId: 'late-2', at: Date.now() });
    expect(breaker.getSnapshot().value).toEqual({ halfOpen: 'awaitingProbe' });
    expect(breaker.getSnapshot().context).toEqual(before.context);
  });

  it('holds open past recoveryMs when forced open, until released', () => {
    const breaker = startBreaker();
    breaker.send({ type: 'breaker.forceOpen', at: Date.now() });
    expect(admitting(breaker)).toBe(false);
    expect(breaker.getSnapshot().context.retryAt).toBeNull();
    vi.advanceTimersByTime(recoveryMs * 10);
    expect(breaker.getSnapshot().value).toBe('forcedOpen');
    expect(admitting(breaker)).toBe(false);
    breaker.send({ type: 'breaker.release', at: Date.now() });
    expect(breaker.getSnapshot().value).toBe('closed');
    expect(admitting(breaker)).toBe(true);
  });

  it('cancels the recovery timer when forced open from open', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    breaker.send({ type: 'breaker.forceOpen', at: Date.now() });
    vi.advanceTimersByTime(recoveryMs * 2);
    expect(breaker.getSnapshot().value).toBe('forcedOpen');
  });

  it('clears the count and closes on reset, from open', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    breaker.send({ type: 'breaker.reset', at: Date.now() });
    const snapshot = breaker.getSnapshot();
    expect(snapshot.value).toBe('closed');
    expect(snapshot.context).toMatchObject({ consecutiveFailures: 0, openedAt: null, retryAt: null });
    vi.advanceTimersByTime(recoveryMs);
    expect(breaker.getSnapshot().value).toBe('closed');
  });

  it('clears a partial count on reset while closed', () => {
    const breaker = startBreaker();
    call(breaker, 'failed');
    breaker.send({ type: 'breaker.reset', at: Date.now() });
    expect(breaker.getSnapshot().context.consecutiveFailures).toBe(0);
  });

  it('counts every opening in opens, forced ones included', () => {
    const breaker = startBreaker();
    openBreaker(breaker);
    vi.advanceTimersByTime(recoveryMs);
    call(breaker, 'failed');
    breaker.send({ type: 'breaker.forceOpen', at: Date.now() });
    breaker.send({ type: 'breaker.release', at: Date.now() });
    openBreaker(breaker);
    expect(breaker.getSnapshot().context.opens).toBe(4);
  });
});

describe('a success while closed', () => {
  it('clears whatever failure record the breaker holds: count, streak keys, times, probe, grown open period', () => {
    const breaker = startBreaker();
    // The fleet may leave a closed breaker holding all of these (adopted from `breaker.synced`).
    breaker.send({
      type: 'breaker.synced',
      shared: {
        state: 'closed',
        consecutiveFailures: 2,
        streakKeys: ['key-a'],
        openedAt: 5,
        retryAt: 50,
        opens: 1,
        openPeriodMs: 40_000,
        version: 1,
        changedAt: 5,
      },
      at: 6,
    });
    breaker.send({ type: 'breaker.unshared', at: 7 });
    breaker.send({ type: 'call.succeeded', callId: 'c', at: 8 });
    expect(breaker.getSnapshot().context).toMatchObject({
      consecutiveFailures: 0,
      streakKeys: [],
      openedAt: null,
      retryAt: null,
      probeCallId: null,
      openPeriodMs: recoveryMs,
    });
  });

  it.each([
    ['a count', { consecutiveFailures: 1 }],
    ['a streak key', { consecutiveFailures: 0, streakKeys: ['key-a'] }],
    ['an opening time', { consecutiveFailures: 0, streakKeys: [], openedAt: 5 }],
    ['a retry time', { consecutiveFailures: 0, streakKeys: [], retryAt: 5 }],
    ['a grown open period', { consecutiveFailures: 0, streakKeys: [], openPeriodMs: 20_000 }],
  ])('clears %s left alone', (_, left) => {
    const breaker = startBreaker();
    breaker.send({
      type: 'breaker.synced',
      shared: {
        state: 'closed',
        streakKeys: [],
        openedAt: null,
        retryAt: null,
        opens: 0,
        openPeriodMs: recoveryMs,
        version: 1,
        changedAt: 5,
        ...left,
      },
      at: 6,
    });
    breaker.send({ type: 'call.succeeded', callId: 'c', at: 8 });
    const { context } = breaker.getSnapshot();
    expect([
      context.consecutiveFailures,
      context.streakKeys,
      context.openedAt,
      context.retryAt,
      context.openPeriodMs,
    ]).toEqual([0, [], null, null, recoveryMs]);
  });

  it('with nothing to clear, leaves the snapshot as it is (no copy per successful call)', () => {
    const breaker = startBreaker();
    const before = breaker.getSnapshot();
    breaker.send(admit('c', 1));
    breaker.send({ type: 'call.succeeded', callId: 'c', at: 2 });
    expect(breaker.getSnapshot()).toBe(before);
  });
});
