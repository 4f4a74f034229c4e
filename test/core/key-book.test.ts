/**
 * The key book's bookkeeping, one behaviour per test: only refused keys are kept, at most `maxKeys` of
 * them (the least recently touched forgotten first), nothing at all with KEY_QUARANTINE_MS=0, and the
 * fleet hears each change made here once and never an echo of its own.
 */
import { describe, expect, it, vi } from 'vitest';
import { createActor, fromCallback, SimulatedClock } from 'xstate';
import {
  keyAdmission,
  keyBookMachine,
  keyHealthOff,
  refusedKeyCounts,
} from '../../src/machines/key-book.machine.js';
import type { KeyLinkEvent, KeyLinkInput, KeyLinkReply } from '../../src/machines/key-link.js';

const at = 1_000_000;

function book(options: { quarantineMs?: number; maxKeys?: number; clock?: SimulatedClock } = {}) {
  const reports: KeyLinkEvent[] = [];
  const linkInputs: KeyLinkInput[] = [];
  const keyLink = fromCallback<KeyLinkEvent, KeyLinkInput, KeyLinkReply>(({ receive, input }) => {
    linkInputs.push(input);
    receive((event) => reports.push(event));
  });
  const actor = createActor(keyBookMachine.provide({ actors: { keyLink } }), {
    input: {
      providerId: 'claude',
      quarantineMs: options.quarantineMs ?? 60_000,
      coolingMs: 5_000,
      maxKeys: options.maxKeys ?? 3,
    },
    ...(options.clock === undefined ? {} : { clock: options.clock }),
  }).start();
  const keys = () => actor.getSnapshot().context.keys;
  const version = () => actor.getSnapshot().context.version;
  return { actor, keys, reports, linkInputs, version };
}

describe('key book', () => {
  it('keeps nothing of a key that works, and a refused key until its probe succeeds', () => {
    const { actor, keys } = book();
    actor.send({ type: 'key.called', keyId: 'a1', callId: 'c1', at });
    actor.send({ type: 'key.answered', keyId: 'a1', callId: 'c1', at });
    actor.send({ type: 'key.failed', keyId: 'a1', callId: 'c2', errorClass: 'server_error', at });
    expect(keys().size).toBe(0);
    actor.send({ type: 'key.failed', keyId: 'a1', callId: 'c3', errorClass: 'auth', at });
    expect(keyAdmission(keys(), 'a1', at + 1)).toEqual({
      admit: false,
      reason: 'key_quarantined',
      errorClass: 'auth',
      until: at + 60_000,
    });
    actor.send({ type: 'key.called', keyId: 'a1', callId: 'probe', at: at + 60_000 });
    // Awaiting its probe, the key still counts as refused: it is not known to work yet.
    expect(refusedKeyCounts(keys())).toEqual({ quarantined: 1, cooling: 0 });
    actor.send({ type: 'key.answered', keyId: 'a1', callId: 'probe', at: at + 60_001 });
    expect(keys().size).toBe(0);
    expect(refusedKeyCounts(keys())).toEqual({ quarantined: 0, cooling: 0 });
  });

  it('forgets the least recently touched refused key beyond maxKeys', () => {
    const { actor, keys } = book({ maxKeys: 3 });
    for (const keyId of ['k1', 'k2', 'k3'])
      actor.send({ type: 'key.failed', keyId, callId: keyId, errorClass: 'quota_exhausted', at });
    // k1 touched again: k2 is now the least recently touched.
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'again', errorClass: 'quota_exhausted', at });
    actor.send({ type: 'key.failed', keyId: 'k4', callId: 'k4', errorClass: 'rate_limited', at });
    expect(keys().ids().sort()).toEqual(['k1', 'k3', 'k4']);
    expect(refusedKeyCounts(keys())).toEqual({ quarantined: 2, cooling: 1 });
  });

  it('keeps nothing with KEY_QUARANTINE_MS=0 (per-key health off), not even a tripped key', () => {
    const { actor, keys, reports } = book({ quarantineMs: 0 });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    actor.send({ type: 'key.tripped', keyId: 'k2', errorClass: 'timeout', at });
    expect(keys().size).toBe(0);
    expect(reports).toEqual([]);
  });

  it('tells the fleet each change made here once, and adopts a change heard from it without echoing it', () => {
    const { actor, keys, reports } = book();
    actor.send({
      type: 'key.failed',
      keyId: 'k1',
      callId: 'c1',
      errorClass: 'rate_limited',
      retryAfterMs: 7_000,
      at,
    });
    // A second failure of a call started before the cooling: `until` stays the later one, nothing new to tell.
    actor.send({
      type: 'key.failed',
      keyId: 'k1',
      callId: 'c0',
      errorClass: 'rate_limited',
      retryAfterMs: 2_000,
      at,
    });
    actor.send({
      type: 'key.synced',
      keyId: 'k2',
      shared: { state: 'quarantined', errorClass: 'permission', until: at + 9_000 },
      at,
    });
    expect(reports).toEqual([
      {
        type: 'key.report',
        keyId: 'k1',
        shared: { state: 'cooling', errorClass: 'rate_limited', until: at + 7_000 },
        at,
      },
    ]);
    expect(keyAdmission(keys(), 'k2', at)).toMatchObject({
      admit: false,
      reason: 'key_quarantined',
      errorClass: 'permission',
    });
  });
});

describe('key book: what it admits and what it takes', () => {
  it('refuses every other call while a key probe is in flight, even past until', () => {
    const { actor, keys } = book();
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c1', errorClass: 'auth', at });
    actor.send({ type: 'key.called', keyId: 'k', callId: 'probe', at: at + 60_000 });
    expect(keyAdmission(keys(), 'k', at + 60_001)).toEqual({
      admit: false,
      reason: 'key_quarantined',
      errorClass: 'auth',
      until: at + 60_000,
    });
  });

  it('quarantines a tripped key (its own circuit) and tells the fleet', () => {
    const { actor, keys, reports } = book();
    actor.send({ type: 'key.tripped', keyId: 'k', errorClass: 'timeout', periodMs: 2_000, at });
    expect(keyAdmission(keys(), 'k', at + 1)).toEqual({
      admit: false,
      reason: 'key_quarantined',
      errorClass: 'timeout',
      until: at + 2_000,
    });
    expect(reports).toHaveLength(1);
  });

  it('admits a key whose fleet record carries no class or no until (a refusal it cannot date)', () => {
    const { actor, keys } = book();
    actor.send({
      type: 'key.synced',
      keyId: 'no-until',
      shared: { state: 'quarantined', errorClass: 'auth', until: null },
      at,
    });
    actor.send({
      type: 'key.synced',
      keyId: 'no-class',
      shared: { state: 'cooling', errorClass: null, until: at + 5_000 },
      at,
    });
    expect(keyAdmission(keys(), 'no-until', at)).toEqual({ admit: true });
    expect(keyAdmission(keys(), 'no-class', at)).toEqual({ admit: true });
  });

  it('with per-key health off, takes nothing from the fleet either', () => {
    const { actor, keys } = book({ quarantineMs: 0 });
    actor.send({
      type: 'key.synced',
      keyId: 'k',
      shared: { state: 'quarantined', errorClass: 'auth', until: at + 9_000 },
      at,
    });
    expect(keys().size).toBe(0);
    expect(keyAdmission(keys(), 'k', at)).toEqual({ admit: true });
  });

  it('counts each update in version; an event about an untracked key that refuses nothing leaves it as it was', () => {
    const { actor, version } = book();
    actor.send({ type: 'key.called', keyId: 'k', callId: 'c1', at });
    actor.send({ type: 'key.answered', keyId: 'k', callId: 'c1', at });
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c2', errorClass: 'server_error', at });
    actor.send({
      type: 'key.synced',
      keyId: 'k',
      shared: { state: 'healthy', errorClass: null, until: null },
      at,
    });
    expect(version()).toBe(0);
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c3', errorClass: 'auth', at });
    actor.send({ type: 'key.called', keyId: 'k', callId: 'c4', at: at + 1 });
    expect(version()).toBe(2);
  });

  it("gives its fleet link the provider's id", () => {
    const { linkInputs } = book();
    expect(linkInputs).toEqual([{ providerId: 'claude' }]);
  });

  it('runs on its embedded link (no fleet) and on keyHealthOff (keeps nothing)', () => {
    const embedded = createActor(keyBookMachine, {
      input: { providerId: 'gpt', quarantineMs: 60_000, coolingMs: 5_000, maxKeys: 3 },
    }).start();
    embedded.send({ type: 'key.failed', keyId: 'k', callId: 'c1', errorClass: 'auth', at });
    expect(embedded.getSnapshot().context.keys.size).toBe(1);

    const off = createActor(keyBookMachine, { input: { providerId: 'gpt', ...keyHealthOff } }).start();
    off.send({ type: 'key.failed', keyId: 'k', callId: 'c1', errorClass: 'auth', at });
    expect(off.getSnapshot().context.keys.size).toBe(0);
  });
});

describe('key book: forgetting a refusal nobody probes', () => {
  const day = 86_400_000;

  it('forgets a quarantine a quarantine after its until (not a millisecond before), and it leaves the counts', () => {
    const clock = new SimulatedClock();
    const { actor, keys, reports, version } = book({ clock });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    actor.send({ type: 'key.failed', keyId: 'k2', callId: 'c2', errorClass: 'rate_limited', at });
    // k1 quarantined until at + 60 000, kept 60 000 more; k2 cooling until at + 5 000, kept to at + 65 000.
    clock.increment(64_999);
    expect(keys().ids().sort()).toEqual(['k1', 'k2']);
    clock.increment(1);
    expect(keys().ids()).toEqual(['k1']);
    expect(refusedKeyCounts(keys())).toEqual({ quarantined: 1, cooling: 0 });
    clock.increment(119_999 - 65_000);
    expect(keys().ids()).toEqual(['k1']);
    const before = version();
    clock.increment(1);
    expect(keys().size).toBe(0);
    expect(refusedKeyCounts(keys())).toEqual({ quarantined: 0, cooling: 0 });
    expect(version()).toBe(before + 1);
    // Forgetting is not news for the fleet: the two refusals were told, nothing more.
    expect(reports.map((report) => report.shared.state)).toEqual(['quarantined', 'cooling']);
  });

  it('counts a key kept again from its latest change, not from its first', () => {
    const clock = new SimulatedClock();
    const { actor, keys } = book({ clock });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    clock.increment(60_000);
    actor.send({ type: 'key.called', keyId: 'k1', callId: 'probe', at: at + 60_000 });
    clock.increment(1);
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'probe', errorClass: 'auth', at: at + 60_001 });
    // Quarantined again until at + 120 001: forgotten at at + 180 001, not at the first refusal's at + 120 000.
    clock.increment(59_999);
    expect(keys().ids()).toEqual(['k1']);
    clock.increment(60_000);
    expect(keys().ids()).toEqual(['k1']);
    clock.increment(1);
    expect(keys().size).toBe(0);
  });

  it('keeps a refusal the fleet holds for 30 days past what one timer can wait, and forgets it on time', () => {
    const clock = new SimulatedClock();
    const { actor, keys } = book({ clock });
    actor.send({
      type: 'key.synced',
      keyId: 'k1',
      shared: { state: 'quarantined', errorClass: 'permission', until: at + 30 * day },
      at,
    });
    clock.increment(2_147_483_647);
    expect(keys().ids()).toEqual(['k1']);
    clock.increment(30 * day + 60_000 - 2_147_483_647 - 1);
    expect(keys().ids()).toEqual(['k1']);
    clock.increment(1);
    expect(keys().size).toBe(0);
  });

  it('forgets a refusal the fleet dates long past at the next tick, and one without until a quarantine after it came', () => {
    const clock = new SimulatedClock();
    const { actor, keys } = book({ clock });
    actor.send({
      type: 'key.synced',
      keyId: 'old',
      shared: { state: 'quarantined', errorClass: 'permission', until: at - 3 * 60_000 },
      at,
    });
    actor.send({
      type: 'key.synced',
      keyId: 'undated',
      shared: { state: 'cooling', errorClass: 'rate_limited', until: null },
      at,
    });
    expect(keys().ids().sort()).toEqual(['old', 'undated']);
    clock.increment(1);
    expect(keys().ids()).toEqual(['undated']);
    clock.increment(60_000 - 2);
    expect(keys().ids()).toEqual(['undated']);
    clock.increment(1);
    expect(keys().size).toBe(0);
  });

  it('leaves no timer behind for a key the LRU map already dropped', () => {
    vi.useFakeTimers();
    try {
      const { actor, keys } = book({ quarantineMs: 1_000, maxKeys: 1 });
      actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
      actor.send({ type: 'key.failed', keyId: 'k2', callId: 'c2', errorClass: 'auth', at });
      expect(keys().ids()).toEqual(['k2']);
      vi.advanceTimersByTime(3_000);
      expect(keys().size).toBe(0);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('holds one expiry timer per tracked key however often the key changes', () => {
    vi.useFakeTimers();
    try {
      const { actor } = book();
      actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'rate_limited', at });
      actor.send({ type: 'key.called', keyId: 'k1', callId: 'probe', at: at + 5_000 });
      actor.send({ type: 'key.failed', keyId: 'k1', callId: 'probe', errorClass: 'auth', at: at + 5_001 });
      expect(vi.getTimerCount()).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('never forgets a key that became healthy and then refused again early, by the old refusal', () => {
    const clock = new SimulatedClock();
    const { actor, keys } = book({ clock });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'rate_limited', at });
    clock.increment(5_000);
    actor.send({ type: 'key.called', keyId: 'k1', callId: 'probe', at: at + 5_000 });
    actor.send({ type: 'key.answered', keyId: 'k1', callId: 'probe', at: at + 5_000 });
    expect(keys().size).toBe(0);
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c2', errorClass: 'auth', at: at + 5_000 });
    // The cooling would have been forgotten at at + 65 000; the new quarantine stays until at + 125 000.
    clock.increment(60_000);
    expect(keys().ids()).toEqual(['k1']);
    clock.increment(59_999);
    expect(keys().ids()).toEqual(['k1']);
    clock.increment(1);
    expect(keys().size).toBe(0);
  });
});
