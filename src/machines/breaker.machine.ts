import { and, assign, enqueueActions, not, or, sendTo, setup, type AnyActorRef } from 'xstate';
import type { CountedErrorClass, IgnoredErrorClass } from '../errors/index.js';
import {
  defaultMaxRecoveryMs,
  defaultMinDistinctKeys,
  distinctKeyQuorum,
  doublingOpenPeriod,
  openStrategies,
  type OpenStrategyName,
} from './breaker-strategy.js';
import type { CallRequest } from './call-request.js';
import { recoveryRule } from './recovery-rule.js';

/** What a provider actor gives its breaker when it spawns it. */
export interface BreakerInput {
  readonly providerId: string;
  /** Counted failures that open the breaker (default 5). */
  readonly threshold: number;
  /** How long the breaker stays open before it admits one probe (default 60 000 ms). */
  readonly recoveryMs: number;
  /** The cap of the open period, which doubles on each failed probe (default 600 000 ms). */
  readonly maxRecoveryMs?: number;
  /**
   * BREAKER_MIN_DISTINCT_KEYS: the counted failures of the streak must come from at least this many
   * distinct keys to open the breaker (default 1 here, the rule off; the service's default is 2).
   */
  readonly minDistinctKeys?: number;
  readonly strategy?: OpenStrategyName;
  /**
   * Who runs this breaker and hears its `breaker.keyStreak` reports (the provider actor, which trips the
   * key). Absent for a breaker on its own (tests, the fleet's copy stepped with the pure `transition`):
   * the report is then only emitted.
   */
  readonly owner?: AnyActorRef;
}

export interface BreakerContext {
  readonly providerId: string;
  readonly threshold: number;
  readonly recoveryMs: number;
  readonly maxRecoveryMs: number;
  /**
   * The open period: `recoveryMs` when opening from closed, doubled (capped at `maxRecoveryMs`) by
   * each failed probe, back to `recoveryMs` on closing. `retryAt` is the opening time plus it.
   */
  readonly openPeriodMs: number;
  readonly strategy: OpenStrategyName;
  readonly minDistinctKeys: number;
  readonly consecutiveFailures: number;
  /**
   * The distinct key ids (salted fingerprints) of the current streak's counted failures, in order,
   * at most `minDistinctKeys` of them (enough to tell whether the quorum is met); cleared with the count.
   */
  readonly streakKeys: readonly string[];
  /** Epoch ms when the breaker last opened; null while closed. */
  readonly openedAt: number | null;
  /** Epoch ms from which one probe is admitted; null while closed or forced open. */
  readonly retryAt: number | null;
  /**
   * Epoch ms: the `at` of the event that last set `retryAt` (an opening here, or the fleet's state
   * adopted). A shared breaker's recovery timer runs from it to `retryAt`: time enters in events, the
   * machine reads no clock. Read only while `retryAt` is set (0 before any).
   */
  readonly retrySetAt: number;
  /** The call admitted as the half-open probe, whose result alone decides. */
  readonly probeCallId: string | null;
  readonly opens: number;
  /**
   * True while a fleet store (Redis) is authoritative: the count and the opening are the fleet's,
   * adopted through `breaker.synced`; false (embedded default, or the store unreachable) decides locally.
   */
  readonly shared: boolean;
  /** `BreakerInput.owner`, or null. */
  readonly owner: AnyActorRef | null;
}

/** A breaker state as the fleet store holds it (src/fleet), shared by every instance. */
export interface SharedBreakerState {
  readonly state: 'closed' | 'open' | 'halfOpen' | 'forcedOpen';
  readonly consecutiveFailures: number;
  /** The streak's distinct key ids, at most BREAKER_MIN_DISTINCT_KEYS of them (never keys). */
  readonly streakKeys: readonly string[];
  readonly openedAt: number | null;
  readonly retryAt: number | null;
  readonly opens: number;
  /** The fleet's current open period (ms): grown by failed probes, reset on closing. */
  readonly openPeriodMs: number;
  /** Bumped by every write to the fleet state; orders the updates one instance hears. */
  readonly version: number;
  /** Epoch ms of the fleet state's last state change (reconciliation after an outage: newer wins). */
  readonly changedAt: number;
}

/**
 * Events are typed by error class: only a provider-side class can be a counted failure
 * (`call.failed`); every other class arrives as `call.ignored` and can never move the count.
 */
export type BreakerEvent =
  /**
   * May this call go out? The breaker decides and answers `replyTo` (`BreakerAnswer`): admitted (in
   * half-open or past `retryAt`: it is the probe), rejected, or — shared with a fleet and recovering —
   * the fleet's probe lease is needed first; `leased`: the lease was granted.
   */
  | { type: 'breaker.admit'; call: CallRequest; replyTo: AnyActorRef; leased: boolean; at: number }
  /** Would the next call be admitted now? Answered `BreakerStatus` to `replyTo`; changes nothing. */
  | { type: 'breaker.status'; replyTo: AnyActorRef; at: number }
  | { type: 'call.succeeded'; callId: string; at: number }
  /**
   * `keyId`: the salted fingerprint of the key the call used; `origin`: the caller's salted address id,
   * when known. The quorum counts distinct voters (`distinctKeyQuorum.voter`: the origin, else the key).
   */
  | {
      type: 'call.failed';
      callId: string;
      errorClass: CountedErrorClass;
      keyId: string;
      origin?: string | undefined;
      at: number;
    }
  | { type: 'call.ignored'; callId: string; errorClass: IgnoredErrorClass; at: number }
  | { type: 'breaker.reset'; at: number }
  | { type: 'breaker.forceOpen'; at: number }
  | { type: 'breaker.release'; at: number }
  /** The fleet's state (read from, or written to, the shared store): adopt it. */
  | { type: 'breaker.synced'; shared: SharedBreakerState; at: number }
  /** The shared store became unreachable: decide locally until the next `breaker.synced`. */
  | { type: 'breaker.unshared'; at: number };

/** The breaker's answer to `breaker.admit`, sent to its `replyTo` (the call's attempt). */
export type BreakerAnswer =
  | { type: 'breaker.admitted'; call: CallRequest }
  | { type: 'breaker.rejected'; call: CallRequest; retryAt: number | null }
  /** Shared with a fleet and recovering: this call may be the probe once the fleet grants its lease. */
  | { type: 'breaker.leaseNeeded'; call: CallRequest };

/** The breaker's answer to `breaker.status`: the states tagged `admitting` answer yes. */
export type BreakerStatus = { type: 'breaker.admitting' } | { type: 'breaker.refusing' };

/**
 * What the breaker tells its owner (and emits): a counted failure reached the threshold but the
 * streak's keys are fewer than the quorum, so the provider stays closed and this key gets a circuit
 * of its own (the provider actor trips the key): one bad key does not take the provider down for all.
 */
export type BreakerKeyStreak = {
  type: 'breaker.keyStreak';
  keyId: string;
  errorClass: CountedErrorClass;
  at: number;
};

/**
 * The circuit breaker of one provider. It decides each admission itself (`breaker.admit`, answered
 * `breaker.admitted` / `breaker.rejected` / `breaker.leaseNeeded`): closed admits every call, half-open
 * exactly one probe, open none until `retryAt` (then the call is the probe, whether or not the timer
 * fired). The `admitting` tag marks the states that admit the next call, for views and tests.
 */
export const breakerMachine = setup({
  types: {
    input: {} as BreakerInput,
    context: {} as BreakerContext,
    events: {} as BreakerEvent,
  },
  guards: {
    /**
     * The failure being recorded brings the failure record to the strategy's limit and the streak's
     * distinct keys to the quorum. While shared, the fleet decides the opening (one count and one key
     * set for every instance) and `breaker.synced` brings it.
     */
    isQuorumReached: ({ context, event }) =>
      !context.shared && isThresholdReached(context) && hasQuorum(context, event),
    /**
     * The failure reaches the threshold but its streak has fewer distinct keys than the quorum: a
     * streak from one key (or too few) is that key's problem. Decided locally, shared or not.
     */
    isKeyStreak: ({ context, event }) => isThresholdReached(context) && !hasQuorum(context, event),
    /**
     * Something of a failure record is kept: a count, a streak's keys, an opening's times, a probe, or a
     * grown open period. Without one, a success has nothing to clear and leaves the snapshot as it is
     * (an assign would copy the context and the snapshot on every successful call).
     */
    hasFailureRecord: ({ context }) =>
      context.consecutiveFailures !== 0 ||
      context.streakKeys.length !== 0 ||
      context.openedAt !== null ||
      context.retryAt !== null ||
      context.probeCallId !== null ||
      context.openPeriodMs !== context.recoveryMs,
    /** The result belongs to the call admitted as this half-open window's probe. */
    isProbeResult: ({ context, event }) =>
      recoveryRule.isProbeResult(context.probeCallId, 'callId' in event ? event.callId : undefined),
    /** A fleet store is authoritative: a probe needs the fleet's lease (`breaker.leaseNeeded`). */
    isShared: ({ context }) => context.shared,
    /** The fleet granted this call the probe lease. */
    isLeased: ({ event }) => event.type === 'breaker.admit' && event.leased,
    /** Time lives in the data: the recovery time has passed even if no timer said so (restored, shared). */
    isRetryDue: ({ context, event }) => 'at' in event && recoveryRule.isDue(context.retryAt, event.at),
    /** The fleet's state, as `breaker.synced` carries it. */
    isFleetClosed: ({ event }) => event.type === 'breaker.synced' && event.shared.state === 'closed',
    isFleetOpen: ({ event }) => event.type === 'breaker.synced' && event.shared.state === 'open',
    isFleetHalfOpen: ({ event }) => event.type === 'breaker.synced' && event.shared.state === 'halfOpen',
    isFleetForcedOpen: ({ event }) => event.type === 'breaker.synced' && event.shared.state === 'forcedOpen',
  },
  actions: {
    countFailure: assign({
      consecutiveFailures: ({ context }) => context.consecutiveFailures + 1,
      streakKeys: ({ context, event }) => streakKeysWith(context, event),
    }),
    /** The key's own circuit: the owner (the provider actor) trips the key; emitted for observers too. */
    reportKeyStreak: enqueueActions(({ context, enqueue, event }) => {
      if (event.type !== 'call.failed') return;
      const report: BreakerKeyStreak = {
        type: 'breaker.keyStreak',
        keyId: event.keyId,
        errorClass: event.errorClass,
        at: event.at,
      };
      enqueue.emit(report);
      if (context.owner !== null) enqueue.sendTo(context.owner, report);
    }),
    clearFailures: assign({
      consecutiveFailures: 0,
      streakKeys: [],
      openedAt: null,
      retryAt: null,
      probeCallId: null,
      openPeriodMs: ({ context }) => context.recoveryMs,
    }),
    /** Opening from closed: the open period is the recovery time. */
    startOpenPeriod: assign({ openPeriodMs: ({ context }) => context.recoveryMs }),
    /** A failed probe: the next open period doubles, up to the cap (breaker-strategy.ts). */
    growOpenPeriod: assign({
      openPeriodMs: ({ context }) =>
        doublingOpenPeriod.next(context.openPeriodMs, context.recoveryMs, context.maxRecoveryMs),
    }),
    markOpened: assign({
      openedAt: ({ event }) => event.at,
      retryAt: ({ context, event }) => event.at + context.openPeriodMs,
      retrySetAt: ({ event }) => event.at,
      probeCallId: null,
      opens: ({ context }) => context.opens + 1,
    }),
    markForcedOpen: assign({
      openedAt: ({ event }) => event.at,
      retryAt: null,
      probeCallId: null,
      opens: ({ context }) => context.opens + 1,
    }),
    holdProbe: assign({ probeCallId: ({ event }) => (event.type === 'breaker.admit' ? event.call.callId : null) }),
    /** The call may go out. */
    admitCall: sendTo(
      ({ event }) => admitEvent(event).replyTo,
      ({ event }): BreakerAnswer => ({ type: 'breaker.admitted', call: admitEvent(event).call }),
    ),
    /** The call may not go out: the caller hears when the next probe is admitted (`retryAt`). */
    rejectCall: sendTo(
      ({ event }) => admitEvent(event).replyTo,
      ({ context, event }): BreakerAnswer => ({
        type: 'breaker.rejected',
        call: admitEvent(event).call,
        retryAt: context.retryAt,
      }),
    ),
    /** Shared and recovering: the caller asks the fleet for this window's probe lease, then asks again. */
    askForLease: sendTo(
      ({ event }) => admitEvent(event).replyTo,
      ({ event }): BreakerAnswer => ({ type: 'breaker.leaseNeeded', call: admitEvent(event).call }),
    ),
    freeProbe: assign({ probeCallId: null }),
    /** The next call would be admitted (closed, or half-open with the probe slot free). */
    tellAdmitting: sendTo(
      ({ event }) => statusEvent(event).replyTo,
      (): BreakerStatus => ({ type: 'breaker.admitting' }),
    ),
    /** The next call would be refused (open, forced open, or a probe in flight). */
    tellRefusing: sendTo(
      ({ event }) => statusEvent(event).replyTo,
      (): BreakerStatus => ({ type: 'breaker.refusing' }),
    ),
    /** Take the fleet's count and times; a local probe survives only while the fleet is half-open too. */
    adoptFleetState: assign(({ context, event }) => {
      if (event.type !== 'breaker.synced') return {};
      const { shared } = event;
      return {
        consecutiveFailures: shared.consecutiveFailures,
        streakKeys: shared.streakKeys,
        openedAt: shared.openedAt,
        retryAt: shared.retryAt,
        retrySetAt: event.at,
        opens: Math.max(context.opens, shared.opens),
        openPeriodMs: shared.openPeriodMs,
        probeCallId: shared.state === 'halfOpen' ? context.probeCallId : null,
        shared: true,
      };
    }),
    decideLocally: assign({ shared: false }),
  },
  delays: {
    /**
     * From the event that set `retryAt` to `retryAt`: the open period after an opening here; after the
     * fleet's state, what is left of the fleet's (it may have opened long before this instance heard it).
     * An open state without `retryAt` (a fleet record that has none) waits the open period.
     */
    recoveryTimeout: ({ context }) =>
      context.retryAt === null ? context.openPeriodMs : Math.max(0, context.retryAt - context.retrySetAt),
  },
}).createMachine({
  id: 'breaker',
  context: ({ input }) => ({
    providerId: input.providerId,
    threshold: input.threshold,
    recoveryMs: input.recoveryMs,
    maxRecoveryMs: input.maxRecoveryMs ?? defaultMaxRecoveryMs,
    openPeriodMs: input.recoveryMs,
    strategy: input.strategy ?? 'consecutiveFailures',
    minDistinctKeys: input.minDistinctKeys ?? defaultMinDistinctKeys,
    consecutiveFailures: 0,
    streakKeys: [],
    openedAt: null,
    retryAt: null,
    retrySetAt: 0,
    probeCallId: null,
    opens: 0,
    shared: false,
    owner: input.owner ?? null,
  }),
  initial: 'closed',
  on: {
    'breaker.reset': { target: '.closed', actions: 'clearFailures' },
    'breaker.release': { target: '.closed', actions: 'clearFailures' },
    'breaker.forceOpen': { target: '.forcedOpen', actions: 'markForcedOpen' },
    /** The fleet moved: follow it (a state that already matches handles the event itself, without re-entry). */
    'breaker.synced': [
      { guard: 'isFleetClosed', target: '.closed', actions: 'adoptFleetState' },
      { guard: 'isFleetOpen', target: '.open', actions: 'adoptFleetState' },
      { guard: 'isFleetHalfOpen', target: '.halfOpen', actions: 'adoptFleetState' },
      { guard: 'isFleetForcedOpen', target: '.forcedOpen', actions: 'adoptFleetState' },
    ],
    'breaker.unshared': { actions: 'decideLocally' },
    /** Refusing, unless the state answers itself (the `admitting` ones). */
    'breaker.status': { actions: 'tellRefusing' },
  },
  states: {
    /** Normal operation: every call is admitted; counted failures add up, a success clears them. */
    closed: {
      tags: ['admitting'],
      on: {
        'breaker.admit': { actions: 'admitCall' },
        'breaker.status': { actions: 'tellAdmitting' },
        'call.succeeded': { guard: 'hasFailureRecord', actions: 'clearFailures' },
        'breaker.synced': { guard: 'isFleetClosed', actions: 'adoptFleetState' },
        'call.failed': [
          {
            guard: 'isQuorumReached',
            target: 'open',
            actions: ['countFailure', 'startOpenPeriod', 'markOpened'],
          },
          /** Too few keys for the quorum: the provider stays closed (the streak goes on), the key is tripped. */
          { guard: 'isKeyStreak', actions: ['countFailure', 'reportKeyStreak'] },
          { actions: 'countFailure' },
        ],
      },
    },
    /** Calls are refused without touching the network until the recovery time has passed. */
    open: {
      after: { recoveryTimeout: 'halfOpen' },
      on: {
        /** A call asked for once `retryAt` has passed is the probe, whether or not the timer fired. */
        'breaker.admit': [
          {
            guard: and(['isRetryDue', or([not('isShared'), 'isLeased'])]),
            target: 'halfOpen.probing',
            actions: ['holdProbe', 'admitCall'],
          },
          { guard: 'isRetryDue', actions: 'askForLease' },
          { actions: 'rejectCall' },
        ],
        /** Re-opened elsewhere in the fleet: re-enter to re-arm the timer on the new `retryAt`. */
        'breaker.synced': { guard: 'isFleetOpen', target: 'open', reenter: true, actions: 'adoptFleetState' },
      },
    },
    /** Held open by an operator (maintenance) until released; no timer moves it. */
    forcedOpen: {
      on: {
        'breaker.admit': { actions: 'rejectCall' },
        'breaker.synced': { guard: 'isFleetForcedOpen', actions: 'adoptFleetState' },
      },
    },
    /** Recovery window: exactly one probe at a time decides between closed and open. */
    halfOpen: {
      initial: 'awaitingProbe',
      on: { 'breaker.synced': { guard: 'isFleetHalfOpen', actions: 'adoptFleetState' } },
      states: {
        /** The probe slot is free: the next call is admitted as the probe. */
        awaitingProbe: {
          tags: ['admitting'],
          on: {
            'breaker.status': { actions: 'tellAdmitting' },
            'breaker.admit': [
              { guard: or([not('isShared'), 'isLeased']), target: 'probing', actions: ['holdProbe', 'admitCall'] },
              { actions: 'askForLease' },
            ],
          },
        },
        /** One probe is in flight; everything else is refused until it ends. */
        probing: {
          on: {
            'breaker.admit': { actions: 'rejectCall' },
            'call.succeeded': { guard: 'isProbeResult', target: '#breaker.closed', actions: 'clearFailures' },
            'call.failed': {
              guard: 'isProbeResult',
              target: '#breaker.open',
              // The count stays at the threshold that opened it: bounded, and still true.
              // The open period grows: a provider still down is probed less and less often.
              actions: ['growOpenPeriod', 'markOpened'],
            },
            /** A user-side class or an abort proves nothing about the provider: free the slot. */
            'call.ignored': { guard: 'isProbeResult', target: 'awaitingProbe', actions: 'freeProbe' },
          },
        },
      },
    },
  },
});

export type BreakerMachine = typeof breakerMachine;

/** The strategy's decision for the counted failure being recorded (not yet in the count). */
function isThresholdReached(context: BreakerContext): boolean {
  return openStrategies[context.strategy].shouldOpen(
    { consecutiveFailures: context.consecutiveFailures + 1 },
    context.threshold,
  );
}

/** The streak's voter ids once the counted failure being recorded (with its voter) is in. */
function streakKeysWith(context: BreakerContext, event: BreakerEvent): readonly string[] {
  return event.type === 'call.failed'
    ? distinctKeyQuorum.withKey(
        context.streakKeys,
        distinctKeyQuorum.voter(event.keyId, event.origin),
        context.minDistinctKeys,
      )
    : context.streakKeys;
}

function statusEvent(event: BreakerEvent): Extract<BreakerEvent, { type: 'breaker.status' }> {
  if (event.type !== 'breaker.status') throw new Error(`A status question answered ${event.type}`);
  return event;
}

function admitEvent(event: BreakerEvent): Extract<BreakerEvent, { type: 'breaker.admit' }> {
  if (event.type !== 'breaker.admit') throw new Error(`An admission answered ${event.type}`);
  return event;
}

/** The streak, with the failure being recorded, comes from enough distinct keys. */
function hasQuorum(context: BreakerContext, event: BreakerEvent): boolean {
  return distinctKeyQuorum.reached(streakKeysWith(context, event).length, context.minDistinctKeys);
}
