/**
 * Per-key health rules the key graph test does not send, event by event (docs/errors.md "Per-key
 * health", expected values written out): the fleet's record adopted (`key.synced`), the key's own
 * circuit (`key.tripped`, its own period), the probe at `until` exactly, the health a caller is shown
 * (`keyHealthView`), and the fleet told of every change made here (a class or an `until` that moved).
 */
import { describe, expect, it } from 'vitest';
import { createActor, fromCallback, initialTransition, transition, type SnapshotFrom } from 'xstate';
import { keyBookMachine, keyHealthView, refusedKeyCounts } from '../../src/machines/key-book.machine.js';
import { keyHealthMachine, type KeyHealthEvent } from '../../src/machines/key-health.machine.js';
import type { KeyLinkEvent, KeyLinkInput, KeyLinkReply } from '../../src/machines/key-link.js';

const at = 1_000_000;
const quarantineMs = 60_000;

function key() {
  let [snapshot] = initialTransition(keyHealthMachine, { keyId: 'k', quarantineMs, coolingMs: 5_000 });
  return {
    send(event: KeyHealthEvent): SnapshotFrom<typeof keyHealthMachine> {
      [snapshot] = transition(keyHealthMachine, snapshot, event);
      return snapshot;
    },
    get state() {
      return snapshot.value;
    },
    get context() {
      return snapshot.context;
    },
  };
}

describe("a key's health: the fleet's record", () => {
  it('adopts a quarantine and a cooling heard from another instance', () => {
    const q = key();
    q.send({
      type: 'key.synced',
      shared: { state: 'quarantined', errorClass: 'auth', until: at + 9_000 },
      at,
    });
    expect(q.state).toEqual({ quarantined: 'waiting' });
    expect(q.context).toMatchObject({ errorClass: 'auth', until: at + 9_000 });

    const c = key();
    c.send({
      type: 'key.synced',
      shared: { state: 'cooling', errorClass: 'rate_limited', until: at + 3_000 },
      at,
    });
    expect(c.state).toEqual({ cooling: 'waiting' });
    expect(c.context).toMatchObject({ errorClass: 'rate_limited', until: at + 3_000 });
  });

  it("takes the fleet's newer refusal while a probe is in flight, and frees the probe", () => {
    for (const [refusal, state] of [
      [{ state: 'quarantined', errorClass: 'quota_exhausted' }, 'quarantined'],
      [{ state: 'cooling', errorClass: 'rate_limited' }, 'cooling'],
    ] as const) {
      const k = key();
      k.send({ type: 'key.synced', shared: { ...refusal, until: at }, at });
      k.send({ type: 'key.called', callId: 'probe', at });
      expect(k.state).toEqual({ [state]: 'probing' });
      k.send({ type: 'key.synced', shared: { ...refusal, until: at + 20_000 }, at: at + 1 });
      expect(k.state).toEqual({ [state]: 'waiting' });
      expect(k.context).toMatchObject({ until: at + 20_000, probeCallId: null });
    }
  });
  it("takes the fleet's record of another state whatever sub-state the key is in: healthy, cooling, quarantined", () => {
    const quarantine = { state: 'quarantined', errorClass: 'auth', until: at + 9_000 } as const;
    const cooling = { state: 'cooling', errorClass: 'rate_limited', until: at + 3_000 } as const;
    const healthy = { state: 'healthy', errorClass: null, until: null } as const;
    for (const [from, probing] of [
      [quarantine, false],
      [quarantine, true],
      [cooling, false],
      [cooling, true],
    ] as const) {
      for (const to of [healthy, quarantine, cooling]) {
        if (to.state === from.state) continue;
        const k = key();
        k.send({ type: 'key.synced', shared: from, at });
        if (probing) k.send({ type: 'key.called', callId: 'probe', at: from.until });
        k.send({ type: 'key.synced', shared: to, at: at + 1 });
        expect(k.state, `${from.state}${probing ? ' probing' : ''} hears ${to.state}`).toEqual(
          to.state === 'healthy' ? 'healthy' : { [to.state]: 'waiting' },
        );
        expect(k.context).toMatchObject({ errorClass: to.errorClass, until: to.until, probeCallId: null });
      }
    }
  });
});

describe("a key's own circuit and its probe", () => {
  it('quarantines a tripped key for the period the trip gives, else KEY_QUARANTINE_MS, with the streak class', () => {
    const own = key();
    own.send({ type: 'key.tripped', errorClass: 'timeout', periodMs: 2_000, at });
    expect(own.state).toEqual({ quarantined: 'waiting' });
    expect(own.context).toMatchObject({ errorClass: 'timeout', until: at + 2_000 });

    const plain = key();
    plain.send({ type: 'key.tripped', errorClass: 'server_error', at });
    expect(plain.context).toMatchObject({ errorClass: 'server_error', until: at + quarantineMs });
  });

  it('lets the probe out at until exactly, not a millisecond before', () => {
    const k = key();
    k.send({ type: 'key.failed', callId: 'c1', errorClass: 'auth', at });
    k.send({ type: 'key.called', callId: 'early', at: at + quarantineMs - 1 });
    expect(k.state).toEqual({ quarantined: 'waiting' });
    k.send({ type: 'key.called', callId: 'probe', at: at + quarantineMs });
    expect(k.state).toEqual({ quarantined: 'probing' });
  });
});

function book() {
  const reports: KeyLinkEvent[] = [];
  const keyLink = fromCallback<KeyLinkEvent, KeyLinkInput, KeyLinkReply>(({ receive }) => {
    receive((event) => reports.push(event));
  });
  const actor = createActor(keyBookMachine.provide({ actors: { keyLink } }), {
    input: { providerId: 'claude', quarantineMs, coolingMs: 5_000, maxKeys: 3 },
  }).start();
  return { actor, reports, keys: () => actor.getSnapshot().context };
}

describe('the key book: what a caller is shown and what the fleet is told', () => {
  it('shows each key as healthy, quarantined or cooling with its class and until; a passed until shows healthy', () => {
    const { actor, keys } = book();
    actor.send({ type: 'key.failed', keyId: 'q', callId: 'c1', errorClass: 'permission', at });
    actor.send({
      type: 'key.failed',
      keyId: 'c',
      callId: 'c2',
      errorClass: 'rate_limited',
      retryAfterMs: 4_000,
      at,
    });
    expect(keyHealthView(keys(), 'q', at)).toEqual({
      state: 'quarantined',
      errorClass: 'permission',
      until: at + quarantineMs,
    });
    expect(keyHealthView(keys(), 'c', at)).toEqual({
      state: 'cooling',
      errorClass: 'rate_limited',
      until: at + 4_000,
    });
    expect(keyHealthView(keys(), 'c', at + 4_000)).toEqual({ state: 'healthy' });
    expect(keyHealthView(keys(), 'unknown', at)).toEqual({ state: 'healthy' });
  });

  it('tells the fleet when only the class changes, when only until moves, and when the state changes', () => {
    const { actor, reports } = book();
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c1', errorClass: 'auth', at });
    // Same until (a quarantine is never shortened), another class.
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c2', errorClass: 'permission', at });
    // Same class, a later until.
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c3', errorClass: 'permission', at: at + 1_000 });
    // Cooling → quarantined.
    actor.send({
      type: 'key.failed',
      keyId: 'r',
      callId: 'c4',
      errorClass: 'rate_limited',
      retryAfterMs: 2_000,
      at,
    });
    actor.send({ type: 'key.failed', keyId: 'r', callId: 'c5', errorClass: 'quota_exhausted', at });
    expect(reports.map((r) => (r.type === 'key.report' ? [r.keyId, r.shared] : r.type))).toEqual([
      ['k', { state: 'quarantined', errorClass: 'auth', until: at + quarantineMs }],
      ['k', { state: 'quarantined', errorClass: 'permission', until: at + quarantineMs }],
      ['k', { state: 'quarantined', errorClass: 'permission', until: at + 1_000 + quarantineMs }],
      ['r', { state: 'cooling', errorClass: 'rate_limited', until: at + 2_000 }],
      ['r', { state: 'quarantined', errorClass: 'quota_exhausted', until: at + quarantineMs }],
    ]);
  });

  it('keeps nothing and tells nothing with a key book of no keys (maxKeys 0)', () => {
    const reports: KeyLinkEvent[] = [];
    const keyLink = fromCallback<KeyLinkEvent, KeyLinkInput, KeyLinkReply>(({ receive }) => {
      receive((event) => reports.push(event));
    });
    const actor = createActor(keyBookMachine.provide({ actors: { keyLink } }), {
      input: { providerId: 'claude', quarantineMs, coolingMs: 5_000, maxKeys: 0 },
    }).start();
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c1', errorClass: 'auth', at });
    expect(refusedKeyCounts(actor.getSnapshot().context)).toEqual({ quarantined: 0, cooling: 0 });
    expect(Object.keys(actor.getSnapshot().children)).toEqual(['keyLink']);
    expect(reports).toEqual([]);
  });
});

describe("a key's probe: only its result decides, and it always ends", () => {
  const retryAfterMs = 4_000;
  /** A key refused at `at` (by `auth`, or cooled by a rate limit), its probe `probe` out at `until`. */
  function probing(refusal: 'quarantined' | 'cooling') {
    const k = key();
    if (refusal === 'quarantined') k.send({ type: 'key.failed', callId: 'c1', errorClass: 'auth', at });
    else k.send({ type: 'key.failed', callId: 'c1', errorClass: 'rate_limited', retryAfterMs: 2_000, at });
    const until = refusal === 'quarantined' ? at + quarantineMs : at + 2_000;
    k.send({ type: 'key.called', callId: 'probe', at: until });
    expect(k.state).toEqual({ [refusal]: 'probing' });
    return { k, until };
  }

  for (const refusal of ['quarantined', 'cooling'] as const) {
    it(`${refusal}: a probe failing with a quarantine class quarantines the key afresh from the failure`, () => {
      const { k, until } = probing(refusal);
      k.send({ type: 'key.failed', callId: 'probe', errorClass: 'permission', at: until + 5 });
      expect(k.state).toEqual({ quarantined: 'waiting' });
      expect(k.context).toMatchObject({
        errorClass: 'permission',
        until: until + 5 + quarantineMs,
        probeCallId: null,
      });
    });

    it(`${refusal}: a probe that is rate limited cools the key afresh until its Retry-After`, () => {
      const { k, until } = probing(refusal);
      k.send({
        type: 'key.failed',
        callId: 'probe',
        errorClass: 'rate_limited',
        retryAfterMs,
        at: until + 5,
      });
      expect(k.state).toEqual({ cooling: 'waiting' });
      expect(k.context).toMatchObject({
        errorClass: 'rate_limited',
        until: until + 5 + retryAfterMs,
        probeCallId: null,
      });
    });

    it(`${refusal}: a probe failing provider-side proves nothing: the refusal stays, the next call probes`, () => {
      const { k, until } = probing(refusal);
      const before = k.context.errorClass;
      k.send({ type: 'key.failed', callId: 'probe', errorClass: 'server_error', at: until + 5 });
      expect(k.state).toEqual({ [refusal]: 'waiting' });
      expect(k.context).toMatchObject({ errorClass: before, until, probeCallId: null });
      k.send({ type: 'key.called', callId: 'next', at: until + 6 });
      expect(k.state).toEqual({ [refusal]: 'probing' });
      expect(k.context.probeCallId).toBe('next');
    });

    it(`${refusal}: another call's provider-side failure or success leaves the probe in flight`, () => {
      const { k, until } = probing(refusal);
      k.send({ type: 'key.failed', callId: 'other', errorClass: 'server_error', at: until + 1 });
      k.send({ type: 'key.answered', callId: 'other', at: until + 2 });
      expect(k.state).toEqual({ [refusal]: 'probing' });
      expect(k.context.probeCallId).toBe('probe');
    });

    it(`${refusal}: the fleet's echo of the key's own record leaves the probe in flight`, () => {
      const { k, until } = probing(refusal);
      const own = { state: refusal, errorClass: k.context.errorClass, until: k.context.until };
      k.send({ type: 'key.synced', shared: own, at: until + 1 });
      expect(k.state).toEqual({ [refusal]: 'probing' });
      expect(k.context.probeCallId).toBe('probe');
    });
  }

  it("cooling: another call's quarantine class quarantines the key, probe or not", () => {
    const { k, until } = probing('cooling');
    k.send({ type: 'key.failed', callId: 'other', errorClass: 'quota_exhausted', at: until + 1 });
    expect(k.state).toEqual({ quarantined: 'waiting' });
    expect(k.context).toMatchObject({
      errorClass: 'quota_exhausted',
      until: until + 1 + quarantineMs,
      probeCallId: null,
    });
  });
});

describe("a refused key's own circuit and its fleet record", () => {
  it('a trip while quarantined takes the later until and the streak class; while probing it frees the probe', () => {
    const waiting = key();
    waiting.send({ type: 'key.failed', callId: 'c1', errorClass: 'auth', at });
    waiting.send({ type: 'key.tripped', errorClass: 'timeout', periodMs: 2 * quarantineMs, at: at + 1 });
    expect(waiting.state).toEqual({ quarantined: 'waiting' });
    expect(waiting.context).toMatchObject({ errorClass: 'timeout', until: at + 1 + 2 * quarantineMs });
    // A shorter trip never shortens the quarantine.
    waiting.send({ type: 'key.tripped', errorClass: 'connection', periodMs: 1_000, at: at + 2 });
    expect(waiting.context).toMatchObject({ errorClass: 'connection', until: at + 1 + 2 * quarantineMs });

    const probe = key();
    probe.send({ type: 'key.failed', callId: 'c1', errorClass: 'auth', at });
    probe.send({ type: 'key.called', callId: 'probe', at: at + quarantineMs });
    probe.send({ type: 'key.tripped', errorClass: 'timeout', periodMs: 3_000, at: at + quarantineMs + 1 });
    expect(probe.state).toEqual({ quarantined: 'waiting' });
    expect(probe.context).toMatchObject({
      errorClass: 'timeout',
      until: at + quarantineMs + 1 + 3_000,
      probeCallId: null,
    });
  });

  it('a trip while cooling quarantines the key for the trip period', () => {
    const k = key();
    k.send({ type: 'key.failed', callId: 'c1', errorClass: 'rate_limited', retryAfterMs: 2_000, at });
    k.send({ type: 'key.tripped', errorClass: 'server_error', periodMs: 30_000, at: at + 1 });
    expect(k.state).toEqual({ quarantined: 'waiting' });
    expect(k.context).toMatchObject({
      errorClass: 'server_error',
      until: at + 1 + 30_000,
      probeCallId: null,
    });
  });

  it('another rate limit while cooling moves until to the later of the two, never earlier', () => {
    const k = key();
    k.send({ type: 'key.failed', callId: 'c1', errorClass: 'rate_limited', retryAfterMs: 2_000, at });
    k.send({
      type: 'key.failed',
      callId: 'c2',
      errorClass: 'rate_limited',
      retryAfterMs: 4_000,
      at: at + 10,
    });
    expect(k.state).toEqual({ cooling: 'waiting' });
    expect(k.context.until).toBe(at + 10 + 4_000);
    k.send({
      type: 'key.failed',
      callId: 'c3',
      errorClass: 'rate_limited',
      retryAfterMs: 1_000,
      at: at + 20,
    });
    expect(k.context.until).toBe(at + 10 + 4_000);
  });

  it("adopts the fleet's newer record of the same state while waiting: a later until, or only another class", () => {
    for (const [first, later] of [
      [
        { state: 'quarantined', errorClass: 'auth', until: at + 9_000 },
        { state: 'quarantined', errorClass: 'quota_exhausted', until: at + 19_000 },
      ],
      [
        { state: 'quarantined', errorClass: 'auth', until: at + 9_000 },
        { state: 'quarantined', errorClass: 'permission', until: at + 9_000 },
      ],
      [
        { state: 'cooling', errorClass: 'rate_limited', until: at + 3_000 },
        { state: 'cooling', errorClass: 'rate_limited', until: at + 8_000 },
      ],
    ] as const) {
      const k = key();
      k.send({ type: 'key.synced', shared: first, at });
      k.send({ type: 'key.synced', shared: later, at: at + 1 });
      expect(k.state).toEqual({ [later.state]: 'waiting' });
      expect(k.context).toMatchObject({
        errorClass: later.errorClass,
        until: later.until,
        probeCallId: null,
      });
    }
  });
});
