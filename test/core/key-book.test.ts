/**
 * The key book's bookkeeping, one behaviour per test: only refused keys are kept, each as a live key
 * actor, at most `maxKeys` of them (the least recently touched forgotten first), nothing at all with
 * KEY_QUARANTINE_MS=0, admissions answered by message (`key.admit` → `key.admitted` / `key.refused`), and
 * the fleet hears each change made here once and never an echo of its own.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { createActor, fromCallback, SimulatedClock, type AnyActorRef } from 'xstate';
import type { CallRequest } from '../../src/machines/call-request.js';
import {
  keyActorId,
  keyBookMachine,
  keyHealthOff,
  keyHealthView,
  refusedKeyCounts,
} from '../../src/machines/key-book.machine.js';
import type { KeyAnswer } from '../../src/machines/key-health.machine.js';
import type { KeyLinkEvent, KeyLinkInput, KeyLinkReply } from '../../src/machines/key-link.js';
import { Secret } from '../../src/security/secret.js';
import { request } from './gateway-harness.js';

const at = 1_000_000;
const apiKey = new Secret('test-claude-key-book');

/** What the book answers a call with `keyId` at `at`, asked by message as the provider asks it. */
function admission(actor: AnyActorRef, keyId: string, when: number) {
  const answers: KeyAnswer[] = [];
  const replyTo = createActor(fromCallback<KeyAnswer>(({ receive }) => receive((answer) => answers.push(answer)))).start();
  const call: CallRequest = { callId: `ask-${when}`, keyId, replyTo, request, apiKey, validate: () => ({ ok: true, value: {} }), at: when };
  actor.send({ type: 'key.admit', keyId, call, replyTo, at: when });
  replyTo.stop();
  expect(answers).toHaveLength(1);
  const [answer] = answers;
  expect(answer?.call).toBe(call);
  if (answer?.type === 'key.admitted') return { admit: true };
  expect(answer?.type).toBe('key.refused');
  if (answer?.type !== 'key.refused') throw new Error('neither admitted nor refused');
  return { admit: false, reason: answer.reason, errorClass: answer.errorClass, until: answer.until };
}

/** The live key actors under the book (on its shelves), by key id. */
function keyActors(actor: AnyActorRef): Map<string, AnyActorRef> {
  const found = new Map<string, AnyActorRef>();
  const children = (actor.getSnapshot() as { children: Record<string, AnyActorRef> }).children;
  for (const [id, shelf] of Object.entries(children)) {
    if (!id.startsWith('shelf.')) continue;
    for (const [keyActor, key] of Object.entries((shelf.getSnapshot() as { children: Record<string, AnyActorRef> }).children))
      found.set(keyActor.slice('key.'.length), key);
  }
  return found;
}

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
  const context = () => actor.getSnapshot().context;
  /** The keys the book tracks, by id: those with a live key actor. */
  const tracked = () => [...keyActors(actor).keys()].sort();
  const admit = (keyId: string, when: number) => admission(actor, keyId, when);
  return { actor, context, tracked, reports, linkInputs, admit };
}

describe('key book', () => {
  it('keeps nothing of a key that works, and a refused key until its probe succeeds', () => {
    const { actor, tracked, context, admit } = book();
    actor.send({ type: 'key.called', keyId: 'a1', callId: 'c1', at });
    actor.send({ type: 'key.answered', keyId: 'a1', callId: 'c1', at });
    actor.send({ type: 'key.failed', keyId: 'a1', callId: 'c2', errorClass: 'server_error', at });
    expect(tracked()).toEqual([]);
    actor.send({ type: 'key.failed', keyId: 'a1', callId: 'c3', errorClass: 'auth', at });
    expect(admit('a1', at + 1)).toEqual({
      admit: false,
      reason: 'key_quarantined',
      errorClass: 'auth',
      until: at + 60_000,
    });
    actor.send({ type: 'key.called', keyId: 'a1', callId: 'probe', at: at + 60_000 });
    // Awaiting its probe, the key still counts as refused: it is not known to work yet.
    expect(refusedKeyCounts(context())).toEqual({ quarantined: 1, cooling: 0 });
    actor.send({ type: 'key.answered', keyId: 'a1', callId: 'probe', at: at + 60_001 });
    expect(tracked()).toEqual([]);
    expect(refusedKeyCounts(context())).toEqual({ quarantined: 0, cooling: 0 });
  });

  it('forgets the least recently touched refused key beyond maxKeys', () => {
    const { actor, tracked, context } = book({ maxKeys: 3 });
    for (const keyId of ['k1', 'k2', 'k3'])
      actor.send({ type: 'key.failed', keyId, callId: keyId, errorClass: 'quota_exhausted', at });
    // k1 touched again: k2 is now the least recently touched.
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'again', errorClass: 'quota_exhausted', at });
    actor.send({ type: 'key.failed', keyId: 'k4', callId: 'k4', errorClass: 'rate_limited', at });
    expect(tracked()).toEqual(['k1', 'k3', 'k4']);
    expect(refusedKeyCounts(context())).toEqual({ quarantined: 2, cooling: 1 });
  });

  it('forgets by the latest touch, however often a key was touched', () => {
    const { actor, tracked } = book({ maxKeys: 3 });
    for (const keyId of ['k1', 'k2', 'k3'])
      actor.send({ type: 'key.failed', keyId, callId: keyId, errorClass: 'quota_exhausted', at });
    // k1 touched twice, then k2 and k3 again: k1 is now the least recently touched, then k2.
    for (const keyId of ['k1', 'k1', 'k2', 'k3'])
      actor.send({ type: 'key.failed', keyId, callId: `again-${keyId}`, errorClass: 'quota_exhausted', at });
    actor.send({ type: 'key.failed', keyId: 'k4', callId: 'k4', errorClass: 'auth', at });
    expect(tracked()).toEqual(['k2', 'k3', 'k4']);
    actor.send({ type: 'key.failed', keyId: 'k5', callId: 'k5', errorClass: 'auth', at });
    expect(tracked()).toEqual(['k3', 'k4', 'k5']);
  });

  it('keeps nothing with KEY_QUARANTINE_MS=0 (per-key health off), not even a tripped key', () => {
    const { actor, tracked, reports } = book({ quarantineMs: 0 });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    actor.send({ type: 'key.tripped', keyId: 'k2', errorClass: 'timeout', at });
    expect(tracked()).toEqual([]);
    expect(reports).toEqual([]);
  });

  it('tells the fleet each change made here once, and adopts a change heard from it without echoing it', () => {
    const { actor, admit, reports } = book();
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
    expect(admit('k2', at)).toMatchObject({
      admit: false,
      reason: 'key_quarantined',
      errorClass: 'permission',
    });
  });
});

describe('key book: what it admits and what it takes', () => {
  it('refuses every other call while a key probe is in flight, even past until', () => {
    const { actor, admit } = book();
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c1', errorClass: 'auth', at });
    // Past until, the next call is the probe; once it is out, every other call is refused.
    expect(admit('k', at + 60_000)).toEqual({ admit: true });
    actor.send({ type: 'key.called', keyId: 'k', callId: 'probe', at: at + 60_000 });
    expect(admit('k', at + 60_001)).toEqual({
      admit: false,
      reason: 'key_quarantined',
      errorClass: 'auth',
      until: at + 60_000,
    });
  });

  it('quarantines a tripped key (its own circuit) and tells the fleet', () => {
    const { actor, admit, reports } = book();
    actor.send({ type: 'key.tripped', keyId: 'k', errorClass: 'timeout', periodMs: 2_000, at });
    expect(admit('k', at + 1)).toEqual({
      admit: false,
      reason: 'key_quarantined',
      errorClass: 'timeout',
      until: at + 2_000,
    });
    expect(reports).toHaveLength(1);
  });

  it('admits a key whose fleet record carries no class or no until (a refusal it cannot date)', () => {
    const { actor, admit } = book();
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
    expect(admit('no-until', at)).toEqual({ admit: true });
    expect(admit('no-class', at)).toEqual({ admit: true });
  });

  it('with per-key health off, takes nothing from the fleet either', () => {
    const { actor, tracked, admit } = book({ quarantineMs: 0 });
    actor.send({
      type: 'key.synced',
      keyId: 'k',
      shared: { state: 'quarantined', errorClass: 'auth', until: at + 9_000 },
      at,
    });
    expect(tracked()).toEqual([]);
    expect(admit('k', at)).toEqual({ admit: true });
  });

  it('keeps no actor for an event about an untracked key that refuses nothing', () => {
    const { actor, tracked } = book();
    actor.send({ type: 'key.called', keyId: 'k', callId: 'c1', at });
    actor.send({ type: 'key.answered', keyId: 'k', callId: 'c1', at });
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c2', errorClass: 'server_error', at });
    actor.send({
      type: 'key.synced',
      keyId: 'k',
      shared: { state: 'healthy', errorClass: null, until: null },
      at,
    });
    expect(tracked()).toEqual([]);
    expect(Object.keys(actor.getSnapshot().children)).toEqual(['keyLink']);
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
    expect(keyActors(embedded).size).toBe(1);

    const off = createActor(keyBookMachine, { input: { providerId: 'gpt', ...keyHealthOff } }).start();
    off.send({ type: 'key.failed', keyId: 'k', callId: 'c1', errorClass: 'auth', at });
    expect(keyActors(off).size).toBe(0);
    expect(refusedKeyCounts(off.getSnapshot().context)).toEqual({ quarantined: 0, cooling: 0 });
  });
});

describe('key book: forgetting a refusal nobody probes', () => {
  const day = 86_400_000;

  it('forgets a quarantine a quarantine after its until (not a millisecond before), and it leaves the counts', () => {
    const clock = new SimulatedClock();
    const { actor, tracked, context, reports } = book({ clock });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    actor.send({ type: 'key.failed', keyId: 'k2', callId: 'c2', errorClass: 'rate_limited', at });
    // k1 quarantined until at + 60 000, kept 60 000 more; k2 cooling until at + 5 000, kept to at + 65 000.
    clock.increment(64_999);
    expect(tracked()).toEqual(['k1', 'k2']);
    clock.increment(1);
    expect(tracked()).toEqual(['k1']);
    expect(refusedKeyCounts(context())).toEqual({ quarantined: 1, cooling: 0 });
    clock.increment(119_999 - 65_000);
    expect(tracked()).toEqual(['k1']);
    clock.increment(1);
    expect(tracked()).toEqual([]);
    expect(keyActors(actor).size).toBe(0);
    expect(refusedKeyCounts(context())).toEqual({ quarantined: 0, cooling: 0 });
    // Forgetting is not news for the fleet: the two refusals were told, nothing more.
    expect(reports.map((report) => report.shared.state)).toEqual(['quarantined', 'cooling']);
  });

  it('counts a key kept again from its latest change, not from its first', () => {
    const clock = new SimulatedClock();
    const { actor, tracked } = book({ clock });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    clock.increment(60_000);
    actor.send({ type: 'key.called', keyId: 'k1', callId: 'probe', at: at + 60_000 });
    clock.increment(1);
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'probe', errorClass: 'auth', at: at + 60_001 });
    // Quarantined again until at + 120 001: forgotten at at + 180 001, not at the first refusal's at + 120 000.
    clock.increment(59_999);
    expect(tracked()).toEqual(['k1']);
    clock.increment(60_000);
    expect(tracked()).toEqual(['k1']);
    clock.increment(1);
    expect(tracked()).toEqual([]);
  });

  it('keeps a refusal the fleet holds for 30 days past what one timer can wait, and forgets it on time', () => {
    const clock = new SimulatedClock();
    const { actor, tracked } = book({ clock });
    actor.send({
      type: 'key.synced',
      keyId: 'k1',
      shared: { state: 'quarantined', errorClass: 'permission', until: at + 30 * day },
      at,
    });
    clock.increment(2_147_483_647);
    expect(tracked()).toEqual(['k1']);
    clock.increment(30 * day + 60_000 - 2_147_483_647 - 1);
    expect(tracked()).toEqual(['k1']);
    clock.increment(1);
    expect(tracked()).toEqual([]);
  });

  it('forgets a refusal the fleet dates long past at the next tick, and one without until a quarantine after it came', () => {
    const clock = new SimulatedClock();
    const { actor, tracked } = book({ clock });
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
    expect(tracked()).toEqual(['old', 'undated']);
    clock.increment(1);
    expect(tracked()).toEqual(['undated']);
    // The book holds one timer: the undated key's is set by the tick that forgot the old one, a quarantine
    // from the undated key's arrival (a timer fires no earlier than asked: here that tick's 1 ms later).
    clock.increment(60_000 - 1);
    expect(tracked()).toEqual(['undated']);
    clock.increment(1);
    expect(tracked()).toEqual([]);
  });

  it('forgets each of many keys at its own time, whatever order they came in', () => {
    const clock = new SimulatedClock();
    const { actor, tracked } = book({ clock, maxKeys: 40 });
    // Cooled for 1 000 to 2 900 ms in a shuffled order: each forgotten a quarantine (60 000) after its until.
    const forgetAt = new Map<string, number>();
    for (let i = 0; i < 20; i += 1) {
      const retryAfterMs = 1_000 + ((i * 7) % 20) * 100;
      actor.send({ type: 'key.failed', keyId: `k${i}`, callId: `c${i}`, errorClass: 'rate_limited', retryAfterMs, at });
      forgetAt.set(`k${i}`, retryAfterMs + 60_000);
    }
    // One key healed meanwhile (never forgotten: it left), one cooled again later (forgotten later).
    actor.send({ type: 'key.called', keyId: 'k3', callId: 'probe', at: at + 2_500 });
    actor.send({ type: 'key.answered', keyId: 'k3', callId: 'probe', at: at + 2_500 });
    forgetAt.delete('k3');
    actor.send({ type: 'key.failed', keyId: 'k5', callId: 'late', errorClass: 'rate_limited', retryAfterMs: 3_000, at: at + 100 });
    forgetAt.set('k5', Math.max(forgetAt.get('k5') ?? 0, 100 + 3_000 + 60_000));
    clock.increment(60_999);
    for (let now = 60_999; now <= 63_200; now += 1) {
      const expected = [...forgetAt].filter(([, time]) => time > now).map(([id]) => id).sort();
      expect(tracked(), `at ${now}`).toEqual(expected);
      clock.increment(1);
    }
    expect(tracked()).toEqual([]);
  });

  it('forgets a key cooled again 300 times at its last time, and another key at its own', () => {
    const clock = new SimulatedClock();
    const { actor, tracked } = book({ clock });
    actor.send({ type: 'key.failed', keyId: 'steady', callId: 's', errorClass: 'auth', at });
    for (let i = 0; i < 300; i += 1)
      actor.send({ type: 'key.failed', keyId: 'busy', callId: `b${i}`, errorClass: 'rate_limited', retryAfterMs: 1_000, at: at + i });
    // steady: until at + 60 000, forgotten at + 120 000; busy: until at + 299 + 1 000, forgotten at + 61 299
    // (the book's timer, set for busy's first time, at + 61 000, waits again for the rest then).
    clock.increment(61_000);
    expect(tracked()).toEqual(['busy', 'steady']);
    clock.increment(298);
    expect(tracked()).toEqual(['busy', 'steady']);
    clock.increment(1);
    expect(tracked()).toEqual(['steady']);
    clock.increment(120_000 - 61_299 - 1);
    expect(tracked()).toEqual(['steady']);
    clock.increment(1);
    expect(tracked()).toEqual([]);
  });

  it('leaves no timer behind for a key the LRU map already dropped', () => {
    vi.useFakeTimers();
    try {
      const { actor, tracked } = book({ quarantineMs: 1_000, maxKeys: 1 });
      actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
      actor.send({ type: 'key.failed', keyId: 'k2', callId: 'c2', errorClass: 'auth', at });
      expect(tracked()).toEqual(['k2']);
      vi.advanceTimersByTime(3_000);
      expect(tracked()).toEqual([]);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('holds one expiry timer however many keys are tracked and however often they change', () => {
    vi.useFakeTimers();
    try {
      const { actor } = book();
      actor.send({ type: 'key.failed', keyId: 'k2', callId: 'c2', errorClass: 'auth', at });
      actor.send({ type: 'key.failed', keyId: 'k3', callId: 'c3', errorClass: 'rate_limited', at });
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
    const { actor, tracked } = book({ clock });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'rate_limited', at });
    clock.increment(5_000);
    actor.send({ type: 'key.called', keyId: 'k1', callId: 'probe', at: at + 5_000 });
    actor.send({ type: 'key.answered', keyId: 'k1', callId: 'probe', at: at + 5_000 });
    expect(tracked()).toEqual([]);
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c2', errorClass: 'auth', at: at + 5_000 });
    // The cooling would have been forgotten at at + 65 000; the new quarantine stays until at + 125 000.
    clock.increment(60_000);
    expect(tracked()).toEqual(['k1']);
    clock.increment(59_999);
    expect(tracked()).toEqual(['k1']);
    clock.increment(1);
    expect(tracked()).toEqual([]);
  });
});

describe('key book: each refused key is a live actor of its own', () => {
  it('spawns a key-health actor under the book for a refused key, and stops it once the key is healthy', () => {
    const { actor } = book();
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    const live = keyActors(actor).get('k1');
    expect(live?.id).toBe(keyActorId('k1'));
    expect(live?.getSnapshot()).toMatchObject({
      status: 'active',
      value: { quarantined: 'waiting' },
      context: { errorClass: 'auth', until: at + 60_000 },
    });
    // A key that works has no actor.
    expect([...keyActors(actor).keys()]).toEqual(['k1']);
    actor.send({ type: 'key.called', keyId: 'k1', callId: 'probe', at: at + 60_000 });
    expect(live?.getSnapshot().value).toEqual({ quarantined: 'probing' });
    actor.send({ type: 'key.answered', keyId: 'k1', callId: 'probe', at: at + 60_001 });
    expect(keyActors(actor).size).toBe(0);
    expect(live?.getSnapshot().status).toBe('stopped');
  });

  it('stops the least recently touched key actor beyond maxKeys', () => {
    const { actor } = book({ maxKeys: 2 });
    for (const keyId of ['k1', 'k2', 'k3'])
      actor.send({ type: 'key.failed', keyId, callId: keyId, errorClass: 'auth', at });
    expect([...keyActors(actor).keys()].sort()).toEqual(['k2', 'k3']);
  });

  it('answers an admission by message and changes nothing: neither the key nor its recency', () => {
    const { actor, admit, tracked } = book({ maxKeys: 2 });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    actor.send({ type: 'key.failed', keyId: 'k2', callId: 'c2', errorClass: 'auth', at });
    const before = keyActors(actor).get('k1')?.getSnapshot();
    // Past until: admitted (the call may be the probe), yet no probe is taken until the call starts.
    expect(admit('k1', at + 60_000)).toEqual({ admit: true });
    expect(keyActors(actor).get('k1')?.getSnapshot()).toBe(before);
    actor.send({ type: 'key.failed', keyId: 'k3', callId: 'c3', errorClass: 'auth', at });
    // k1 was asked about, not touched: it is still the least recently touched, and went first.
    expect(tracked()).toEqual(['k2', 'k3']);
  });
});

describe('key book: many keys', () => {
  it('leaves an earlier snapshot as it was: its counts do not follow later events', () => {
    const { actor, context } = book({ maxKeys: 2 });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    const before = context();
    actor.send({ type: 'key.failed', keyId: 'k2', callId: 'c2', errorClass: 'rate_limited', at });
    actor.send({ type: 'key.failed', keyId: 'k3', callId: 'c3', errorClass: 'rate_limited', at });
    expect(refusedKeyCounts(context())).toEqual({ quarantined: 0, cooling: 2 });
    expect(refusedKeyCounts(before)).toEqual({ quarantined: 1, cooling: 0 });
  });

  it('keeps 2 500 refused keys, each a live actor, and forgets the 100 least recently touched beyond them', () => {
    const { actor, tracked, context } = book({ maxKeys: 2_500 });
    const ids = Array.from({ length: 2_600 }, (_, i) => createHash('sha256').update(`key ${i}`).digest('hex').slice(0, 32));
    for (const [i, keyId] of ids.entries())
      actor.send({ type: 'key.failed', keyId, callId: `c${i}`, errorClass: 'auth', at: at + i });
    expect(tracked()).toEqual(ids.slice(100).sort());
    expect(refusedKeyCounts(context())).toEqual({ quarantined: 2_500, cooling: 0 });
  });
});

describe('key book: changes heard and told, and a full book', () => {
  const healthyShared = { state: 'healthy', errorClass: null, until: null } as const;

  it('tells the fleet when a key it refused works again (its probe answered)', () => {
    const { actor, reports } = book();
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c1', errorClass: 'auth', at });
    actor.send({ type: 'key.called', keyId: 'k', callId: 'probe', at: at + 60_000 });
    actor.send({ type: 'key.answered', keyId: 'k', callId: 'probe', at: at + 60_001 });
    expect(reports.map((report) => [report.keyId, report.shared])).toEqual([
      ['k', { state: 'quarantined', errorClass: 'auth', until: at + 60_000 }],
      ['k', healthyShared],
    ]);
  });

  it("adopts the fleet's word that a refused key works again: its actor stopped, calls admitted, nothing echoed", () => {
    const { actor, tracked, admit, reports } = book();
    actor.send({ type: 'key.failed', keyId: 'k', callId: 'c1', errorClass: 'auth', at });
    actor.send({ type: 'key.synced', keyId: 'k', shared: healthyShared, at: at + 10 });
    expect(tracked()).toEqual([]);
    expect(keyActors(actor).size).toBe(0);
    expect(admit('k', at + 20)).toEqual({ admit: true });
    expect(reports).toHaveLength(1);
  });

  it('passes a fleet refusal and a trip of a key it already refuses on to that key', () => {
    const { actor, admit } = book();
    actor.send({ type: 'key.failed', keyId: 'synced', callId: 'c1', errorClass: 'rate_limited', at });
    actor.send({
      type: 'key.synced',
      keyId: 'synced',
      shared: { state: 'quarantined', errorClass: 'permission', until: at + 9_000 },
      at,
    });
    expect(admit('synced', at + 1)).toEqual({ admit: false, reason: 'key_quarantined', errorClass: 'permission', until: at + 9_000 });

    actor.send({ type: 'key.failed', keyId: 'tripped', callId: 'c2', errorClass: 'rate_limited', at });
    // Cooling for 5 000 ms (KEY_COOLING_MS here), then tripped for 20 000 ms: quarantined to the later until.
    actor.send({ type: 'key.tripped', keyId: 'tripped', errorClass: 'timeout', periodMs: 20_000, at });
    expect(admit('tripped', at + 1)).toEqual({ admit: false, reason: 'key_quarantined', errorClass: 'timeout', until: at + 20_000 });
  });

  it('takes a trip or a fleet refusal of a new key when full: the least recently touched key goes', () => {
    const { actor, tracked, admit } = book({ maxKeys: 2 });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'auth', at });
    actor.send({ type: 'key.failed', keyId: 'k2', callId: 'c2', errorClass: 'auth', at });
    actor.send({ type: 'key.tripped', keyId: 'k3', errorClass: 'timeout', periodMs: 2_000, at });
    expect(tracked()).toEqual(['k2', 'k3']);
    expect(admit('k3', at + 1)).toMatchObject({ admit: false, errorClass: 'timeout' });
    actor.send({
      type: 'key.synced',
      keyId: 'k4',
      shared: { state: 'quarantined', errorClass: 'permission', until: at + 9_000 },
      at,
    });
    expect(tracked()).toEqual(['k3', 'k4']);
    expect([...keyActors(actor).keys()].sort()).toEqual(['k3', 'k4']);
    expect(admit('k4', at + 1)).toMatchObject({ admit: false, errorClass: 'permission' });
  });

  it('takes a refusal of a new key when full even when the key lands on a shelf not opened yet', () => {
    // 17 keys: two shelves. Fill the book with keys of one shelf, then refuse a key of the other, each way.
    const refusals = [
      (keyId: string) => ({ type: 'key.failed', keyId, callId: `c-${keyId}`, errorClass: 'auth', at }) as const,
      (keyId: string) => ({ type: 'key.tripped', keyId, errorClass: 'auth', periodMs: 60_000, at }) as const,
      (keyId: string) =>
        ({ type: 'key.synced', keyId, shared: { state: 'quarantined', errorClass: 'auth', until: at + 60_000 }, at }) as const,
    ];
    /** The shelf a key's actor lands on in a 17-key book, seen in a scratch book's children. */
    const shelfOf = (keyId: string) => {
      const { actor } = book({ maxKeys: 17 });
      actor.send({ type: 'key.failed', keyId, callId: keyId, errorClass: 'auth', at });
      const shelf = Object.keys(actor.getSnapshot().children).find((id) => id.startsWith('shelf.'));
      actor.stop();
      return shelf;
    };
    const candidates = Array.from({ length: 200 }, (_, i) => ({ keyId: `key-${i}`, shelf: shelfOf(`key-${i}`) }));
    const first = candidates.filter(({ shelf }) => shelf === 'shelf.0').map(({ keyId }) => keyId).slice(0, 17);
    const other = candidates.find(({ shelf }) => shelf === 'shelf.1')?.keyId ?? 'none';
    expect(first).toHaveLength(17);
    for (const refuse of refusals) {
      const { actor, tracked, admit } = book({ maxKeys: 17 });
      for (const keyId of first) actor.send({ type: 'key.failed', keyId, callId: keyId, errorClass: 'auth', at });
      expect(tracked()).toHaveLength(17);
      actor.send(refuse(other));
      expect(tracked()).toHaveLength(17);
      expect(keyActors(actor).has(other)).toBe(true);
      expect(admit(other, at + 1)).toMatchObject({ admit: false, errorClass: 'auth' });
    }
  });

  it('keeps working when the time to forget a key that has since healed comes', () => {
    const clock = new SimulatedClock();
    const { actor, tracked, admit } = book({ clock });
    actor.send({ type: 'key.failed', keyId: 'k1', callId: 'c1', errorClass: 'rate_limited', at });
    actor.send({ type: 'key.called', keyId: 'k1', callId: 'probe', at: at + 5_000 });
    actor.send({ type: 'key.answered', keyId: 'k1', callId: 'probe', at: at + 5_000 });
    expect(tracked()).toEqual([]);
    // k1's time to be forgotten (until + a quarantine) passes with nothing tracked.
    clock.increment(70_000);
    expect(actor.getSnapshot().status).toBe('active');
    actor.send({ type: 'key.failed', keyId: 'k2', callId: 'c2', errorClass: 'auth', at: at + 70_000 });
    expect(admit('k2', at + 70_001)).toMatchObject({ admit: false, errorClass: 'auth' });
    // k2 quarantined until at + 130 000, forgotten a quarantine later: the book still keeps time.
    clock.increment(189_999 - 70_000);
    expect(tracked()).toEqual(['k2']);
    clock.increment(1);
    expect(tracked()).toEqual([]);
  });

  it('forgets a key on time when another key came after the last forgetting', () => {
    const clock = new SimulatedClock();
    const { actor, tracked } = book({ clock });
    // early: cooling until at + 1 000, forgotten at at + 61 000; late: quarantined, forgotten at at + 120 000.
    actor.send({ type: 'key.failed', keyId: 'early', callId: 'e', errorClass: 'rate_limited', retryAfterMs: 1_000, at });
    actor.send({ type: 'key.failed', keyId: 'late', callId: 'l', errorClass: 'auth', at });
    clock.increment(61_000);
    expect(tracked()).toEqual(['late']);
    // newer: quarantined at at + 61 000, forgotten at at + 181 000; late keeps its own time.
    actor.send({ type: 'key.failed', keyId: 'newer', callId: 'n', errorClass: 'auth', at: at + 61_000 });
    clock.increment(120_000 - 61_000 - 1);
    expect(tracked()).toEqual(['late', 'newer']);
    clock.increment(1);
    expect(tracked()).toEqual(['newer']);
  });

  it('forgets every key refused at the same time, at that time', () => {
    const clock = new SimulatedClock();
    const { actor, tracked } = book({ clock, maxKeys: 10 });
    const ids = ['k5', 'k1', 'k4', 'k2', 'k3'];
    for (const keyId of ids) actor.send({ type: 'key.failed', keyId, callId: keyId, errorClass: 'auth', at });
    clock.increment(119_999);
    expect(tracked()).toEqual([...ids].sort());
    clock.increment(1);
    expect(tracked()).toEqual([]);
  });

  it('forgets each key at its own time while another key changes many times beside them', () => {
    const clock = new SimulatedClock();
    const { actor, tracked } = book({ clock });
    // late: quarantined until at + 60 000, forgotten at at + 120 000; early: cooling until at + 1 000,
    // forgotten at at + 61 000; busy: cooled again 150 times, its last until at + 149 + 5 000, forgotten at
    // at + 65 149.
    actor.send({ type: 'key.failed', keyId: 'late', callId: 'l', errorClass: 'auth', at });
    actor.send({ type: 'key.failed', keyId: 'early', callId: 'e', errorClass: 'rate_limited', retryAfterMs: 1_000, at });
    for (let i = 0; i < 150; i += 1)
      actor.send({ type: 'key.failed', keyId: 'busy', callId: `b${i}`, errorClass: 'rate_limited', retryAfterMs: 5_000, at: at + i });
    clock.increment(60_999);
    expect(tracked()).toEqual(['busy', 'early', 'late']);
    clock.increment(1);
    expect(tracked()).toEqual(['busy', 'late']);
    clock.increment(65_148 - 61_000);
    expect(tracked()).toEqual(['busy', 'late']);
    clock.increment(1);
    expect(tracked()).toEqual(['late']);
    clock.increment(120_000 - 65_149);
    expect(tracked()).toEqual([]);
  });
});

describe('key book: the view of one key (GET /v1/keys/status, docs/api.md)', () => {
  it('shows a refused key with its class and until, and healthy once until has passed or when untracked', () => {
    const { actor, context } = book();
    actor.send({ type: 'key.failed', keyId: 'q', callId: 'c1', errorClass: 'quota_exhausted', at });
    actor.send({ type: 'key.failed', keyId: 'c', callId: 'c2', errorClass: 'rate_limited', retryAfterMs: 7_000, at });
    expect(keyHealthView(context(), 'q', at + 1)).toEqual({ state: 'quarantined', errorClass: 'quota_exhausted', until: at + 60_000 });
    expect(keyHealthView(context(), 'c', at + 1)).toEqual({ state: 'cooling', errorClass: 'rate_limited', until: at + 7_000 });
    // "a refusal whose until has passed shows healthy" (its next call goes out as the probe).
    expect(keyHealthView(context(), 'q', at + 60_000)).toEqual({ state: 'healthy' });
    expect(keyHealthView(context(), 'c', at + 7_000)).toEqual({ state: 'healthy' });
    expect(keyHealthView(context(), 'never-seen', at)).toEqual({ state: 'healthy' });
  });
});
