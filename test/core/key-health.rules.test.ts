/**
 * Per-key health rules the key graph test does not send, event by event (docs/errors.md "Per-key
 * health", expected values written out): the fleet's record adopted (`key.synced`), the key's own
 * circuit (`key.tripped`, its own period), the probe at `until` exactly, the health a caller is shown
 * (`keyHealthView`), and the fleet told of every change made here (a class or an `until` that moved).
 */
import { describe, expect, it } from 'vitest';
import { createActor, fromCallback, initialTransition, transition, type SnapshotFrom } from 'xstate';
import { keyBookMachine, keyHealthView } from '../../src/machines/key-book.machine.js';
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
  return { actor, reports, keys: () => actor.getSnapshot().context.keys };
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
    expect(actor.getSnapshot().context.keys.size).toBe(0);
    expect(reports).toEqual([]);
  });
});
