/**
 * The provider actor and its callers' keys, event by event on a live actor (no timers, no network):
 * a call with a refused key is skipped before the breaker is asked, every call's outcome reaches the
 * key's health, a failure streak below the breaker's quorum trips the key, and what the actor gives
 * its children (the key book's settings, the breaker's quorum, the fleet link's breaker). Expected
 * values are written out here (docs/errors.md "Per-key health", column K), not read from src.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createActor, fromCallback, fromPromise, type AnyActorRef } from 'xstate';
import type { FleetLinkEvent, FleetLinkInput, FleetLinkReply } from '../../src/machines/fleet-link.js';
import { keyHealthView, refusedKeyCounts } from '../../src/machines/key-book.machine.js';
import {
  providerMachine,
  type ProviderInput,
  type ProviderReply,
} from '../../src/machines/provider.machine.js';
import type { CallRecord, ProviderAnswer } from '../../src/machines/types.js';
import {
  attemptMachine,
  UpstreamFailure,
  type UpstreamAnswer,
  type UpstreamInput,
} from '../../src/machines/attempt.machine.js';
import { Secret } from '../../src/security/secret.js';
import { request } from './gateway-harness.js';

const t = 1_800_000_000_000;
const quarantineMs = 60_000;
const coolingMs = 5_000;
const apiKey = new Secret('test-claude-key-provider-keys');
const keyId = apiKey.fingerprint;
/** Valid exactly when the answer is `{}`. */
const validate = (given: ProviderAnswer) =>
  given.text === '{}' ? ({ ok: true, value: true } as const) : ({ ok: false, errors: ['bad'] } as const);
const answer: ProviderAnswer = {
  text: '{}',
  model: 'claude-model',
  usage: { inputTokens: 3, outputTokens: 4 },
  truncated: false,
};

const settle = async () => {
  for (let i = 0; i < 5; i += 1) await Promise.resolve();
};

function rig(input: Partial<ProviderInput> = {}) {
  const fleet: FleetLinkEvent[] = [];
  const fleetInputs: FleetLinkInput[] = [];
  const started: string[] = [];
  const replies: ProviderReply[] = [];
  const records: CallRecord[] = [];
  const fleetLink = fromCallback<FleetLinkEvent, FleetLinkInput, FleetLinkReply>(({ receive, input }) => {
    fleetInputs.push(input);
    receive((event) => fleet.push(event));
  });
  /** Each upstream call waits until the test answers or fails it (by call id: the attempt's actor id). */
  const pending = new Map<string, { resolve: (answer: UpstreamAnswer) => void; reject: (error: unknown) => void }>();
  const upstream = fromPromise<UpstreamAnswer, UpstreamInput>(
    ({ input }) =>
      new Promise((resolve, reject) => {
        started.push(input.call.id);
        pending.set(input.call.id, { resolve, reject });
      }),
  );
  const machine = providerMachine.provide({
    actors: { fleetLink, attempt: attemptMachine.provide({ actors: { upstream } }) },
  });
  const caller: AnyActorRef = createActor(
    fromCallback<ProviderReply>(({ receive }) => {
      receive((reply) => replies.push(reply));
    }),
  ).start();
  const provider = createActor(machine, {
    input: {
      providerId: 'claude',
      model: 'claude-model',
      threshold: 1,
      recoveryMs: 1000,
      keyHealth: { quarantineMs, coolingMs, maxKeys: 10 },
      ...input,
    },
  });
  provider.on('call.finished', (event) => records.push(event.record));
  provider.start();
  const context = () => provider.getSnapshot().context;
  return {
    provider,
    fleet,
    fleetInputs,
    started,
    replies,
    records,
    context,
    request: (callId: string, at: number) =>
      provider.send({
        type: 'call.requested',
        callId,
        request,
        apiKey,
        keyId,
        replyTo: caller,
        validate,
        at,
      }),
    failed: async (
      callId: string,
      failure: { errorClass: 'auth' | 'rate_limited' | 'server_error'; retryAfterMs?: number },
      at: number,
    ) => {
      pending.get(callId)?.reject(new UpstreamFailure({ ...failure, message: 'x' }, at));
      await settle();
    },
    succeeded: async (callId: string, ok: boolean, at: number) => {
      pending.get(callId)?.resolve({ answer: ok ? answer : { ...answer, text: 'bad' }, at });
      await settle();
    },
    cancelled: (callId: string, at: number) => provider.send({ type: 'call.cancelled', callId, at }),
    /** The key as `GET /v1/keys/status` shows it (a view of the key book). */
    status: (at: number) => keyHealthView(context().keyBook.getSnapshot().context, keyId, at),
  };
}

describe("a call with the caller's key refused", () => {
  it('is skipped at once with the key reason, class and until: no upstream call, no breaker, no fleet', async () => {
    const r = rig();
    r.request('c1', t);
    await r.failed('c1', { errorClass: 'auth' }, t + 5);
    const fleetBefore = r.fleet.length;
    r.request('c2', t + 10);
    expect(r.started).toEqual(['c1']);
    expect(r.replies.at(-1)).toEqual({
      type: 'provider.keySkipped',
      callId: 'c2',
      providerId: 'claude',
      reason: 'key_quarantined',
      errorClass: 'auth',
      until: t + 5 + quarantineMs,
      at: t + 10,
    });
    expect(r.records.at(-1)).toEqual({
      provider: 'claude',
      outcome: 'skipped',
      errorClass: 'auth',
      durationMs: 0,
    });
    expect(r.fleet).toHaveLength(fleetBefore);
    expect(r.context().stats).toMatchObject({ calls: 1, rejected: 0 });
  });

  it("cools the key until the failure's Retry-After", async () => {
    const r = rig();
    r.request('c1', t);
    await r.failed('c1', { errorClass: 'rate_limited', retryAfterMs: 2_000 }, t + 5);
    expect(r.status(t + 6)).toEqual({
      state: 'cooling',
      errorClass: 'rate_limited',
      until: t + 5 + 2_000,
    });
  });

  it('lets the probe out once until has passed, skips the next call while it runs, and heals the key on its answer', async () => {
    for (const ok of [true, false]) {
      const r = rig();
      r.request('c1', t);
      await r.failed('c1', { errorClass: 'auth' }, t);
      r.request('probe', t + quarantineMs);
      r.request('c3', t + quarantineMs + 1);
      expect(r.started).toEqual(['c1', 'probe']);
      expect(r.replies.at(-1)).toMatchObject({ type: 'provider.keySkipped', callId: 'c3' });
      // Even an answer that fails validation proves the key works.
      await r.succeeded('probe', ok, t + quarantineMs + 2);
      expect(r.status(t + quarantineMs + 3)).toEqual({ state: 'healthy' });
      expect(refusedKeyCounts(r.context().keyBook.getSnapshot().context)).toEqual({ quarantined: 0, cooling: 0 });
    }
  });

  it('frees the probe when its caller cancels it: the next call is the probe', async () => {
    const r = rig();
    r.request('c1', t);
    await r.failed('c1', { errorClass: 'auth' }, t);
    r.request('probe', t + quarantineMs);
    r.cancelled('probe', t + quarantineMs + 1);
    r.request('next', t + quarantineMs + 2);
    expect(r.started).toEqual(['c1', 'probe', 'next']);
  });

  it("gives the key its own circuit on the breaker's streak below the quorum", () => {
    const r = rig();
    r.provider.send({ type: 'breaker.keyStreak', keyId, errorClass: 'timeout', at: t });
    expect(r.status(t + 1)).toEqual({
      state: 'quarantined',
      errorClass: 'timeout',
      until: t + quarantineMs,
    });
  });
});

describe('what the provider gives its children', () => {
  it("the key book's settings, the breaker's quorum, and the fleet link its provider and breaker; names them in the system", () => {
    const r = rig({ minDistinctKeys: 3 });
    const book = r.context().keyBook;
    expect(book.getSnapshot().context).toMatchObject({
      providerId: 'claude',
      quarantineMs,
      coolingMs,
      maxKeys: 10,
    });
    expect(r.provider.system.get('keyBook.claude')).toBe(book);
    expect(r.provider.getSnapshot().children.keyBook).toBe(book);
    expect(r.context().breaker.getSnapshot().context.minDistinctKeys).toBe(3);
    expect(r.fleetInputs).toEqual([{ providerId: 'claude', breaker: r.context().breaker }]);
  });
});

describe('a probe lease in a fleet', () => {
  const synced = (r: ReturnType<typeof rig>, state: 'open' | 'halfOpen', retryAt: number | null) =>
    r.provider.send({
      type: 'breaker.synced',
      shared: {
        state,
        consecutiveFailures: 1,
        openedAt: t - 10,
        retryAt,
        opens: 1,
        openPeriodMs: 1000,
        version: 1,
        changedAt: t - 10,
        streakKeys: [],
      },
      at: t,
    });

  it('tells the breaker the leased probe started (the fleet granted the lease: no report), and counts a refused lease as rejected', () => {
    const r = rig();
    synced(r, 'halfOpen', t + 990);
    r.request('c1', t);
    r.provider.getSnapshot().children['c1']?.send({ type: 'probe.leased', callId: 'c1', granted: true, at: t + 1 });
    expect(r.fleet.at(-1)).toEqual({ type: 'probe.requested', callId: 'c1', replyTo: r.provider.getSnapshot().children['c1'], at: t });
    expect(r.context().breaker.getSnapshot().context).toMatchObject({ probeCallId: 'c1' });

    const refused = rig();
    synced(refused, 'halfOpen', t + 990);
    refused.request('c1', t);
    refused.provider.getSnapshot().children['c1']?.send({ type: 'probe.leased', callId: 'c1', granted: false, at: t + 1 });
    expect(refused.context().stats).toMatchObject({ calls: 0, rejected: 1 });
  });

  it('tells the fleet nothing of a refused lease for a call nobody waits for', () => {
    const r = rig();
    synced(r, 'halfOpen', t + 990);
    r.request('c1', t);
    r.provider.send({ type: 'call.cancelled', callId: 'c1', at: t + 1 });
    const fleetBefore = r.fleet.length;
    r.provider.getSnapshot().children['c1']?.send({ type: 'probe.leased', callId: 'c1', granted: false, at: t + 2 });
    expect(r.fleet).toHaveLength(fleetBefore);
  });

  it('refuses every call while the fleet holds the breaker open with no retry time, however late', () => {
    const r = rig();
    synced(r, 'open', null);
    r.request('c1', t + 10_000_000);
    expect(r.fleet.filter((event) => event.type === 'probe.requested')).toEqual([]);
    expect(r.replies.map((reply) => reply.type)).toEqual(['provider.rejected']);
  });
});

describe('the provider and its attempts read no other actor\'s snapshot: they ask by message', () => {
  const sourceOf = (file: string) =>
    readFileSync(fileURLToPath(new URL(`../../src/machines/${file}`, import.meta.url)), 'utf8');

  it.each(['provider.machine.ts', 'attempt.machine.ts', 'fallback.machine.ts'])('%s has no getSnapshot() in its source', (file) => {
    expect(sourceOf(file).match(/getSnapshot\s*\(/g) ?? []).toEqual([]);
  });

  /** A child whose snapshot must not be read: any read throws. */
  const sealed = (ref: AnyActorRef): AnyActorRef =>
    Object.assign(Object.create(ref) as AnyActorRef, {
      getSnapshot: () => {
        throw new Error(`${ref.id}'s snapshot was read`);
      },
    });

  it("evaluates every guard without reading a child's snapshot", () => {
    const r = rig();
    const context = {
      ...r.context(),
      keyBook: sealed(r.context().keyBook),
      breaker: sealed(r.context().breaker),
      fleetLink: sealed(r.context().fleetLink),
    };
    const call = { callId: 'c1', request, apiKey, keyId, replyTo: r.provider, validate, at: t };
    const events = [
      { type: 'call.requested', ...call },
      { type: 'key.admitted', call },
      { type: 'key.refused', call, reason: 'key_quarantined', errorClass: 'auth', until: t + 1 },
      { type: 'breaker.admitted', call },
      { type: 'probe.leased', callId: 'c1', granted: true, at: t },
      { type: 'attempt.ended', callId: 'c1', record: null },
      { type: 'breaker.refusing' },
      { type: 'call.cancelled', callId: 'c1', at: t },
    ];
    const attemptContext = {
      input: { providerId: 'claude', owner: r.provider, call, timings: context.timings, keyBook: context.keyBook, breaker: context.breaker, fleetLink: context.fleetLink },
      leased: false,
    };
    const guards = [
      ...(Object.entries(providerMachine.implementations.guards) as [string, (args: unknown) => boolean][]).map(
        ([name, guard]) => [name, guard, context] as const,
      ),
      ...(Object.entries(attemptMachine.implementations.guards) as [string, (args: unknown) => boolean][]).map(
        ([name, guard]) => [name, guard, attemptContext] as const,
      ),
    ];
    expect(guards.length).toBeGreaterThan(1);
    for (const [name, guard, given] of guards)
      for (const event of events)
        expect(() => guard({ context: given, event, self: r.provider, system: r.provider.system }), `${name} on ${event.type}`).not.toThrow();
  });

  it("serves refused and probing keys on a live actor whose children's snapshots cannot be read", async () => {
    const r = rig();
    for (const child of ['keyBook', 'breaker', 'fleetLink'] as const) {
      const ref = r.context()[child] as AnyActorRef;
      ref.getSnapshot = () => {
        throw new Error(`${child}'s snapshot was read`);
      };
    }
    const errors: unknown[] = [];
    r.provider.subscribe({ error: (error) => errors.push(error) });
    r.request('c1', t);
    await r.failed('c1', { errorClass: 'auth' }, t);
    r.request('c2', t + 1);
    r.request('probe', t + quarantineMs);
    await r.succeeded('probe', true, t + quarantineMs + 1);
    r.request('c4', t + quarantineMs + 2);
    expect(errors).toEqual([]);
    expect(r.started).toEqual(['c1', 'probe', 'c4']);
    expect(r.replies.map((reply) => `${reply.type}:${reply.callId}`)).toEqual([
      'provider.failed:c1',
      'provider.keySkipped:c2',
      'provider.succeeded:probe',
    ]);
  });
});
