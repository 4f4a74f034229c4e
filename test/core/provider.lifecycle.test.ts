/**
 * A call's life through the provider actor and its attempt, event by event on a live actor with a
 * scripted fleet link and a hand-driven upstream (no timers, no network): what the fleet hears, when a
 * probe waits for the fleet's lease, what the caller is answered, the `call.finished` record, and that a
 * call leaves nothing behind (its attempt leaves the provider's children). Expected values are written out.
 */
import { describe, expect, it } from 'vitest';
import { createActor, fromCallback, fromPromise, type AnyActorRef } from 'xstate';
import type { ErrorTable } from '../../src/errors/index.js';
import type { FleetLinkEvent, FleetLinkInput, FleetLinkReply } from '../../src/machines/fleet-link.js';
import { gatewayMachine } from '../../src/machines/gateway.machine.js';
import {
  createProviderMachine,
  providerMachine,
  type ProviderReply,
} from '../../src/machines/provider.machine.js';
import type { SharedBreakerState } from '../../src/machines/breaker.machine.js';
import {
  attemptMachine,
  UpstreamFailure,
  type UpstreamAnswer,
  type UpstreamInput,
} from '../../src/machines/attempt.machine.js';
import type { ErrorClass } from '../../src/errors/index.js';
import type { CallRecord, ProviderAnswer } from '../../src/machines/types.js';
import { Secret } from '../../src/security/secret.js';
import { withRow } from './errors-md.js';
import { request } from './gateway-harness.js';

const t = 1_800_000_000_000;
const apiKey = new Secret('test-claude-key-lifecycle');
/** Valid exactly when the answer is `{}`. */
const validate = (given: ProviderAnswer) =>
  given.text === '{}' ? ({ ok: true, value: true } as const) : ({ ok: false, errors: ['bad'] } as const);
const timings = { deadlineMs: 1000, firstTokenTimeoutMs: 500, streamIdleTimeoutMs: 100 };
const answer: ProviderAnswer = { text: '{}', model: 'claude-model', usage: { inputTokens: 3, outputTokens: 4 }, truncated: false };

const settle = async () => {
  for (let i = 0; i < 5; i += 1) await Promise.resolve();
};

/**
 * A provider with a scripted fleet link recording what it hears, and a hand-driven upstream recording
 * each call that went out (by call id: the attempt's actor id) and each abort of its signal.
 */
function rig(options: { table?: ErrorTable; maxRecoveryMs?: number; threshold?: number } = {}) {
  const fleet: FleetLinkEvent[] = [];
  const started: string[] = [];
  const upstreamInputs: UpstreamInput[] = [];
  const aborted: string[] = [];
  const pending = new Map<string, { resolve: (answer: UpstreamAnswer) => void; reject: (error: unknown) => void }>();
  const replies: ProviderReply[] = [];
  const records: CallRecord[] = [];
  const fleetLink = fromCallback<FleetLinkEvent, FleetLinkInput, FleetLinkReply>(({ receive }) => {
    receive((event) => fleet.push(event));
  });
  const upstream = fromPromise<UpstreamAnswer, UpstreamInput>(
    ({ input, signal }) =>
      new Promise((resolve, reject) => {
        started.push(input.call.id);
        upstreamInputs.push(input);
        pending.set(input.call.id, { resolve, reject });
        signal.addEventListener('abort', () => aborted.push(input.call.id), { once: true });
      }),
  );
  const machine = (options.table === undefined ? providerMachine : createProviderMachine(options.table)).provide({
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
      threshold: options.threshold ?? 1,
      recoveryMs: 1000,
      ...(options.maxRecoveryMs === undefined ? {} : { maxRecoveryMs: options.maxRecoveryMs }),
      timings,
    },
  });
  provider.on('call.finished', (event) => records.push(event.record));
  provider.start();
  const request_ = (callId: string, at = t) =>
    provider.send({ type: 'call.requested', callId, request, apiKey, keyId: apiKey.fingerprint, replyTo: caller, validate, at });
  const synced = (state: SharedBreakerState['state'], retryAt: number | null, at = t) =>
    provider.send({
      type: 'breaker.synced',
      shared: { state, consecutiveFailures: 1, openedAt: state === 'closed' ? null : t - 10, retryAt, opens: 1, openPeriodMs: 1000, version: 1, changedAt: t - 10, streakKeys: [] },
      at,
    });
  const context = () => provider.getSnapshot().context;
  const breaker = () => context().breaker.getSnapshot();
  /** Steps the breaker took (one per message it was sent, whether or not it changed). */
  const breakerSteps = { count: 0 };
  context().breaker.subscribe(() => void (breakerSteps.count += 1));
  /** The upstream answers call `callId` at `at` (valid or not). */
  const answered = async (callId: string, ok: boolean, at: number) => {
    pending.get(callId)?.resolve({ answer: ok ? answer : { ...answer, text: 'bad' }, at });
    await settle();
  };
  /** The upstream call `callId` fails with `errorClass` at `at`. */
  const failed = async (callId: string, errorClass: ErrorClass, at: number) => {
    pending.get(callId)?.reject(new UpstreamFailure({ errorClass, message: 'x' }, at));
    await settle();
  };
  /** The attempts still running (the provider's other children are its breaker, fleet link and key book). */
  const attempts = () =>
    Object.keys(provider.getSnapshot().children).filter((id) => !['breaker', 'fleetLink', 'keyBook'].includes(id));
  return {
    provider, fleet, started, upstreamInputs, aborted, replies, records, request: request_, synced, context, breaker, breakerSteps,
    answered, failed, attempts,
  };
}

describe("the provider's own events", () => {
  it.each([
    ['reset', 'breaker.reset'],
    ['forceOpen', 'breaker.forceOpen'],
    ['release', 'breaker.release'],
  ] as const)("an operator's %s goes to the breaker and to the fleet link (the fleet's breaker follows it)", (action, type) => {
    const r = rig();
    r.provider.send({ type: 'breaker.control', action, at: t + 7 });
    expect(r.fleet).toEqual([{ type: 'fleet.report', event: { type, at: t + 7 } }]);
  });

  it('a cancel for a call whose attempt has already ended changes nothing', async () => {
    const r = rig();
    r.request('c1');
    await r.answered('c1', true, t + 40);
    r.provider.send({ type: 'call.cancelled', callId: 'c1', at: t + 50 });
    r.provider.send({ type: 'call.cancelled', callId: 'never-asked', at: t + 50 });
    expect(r.provider.getSnapshot().status).toBe('active');
    expect(r.context().stats).toMatchObject({ calls: 1, successes: 1, ignored: 0 });
    expect(r.attempts()).toEqual([]);
  });
});

describe('a call admitted and answered', () => {
  it('starts the upstream with the call, tells the fleet its success, and forgets the call once answered', async () => {
    const r = rig();
    r.request('c1');
    expect(r.started).toEqual(['c1']);
    expect(r.upstreamInputs).toEqual([
      { providerId: 'claude', request, apiKey, call: r.provider.getSnapshot().children['c1'], deadlineMs: timings.deadlineMs },
    ]);
    await r.answered('c1', true, t + 40);
    expect(r.context().stats).toMatchObject({ calls: 1, successes: 1 });
    expect(r.records).toEqual([{ provider: 'claude', outcome: 'succeeded', durationMs: 40, usage: answer.usage }]);
    expect(r.replies.map((reply) => reply.type)).toEqual(['provider.succeeded']);
    // A start is no operation of the fleet state (its probe is its lease); a success may clear the fleet's count.
    expect(r.fleet).toEqual([{ type: 'fleet.report', event: { type: 'call.succeeded', callId: 'c1', at: t + 40 } }]);
    // The call actor has left the provider's children.
    expect(Object.keys(r.provider.getSnapshot().children).sort()).toEqual(['breaker', 'fleetLink', 'keyBook']);
  });

  it('asks the breaker for each call and tells it each result, closed or not: the breaker decides what changes', async () => {
    const r = rig();
    r.request('c1');
    expect(r.breakerSteps.count).toBe(1);
    await r.answered('c1', true, t + 40);
    expect(r.breakerSteps.count).toBe(2);
    expect(r.replies.map((reply) => reply.type)).toEqual(['provider.succeeded']);
  });

  it('tells the breaker a success when it has a failure record to clear, which it clears', async () => {
    const r = rig({ threshold: 3 });
    r.request('c1');
    await r.failed('c1', 'server_error', t + 5);
    expect(r.breaker().context.consecutiveFailures).toBe(1);
    const steps = r.breakerSteps.count;
    r.request('c2', t + 10);
    expect(r.breakerSteps.count).toBe(steps + 1);
    await r.answered('c2', true, t + 50);
    expect(r.breaker().context.consecutiveFailures).toBe(0);
    expect(r.breakerSteps.count).toBe(steps + 2);
    expect(r.fleet.at(-1)).toEqual({ type: 'fleet.report', event: { type: 'call.succeeded', callId: 'c2', at: t + 50 } });
    expect(r.context().stats).toMatchObject({ calls: 2, successes: 1, failures: 1 });
  });

  it('tells the breaker the start of a call it admits as its probe (open, its retry time passed)', async () => {
    const r = rig();
    r.request('c1');
    await r.failed('c1', 'server_error', t + 5);
    expect(r.breaker().value).toBe('open');
    r.request('probe', t + 5 + 1000);
    expect(r.breaker().value).toEqual({ halfOpen: 'probing' });
    expect(r.breaker().context.probeCallId).toBe('probe');
    // A call is counted once it ends (its attempt's record).
    await r.answered('probe', true, t + 5 + 1001);
    expect(r.context().stats).toMatchObject({ calls: 2, rejected: 0 });
  });

  it('records an invalid answer as a failed call of class invalid_output, counted as ignored, and forgets it', async () => {
    const r = rig();
    r.request('c1');
    await r.answered('c1', false, t + 40);
    expect(r.records).toEqual([{ provider: 'claude', outcome: 'failed', errorClass: 'invalid_output', durationMs: 40, usage: answer.usage }]);
    expect(r.context().stats).toMatchObject({ calls: 1, successes: 0, failures: 0, ignored: 1 });
  });

  it.each([
    ['counted', 'server_error', 'failures', true],
    ['ignored', 'rate_limited', 'ignored', false],
  ] as const)('answers a failed call (%s class) once, counted as its column says', async (_kind, errorClass, stat, counted) => {
    const r = rig();
    r.request('c1');
    await r.failed('c1', errorClass, t + 5);
    expect(r.replies).toEqual([
      {
        type: 'provider.failed',
        callId: 'c1',
        providerId: 'claude',
        failure: { errorClass, message: 'x' },
        countedByBreaker: counted,
        durationMs: 5,
        streamed: null,
        // A threshold of 1: a counted failure opens the breaker, which the caller hears with the failure.
        ...(counted ? { breakerRefusing: true } : {}),
        at: t + 5,
      },
    ]);
    expect(r.context().stats).toMatchObject({ calls: 1, [stat]: 1 });
  });

  it('counts an invalid answer as a failure when the table says invalid_output counts (the stats follow the table)', async () => {
    const r = rig({ table: withRow('invalid_output', { breaker: 'counts' }) });
    r.request('c1');
    await r.answered('c1', false, t + 40);
    expect(r.context().stats).toMatchObject({ failures: 1, ignored: 0 });
  });
});

describe('a call cancelled by its caller', () => {
  it('aborts the upstream; the call in flight comes back cancelled: aborted for the breaker and the key, recorded with the time it ran, no answer', () => {
    const r = rig();
    r.request('c1');
    r.provider.send({ type: 'call.cancelled', callId: 'c1', at: t + 250 });
    expect(r.aborted).toEqual(['c1']);
    expect(r.fleet.at(-1)).toEqual({
      type: 'fleet.report',
      event: { type: 'call.ignored', callId: 'c1', errorClass: 'aborted', at: t + 250 },
    });
    expect(r.records).toEqual([{ provider: 'claude', outcome: 'aborted', errorClass: 'aborted', durationMs: 250 }]);
    expect(r.replies).toEqual([]);
    expect(r.context().stats).toMatchObject({ calls: 1, failures: 0, ignored: 1 });
    expect(r.attempts()).toEqual([]);
  });

  it('never records a negative duration (a cancel stamped before the start)', () => {
    const r = rig();
    r.request('c1');
    r.provider.send({ type: 'call.cancelled', callId: 'c1', at: t - 30 });
    expect(r.records).toEqual([{ provider: 'claude', outcome: 'aborted', errorClass: 'aborted', durationMs: 0 }]);
  });
});

describe('a probe in a fleet: the lease first', () => {
  it('admits a shared but closed breaker\'s calls at once, asking no lease', () => {
    const r = rig();
    r.synced('closed', null);
    r.request('c1');
    expect(r.started).toEqual(['c1']);
    expect(r.fleet.filter((event) => event.type === 'probe.requested')).toEqual([]);
  });

  it('holds a half-open probe until the fleet grants the lease, then starts it and forgets the lease', async () => {
    const r = rig();
    r.synced('halfOpen', t + 990);
    expect(r.breaker().matches('halfOpen')).toBe(true);
    r.request('c1');
    expect(r.fleet).toEqual([{ type: 'probe.requested', callId: 'c1', replyTo: r.provider.getSnapshot().children['c1'], at: t }]);
    expect(r.started).toEqual([]);
    expect(r.attempts()).toEqual(['c1']);
    r.provider.getSnapshot().children['c1']?.send({ type: 'probe.leased', callId: 'c1', granted: true, at: t + 1 });
    expect(r.started).toEqual(['c1']);
    expect((r.provider.getSnapshot().children['c1']?.getSnapshot() as { value: unknown } | undefined)?.value).toEqual({
      calling: 'awaitingFirstToken',
    });
    await r.answered('c1', true, t + 2);
    expect(r.attempts()).toEqual([]);
    expect(r.context().stats).toMatchObject({ calls: 1 });
  });

  it('asks the lease for the call that finds an open breaker past its retryAt, and starts it when granted', () => {
    const r = rig();
    r.synced('open', t + 990);
    r.request('c1', t + 1000);
    expect(r.fleet).toEqual([{ type: 'probe.requested', callId: 'c1', replyTo: r.provider.getSnapshot().children['c1'], at: t + 1000 }]);
    r.provider.getSnapshot().children['c1']?.send({ type: 'probe.leased', callId: 'c1', granted: true, at: t + 1001 });
    expect(r.started).toEqual(['c1']);
  });

  it('refuses the call when another instance holds the lease (try again in a moment), and forgets the lease', () => {
    const r = rig();
    r.synced('halfOpen', t + 990);
    r.request('c1');
    r.provider.getSnapshot().children['c1']?.send({ type: 'probe.leased', callId: 'c1', granted: false, at: t + 1 });
    expect(r.replies).toEqual([{ type: 'provider.rejected', callId: 'c1', providerId: 'claude', retryAt: t + 1, at: t + 1 }]);
    expect(r.started).toEqual([]);
    expect(r.attempts()).toEqual([]);
  });

  it("refuses the call until the other instance's probe ends by (probeEndsBy), never with a time already past", () => {
    const r = rig();
    r.synced('halfOpen', t + 990);
    r.request('c1');
    r.request('c2');
    r.provider.getSnapshot().children['c1']?.send({ type: 'probe.leased', callId: 'c1', granted: false, probeEndsBy: t + 3500, at: t + 1 });
    // A bound already past (the holder's clock behind): try again at once, not in the past.
    r.provider.getSnapshot().children['c2']?.send({ type: 'probe.leased', callId: 'c2', granted: false, probeEndsBy: t - 50, at: t + 2 });
    expect(r.replies).toEqual([
      { type: 'provider.rejected', callId: 'c1', providerId: 'claude', retryAt: t + 3500, at: t + 1 },
      { type: 'provider.rejected', callId: 'c2', providerId: 'claude', retryAt: t + 2, at: t + 2 },
    ]);
    expect(r.attempts()).toEqual([]);
  });

  it('refuses the call when the breaker moved (open, not due) before the lease came', () => {
    const r = rig();
    r.synced('halfOpen', t + 990);
    r.request('c1');
    r.synced('open', t + 5000);
    r.provider.getSnapshot().children['c1']?.send({ type: 'probe.leased', callId: 'c1', granted: true, at: t + 2 });
    expect(r.started).toEqual([]);
    expect(r.replies.map((reply) => reply.type)).toEqual(['provider.rejected']);
    expect(r.attempts()).toEqual([]);
  });

  it('frees at once a lease granted to a call cancelled while waiting (reported as an aborted, ignored result)', () => {
    const r = rig();
    r.synced('halfOpen', t + 990);
    r.request('c1');
    r.provider.send({ type: 'call.cancelled', callId: 'c1', at: t + 1 });
    // The withdrawn attempt waits for the fleet's answer, to free a lease granted meanwhile.
    expect(r.attempts()).toEqual(['c1']);
    r.provider.getSnapshot().children['c1']?.send({ type: 'probe.leased', callId: 'c1', granted: true, at: t + 2 });
    expect(r.attempts()).toEqual([]);
    expect(r.fleet.at(-1)).toEqual({
      type: 'fleet.report',
      event: { type: 'call.ignored', callId: 'c1', errorClass: 'aborted', at: t + 2 },
    });
    expect(r.started).toEqual([]);
  });

  it("lets a link that answers the attempt itself (`replyTo`) grant the lease without the provider's help", () => {
    const r = rig();
    r.synced('halfOpen', t + 990);
    r.request('c1');
    const asked = r.fleet.at(-1);
    if (asked?.type !== 'probe.requested') throw new Error('no lease asked');
    asked.replyTo.send({ type: 'probe.leased', callId: 'c1', granted: true, at: t + 1 });
    expect(r.started).toEqual(['c1']);
    expect(r.breaker().context.probeCallId).toBe('c1');
  });

  it('lets the breaker adopt the fleet state and its loss', () => {
    const r = rig();
    r.synced('open', t + 990);
    expect(r.breaker().matches('open')).toBe(true);
    expect(r.breaker().context.shared).toBe(true);
    r.provider.send({ type: 'breaker.unshared', at: t + 1 });
    expect(r.breaker().context.shared).toBe(false);
  });
});

describe('the actor system', () => {
  it('names the provider actor, its breaker and its fleet link (what inspectors show)', () => {
    const gateway = createActor(gatewayMachine, {
      input: { providers: [{ providerId: 'claude', model: 'claude-model', threshold: 2, recoveryMs: 1000, maxRecoveryMs: 5000 }] },
    }).start();
    expect(gatewayMachine.id).toBe('gateway');
    expect(providerMachine.id).toBe('provider');
    expect(gateway.getSnapshot().value).toBe('running');
    const provider = gateway.system.get('provider.claude');
    expect(provider).toBe(gateway.getSnapshot().context.providers.claude);
    expect(provider?.id).toBe('provider.claude');
    const snapshot = gateway.getSnapshot().context.providers.claude?.getSnapshot();
    expect(snapshot?.value).toBe('serving');
    expect(gateway.system.get('breaker.claude')).toBe(snapshot?.context.breaker);
    expect(snapshot?.children.breaker).toBe(snapshot?.context.breaker);
    expect(gateway.system.get('fleetLink.claude')).toBe(snapshot?.context.fleetLink);
    expect(snapshot?.children.fleetLink).toBe(snapshot?.context.fleetLink);
    expect(snapshot?.context.breaker.getSnapshot().context.maxRecoveryMs).toBe(5000);
    gateway.stop();
  });
});
