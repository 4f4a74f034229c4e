import {
  and,
  assign,
  emit,
  enqueueActions,
  sendTo,
  setup,
  stopChild,
  type ActorRefFrom,
  type AnyActorRef,
} from 'xstate';
import {
  countedClassGuard,
  errorPolicy,
  ownClasses,
  type ErrorClass,
  type ErrorTable,
  type ProviderFailure,
} from '../errors/index.js';
import {
  breakerMachine,
  type BreakerAnswer,
  type BreakerEvent,
  type BreakerKeyStreak,
} from './breaker.machine.js';
import {
  callMachine,
  defaultDeadlineMs,
  defaultFirstTokenTimeoutMs,
  defaultStreamIdleTimeoutMs,
  type CallEvent,
  type CallInput,
  type CallTimings,
  type UpstreamEvent,
} from './call.machine.js';
import type { CallRequest, CallTicket } from './call-request.js';
import { embeddedFleetLink, type FleetLinkReply } from './fleet-link.js';
import {
  createKeyBookMachine,
  keyHealthOff,
  type KeyBookEvent,
  type KeyHealthSettings,
} from './key-book.machine.js';
import type { KeyAnswer, KeySkipReason } from './key-health.machine.js';
import type {
  BreakerAction,
  CallRecord,
  ProviderAnswer,
  ProviderId,
  ProviderStats,
  Validation,
} from './types.js';

export type { CallRequest, CallTicket } from './call-request.js';
export type { UpstreamEvent } from './call.machine.js';

export interface ProviderInput {
  readonly providerId: ProviderId;
  readonly model: string;
  readonly threshold: number;
  readonly recoveryMs: number;
  /** The cap of the breaker's growing open period (BREAKER_MAX_RECOVERY_MS). */
  readonly maxRecoveryMs?: number;
  /** The breaker's quorum of distinct voters (BREAKER_MIN_DISTINCT_KEYS). */
  readonly minDistinctKeys?: number;
  /** Per-key health (KEY_QUARANTINE_MS, KEY_COOLING_MS); absent: off. */
  readonly keyHealth?: KeyHealthSettings;
  /** Each call's clocks (PROVIDER_TIMEOUT_MS, FIRST_TOKEN_TIMEOUT_MS, STREAM_IDLE_TIMEOUT_MS). */
  readonly timings?: Partial<CallTimings>;
}

/** The provider's counters (GET /v1/providers `stats`), counted in place by `countStat`. */
export type ProviderCounters = { -readonly [K in keyof ProviderStats]: number };

export interface ProviderContext {
  readonly providerId: ProviderId;
  readonly model: string;
  readonly breaker: ActorRefFrom<typeof breakerMachine>;
  /** The breaker's link to the fleet store (a no-op without `REDIS_URL`). */
  readonly fleetLink: ActorRefFrom<typeof embeddedFleetLink>;
  /** The health of the callers' keys for this provider (key-book.machine.ts). */
  readonly keyBook: ActorRefFrom<ReturnType<typeof createKeyBookMachine>>;
  /**
   * Would-be half-open probes waiting for the fleet's probe lease, by call id (only while a shared
   * breaker recovers: a handful at most, so copying it is cheap).
   */
  readonly leasing: Readonly<Record<string, CallRequest>>;
  /**
   * Counters only (never read by a guard): counted in place, so a call copies no stats object. The one
   * object in the context an action changes in place, like the key book's map (key-book.machine.ts).
   */
  readonly stats: ProviderCounters;
  readonly timings: CallTimings;
}

/** Requests the provider actor serves. */
export type ProviderRequestEvent =
  | ({ type: 'call.requested' } & CallRequest)
  | { type: 'call.cancelled'; callId: string; at: number }
  | { type: 'breaker.control'; action: BreakerAction; at: number };

export type ProviderEvent =
  | ProviderRequestEvent
  | UpstreamEvent
  | FleetLinkReply
  | BreakerKeyStreak
  | BreakerAnswer
  | KeyAnswer;

/** The call's streaming figures (Attempt.streamed), or null when it did not stream. */
export type Streamed = { chunks: number; firstTokenMs: number } | null;

/** What the provider actor answers the caller of `call.requested`, exactly once per call. */
export type ProviderReply =
  | {
      type: 'provider.succeeded';
      callId: string;
      providerId: ProviderId;
      answer: ProviderAnswer;
      /** The study layer's verdict, judged next to the call; `ok: false` is `invalid_output`. */
      verdict: Validation<unknown>;
      durationMs: number;
      streamed: Streamed;
      at: number;
    }
  | {
      type: 'provider.failed';
      callId: string;
      providerId: ProviderId;
      failure: ProviderFailure;
      countedByBreaker: boolean;
      durationMs: number;
      streamed: Streamed;
      /** The answer's text written before a failure mid-stream (the fallback run may continue it). */
      partialText?: string;
      at: number;
    }
  | { type: 'provider.rejected'; callId: string; providerId: ProviderId; retryAt: number | null; at: number }
  /** The caller's key is quarantined or cooling: skipped without an upstream call. */
  | {
      type: 'provider.keySkipped';
      callId: string;
      providerId: ProviderId;
      reason: KeySkipReason;
      /** The class that made the key unhealthy. */
      errorClass: ErrorClass;
      /** Epoch ms until which the key is refused. */
      until: number;
      at: number;
    };

export type ProviderEmitted = { type: 'call.finished'; record: CallRecord };

function emptyStats(): ProviderCounters {
  return { calls: 0, successes: 0, failures: 0, ignored: 0, rejected: 0, opens: 0 };
}

const breakerEventFor = {
  reset: 'breaker.reset',
  forceOpen: 'breaker.forceOpen',
  release: 'breaker.release',
} as const;

type FailedEvent = Extract<UpstreamEvent, { type: 'upstream.failed' }>;
type SucceededEvent = Extract<UpstreamEvent, { type: 'upstream.succeeded' }>;
type CancelledEvent = Extract<UpstreamEvent, { type: 'upstream.cancelled' }>;

/**
 * One provider: it spawns its breaker, key book and fleet link, and serves call requests. A call is
 * asked of the key book by message (`key.admit`: the caller key's own actor, or the book for a key it
 * does not track, answers `key.admitted` or `key.refused`; a refused key is skipped), then of the breaker
 * (`breaker.admit`: the breaker alone decides, and answers `breaker.admitted`, `breaker.rejected` or
 * `breaker.leaseNeeded`); an admitted call runs as a child actor of its own (call.machine.ts, id =
 * the call id) whose one outcome comes back as `upstream.*`. Each outcome is classified and told to the
 * breaker as a typed event, where only a provider-side class can be a counted failure. Column B is read
 * from `table` (the production `errorPolicy` unless a test injects a flipped row).
 */
export function createProviderMachine(table: ErrorTable) {
  const isCounted = countedClassGuard(table);
  const keyBookMachine = createKeyBookMachine(table);
  /** The breaker's event for a call that ended in `errorClass`: a FAILURE exactly when column B says so. */
  const breakerResult = (ticket: Pick<CallTicket, 'callId' | 'keyId' | 'origin'>, errorClass: ErrorClass, at: number): BreakerEvent =>
    isCounted(errorClass)
      ? { type: 'call.failed', callId: ticket.callId, errorClass, keyId: ticket.keyId, origin: ticket.origin, at }
      : { type: 'call.ignored', callId: ticket.callId, errorClass, at };
  const statOf = (errorClass: ErrorClass): keyof ProviderCounters =>
    isCounted(errorClass) ? 'failures' : 'ignored';
  const succeededResult = ({ event }: { event: SucceededEvent }): BreakerEvent => ({
    type: 'call.succeeded',
    callId: event.callId,
    at: event.at,
  });
  /** An answer that fails validation: `invalid_output`, which column B never counts. */
  const invalidResult = ({ event }: { event: SucceededEvent }): BreakerEvent =>
    breakerResult(event, ownClasses.invalidOutput, event.at);
  const cancelledResult = ({ event }: { event: CancelledEvent }): BreakerEvent =>
    breakerResult(event, ownClasses.callerAborted, event.at);
  const controlEvent = ({
    event,
  }: {
    event: Extract<ProviderRequestEvent, { type: 'breaker.control' }>;
  }): BreakerEvent => ({
    type: breakerEventFor[event.action],
    at: event.at,
  });
  const failedResult = ({ event }: { event: FailedEvent }): BreakerEvent =>
    breakerResult(event, event.failure.errorClass, event.at);
  /** The call is over: its actor leaves the provider's children. */
  const endCall = { type: 'endCall' as const, params: ({ event }: { event: UpstreamEvent }) => ({ callId: event.callId }) };
  /**
   * What a failed call does, on both branches of `upstream.failed`: `counted` is column B's verdict,
   * which the branch's guard (`isCountedFailure`) decided.
   */
  const failedCallActions = (counted: boolean) => [
    { type: 'notifyBreaker' as const, params: failedResult },
    { type: 'reportToFleet' as const, params: failedResult },
    { type: 'notifyKey' as const, params: ({ event }: { event: FailedEvent }) => keyFailed(event) },
    {
      type: 'replyFailed' as const,
      params: ({ event }: { event: FailedEvent }) => ({ event, counted }),
    },
    { type: 'countStat' as const, params: { stat: counted ? ('failures' as const) : ('ignored' as const) } },
    endCall,
  ];
  return setup({
    types: {
      input: {} as ProviderInput,
      context: {} as ProviderContext,
      events: {} as ProviderEvent,
      emitted: {} as ProviderEmitted,
    },
    actors: {
      breaker: breakerMachine,
      keyBook: keyBookMachine,
      /** Replaced (`.provide`) by the gateway with the adapters' calls as its `upstream` actor. */
      call: callMachine,
      /** Replaced (`.provide`) by `createFleetLink` when a fleet store is configured. */
      fleetLink: embeddedFleetLink,
    },
    guards: {
      /** The fleet granted the probe lease asked for this call. */
      isLeaseGranted: ({ event }) => event.type === 'probe.leased' && event.granted,
      /** The event answers a lease request whose call still waits (not cancelled). */
      isLeaseAwaited: ({ context, event }) => 'callId' in event && event.callId in context.leasing,
      /** The study layer accepted the answer (validated next to the call). */
      isAnswerValid: ({ event }) => event.type === 'upstream.succeeded' && event.verdict.ok,
      /** The failure is the provider's, so it counts toward the breaker (docs/errors.md column B). */
      isCountedFailure: ({ event }) => event.type === 'upstream.failed' && isCounted(event.failure.errorClass),
    },
    actions: {
      /** Ask the key book whether the caller's key lets this call out (it answers this actor: `KeyAnswer`). */
      askKeyBook: sendTo(
        ({ context }) => context.keyBook,
        ({ self }, call: CallRequest): KeyBookEvent => ({
          type: 'key.admit',
          keyId: call.keyId,
          call,
          replyTo: self,
          at: call.at,
        }),
      ),
      /** Ask the breaker whether this call may go out (it answers this actor: `BreakerAnswer`). */
      askBreaker: sendTo(
        ({ context }) => context.breaker,
        ({ self }, params: { call: CallRequest; leased: boolean; at: number }): BreakerEvent => ({
          type: 'breaker.admit',
          call: params.call,
          replyTo: self,
          leased: params.leased,
          at: params.at,
        }),
      ),
      /** Tell the breaker what happened. */
      notifyBreaker: sendTo(
        ({ context }) => context.breaker,
        (_, params: BreakerEvent) => params,
      ),
      /** The fleet hears what the breaker heard, through the fleet link (a no-op without `REDIS_URL`). */
      reportToFleet: sendTo(
        ({ context }) => context.fleetLink,
        (_, params: BreakerEvent) => ({ type: 'fleet.report' as const, event: params }),
      ),
      /** The fleet's state (or its loss) for the breaker to adopt; never echoed back to the fleet. */
      adoptFleetState: sendTo(
        ({ context }) => context.breaker,
        (_, params: Extract<BreakerEvent, { type: 'breaker.synced' | 'breaker.unshared' }>) => params,
      ),
      /** Tell the key's health what happened to a call made with it (column K decides what it does). */
      notifyKey: sendTo(
        ({ context }) => context.keyBook,
        (_, params: KeyBookEvent) => params,
      ),
      /** The admitted call goes out: a child actor of its own, named by its call id. */
      startCall: enqueueActions(({ context, enqueue }, call: CallRequest) => {
        const input: CallInput = {
          providerId: context.providerId,
          callId: call.callId,
          replyTo: call.replyTo,
          keyId: call.keyId,
          origin: call.origin,
          request: call.request,
          apiKey: call.apiKey,
          validate: call.validate,
          onDelta: call.onDelta,
          startedAt: call.at,
          timings: context.timings,
        };
        enqueue.spawnChild('call', { id: call.callId, systemId: callSystemId(call.callId), input });
      }),
      /** The caller went away: its call, if still running, hears `call.cancelled` (and reports it). */
      cancelCall: enqueueActions(({ enqueue, system }, params: { callId: string; at: number }) => {
        const call: AnyActorRef | undefined = system.get(callSystemId(params.callId));
        if (call !== undefined) enqueue.sendTo(call, { type: 'call.cancelled', at: params.at } satisfies CallEvent);
      }),
      endCall: stopChild((_, params: { callId: string }) => params.callId),
      /** Refuse one call: the breaker (or the fleet's probe lease) does not admit it. */
      rejectCall: enqueueActions(
        (
          { context, enqueue },
          params: { callId: string; replyTo: AnyActorRef; retryAt: number | null; at: number },
        ) => {
          enqueue.sendTo(params.replyTo, {
            type: 'provider.rejected',
            callId: params.callId,
            providerId: context.providerId,
            retryAt: params.retryAt,
            at: params.at,
          } satisfies ProviderReply);
          enqueue.emit({
            type: 'call.finished',
            record: {
              provider: context.providerId,
              outcome: 'rejected',
              errorClass: ownClasses.breakerRefused,
              durationMs: 0,
            },
          });
        },
      ),
      /** The caller's key is refused: skip the call at once, with the key's reason, class and `until`. */
      skipForKey: enqueueActions(
        ({ context, enqueue }, params: Extract<KeyAnswer, { type: 'key.refused' }>) => {
          const { call } = params;
          enqueue.sendTo(call.replyTo, {
            type: 'provider.keySkipped',
            callId: call.callId,
            providerId: context.providerId,
            reason: params.reason,
            errorClass: params.errorClass,
            until: params.until,
            at: call.at,
          } satisfies ProviderReply);
          enqueue.emit({
            type: 'call.finished',
            record: {
              provider: context.providerId,
              outcome: 'skipped',
              errorClass: params.errorClass,
              durationMs: 0,
            },
          });
        },
      ),
      /** Hold the call and ask the fleet for this window's probe lease. */
      requestLease: enqueueActions(({ context, enqueue }, params: CallRequest) => {
        enqueue.assign({ leasing: { ...context.leasing, [params.callId]: params } });
        enqueue.sendTo(context.fleetLink, { type: 'probe.requested', callId: params.callId, at: params.at });
      }),
      forgetLease: assign({
        leasing: ({ context }, params: { callId: string }) => {
          const { [params.callId]: _answered, ...leasing } = context.leasing;
          return leasing;
        },
      }),
      /** A lease granted to a call nobody waits for any more: free the fleet's probe slot at once. */
      freeLease: sendTo(
        ({ context }) => context.fleetLink,
        (_, params: { callId: string; at: number }) => ({
          type: 'fleet.report' as const,
          event: breakerResult({ callId: params.callId, keyId: '' }, ownClasses.callerAborted, params.at),
        }),
      ),
      /** One more of `stat` (counted in place: a counter read by no guard). */
      countStat: ({ context }, params: { stat: keyof ProviderCounters }) => {
        context.stats[params.stat] += 1;
      },
      /** The caller hears the answer and its verdict (`recordAnswered` then tells the listeners). */
      replyAnswered: sendTo(
        (_, params: SucceededEvent) => params.replyTo,
        ({ context }, params: SucceededEvent) =>
          ({
            type: 'provider.succeeded',
            callId: params.callId,
            providerId: context.providerId,
            answer: params.answer,
            verdict: params.verdict,
            durationMs: params.durationMs,
            streamed: params.streamed,
            at: params.at,
          }) satisfies ProviderReply,
      ),
      recordAnswered: emit(({ context }, params: SucceededEvent) => ({
        type: 'call.finished' as const,
        record: params.verdict.ok
          ? {
              provider: context.providerId,
              outcome: 'succeeded' as const,
              durationMs: params.durationMs,
              usage: params.answer.usage,
            }
          : {
              provider: context.providerId,
              outcome: 'failed' as const,
              errorClass: ownClasses.invalidOutput,
              durationMs: params.durationMs,
              usage: params.answer.usage,
            },
      })),
      replyFailed: enqueueActions(({ context, enqueue }, params: { event: FailedEvent; counted: boolean }) => {
        const { event } = params;
        enqueue.sendTo(event.replyTo, {
          type: 'provider.failed',
          callId: event.callId,
          providerId: context.providerId,
          failure: event.failure,
          countedByBreaker: params.counted,
          durationMs: event.durationMs,
          streamed: event.streamed,
          ...(event.partialText === undefined ? {} : { partialText: event.partialText }),
          at: event.at,
        } satisfies ProviderReply);
        enqueue.emit({
          type: 'call.finished',
          record: {
            provider: context.providerId,
            outcome: 'failed',
            errorClass: event.failure.errorClass,
            durationMs: event.durationMs,
          },
        });
      }),
      /** A call still running was cancelled by its caller (client gone, job cancelled): record it as `aborted`. */
      recordAborted: emit(({ context }, params: { durationMs: number }) => ({
        type: 'call.finished' as const,
        record: {
          provider: context.providerId,
          outcome: 'aborted' as const,
          errorClass: ownClasses.callerAborted,
          durationMs: Math.max(0, params.durationMs),
        },
      })),
      /**
       * The breaker's quorum was not met: a failure streak from too few voters gives the failing key its
       * own circuit instead of opening the provider (the key's health trips it):
       * one bad key cannot shut a provider for all.
       */
      tripKey: sendTo(
        ({ context }) => context.keyBook,
        (_, params: BreakerKeyStreak): KeyBookEvent => ({
          type: 'key.tripped',
          keyId: params.keyId,
          errorClass: params.errorClass,
          at: params.at,
        }),
      ),
    },
  }).createMachine({
    id: 'provider',
    context: ({ input, spawn, self }) => {
      const keyBook = spawn('keyBook', {
        id: 'keyBook',
        systemId: `keyBook.${input.providerId}`,
        input: { providerId: input.providerId, ...(input.keyHealth ?? keyHealthOff) },
      });
      const breaker = spawn('breaker', {
        id: 'breaker',
        systemId: `breaker.${input.providerId}`,
        input: {
          providerId: input.providerId,
          threshold: input.threshold,
          recoveryMs: input.recoveryMs,
          ...(input.maxRecoveryMs === undefined ? {} : { maxRecoveryMs: input.maxRecoveryMs }),
          ...(input.minDistinctKeys === undefined ? {} : { minDistinctKeys: input.minDistinctKeys }),
          owner: self,
        },
      });
      return {
        providerId: input.providerId,
        model: input.model,
        breaker,
        fleetLink: spawn('fleetLink', {
          id: 'fleetLink',
          systemId: `fleetLink.${input.providerId}`,
          input: { providerId: input.providerId, breaker },
        }),
        keyBook,
        leasing: {},
        stats: emptyStats(),
        timings: {
          deadlineMs: input.timings?.deadlineMs ?? defaultDeadlineMs,
          firstTokenTimeoutMs: input.timings?.firstTokenTimeoutMs ?? defaultFirstTokenTimeoutMs,
          streamIdleTimeoutMs: input.timings?.streamIdleTimeoutMs ?? defaultStreamIdleTimeoutMs,
        },
      };
    },
    initial: 'serving',
    on: {
      'breaker.control': {
        actions: [
          { type: 'notifyBreaker', params: controlEvent },
          { type: 'reportToFleet', params: controlEvent },
        ],
      },
    },
    states: {
      /**
       * Always serving: admissions are asked of the key book and the breaker by message, admitted calls run
       * concurrently as child actors, and each one's outcome is told to the breaker, the fleet, the key
       * book and the caller.
       */
      serving: {
        on: {
          /** The caller's key is asked first (its answer comes back as `key.*`). */
          'call.requested': { actions: { type: 'askKeyBook', params: ({ event }) => event } },
          /** The key lets the call out: the breaker decides (its answer comes back as `breaker.*`). */
          'key.admitted': {
            actions: { type: 'askBreaker', params: ({ event }) => ({ call: event.call, leased: false, at: event.call.at }) },
          },
          /** The caller's own key is refused: skipped before the breaker is even asked. */
          'key.refused': { actions: { type: 'skipForKey', params: ({ event }) => event } },
          /** The breaker admits the call: it goes out as a child actor; the key's book hears its start. */
          'breaker.admitted': {
            actions: [
              { type: 'notifyKey', params: ({ event }) => keyCalled(event.call) },
              { type: 'countStat', params: { stat: 'calls' } },
              { type: 'startCall', params: ({ event }) => event.call },
            ],
          },
          'breaker.rejected': {
            actions: [
              {
                type: 'rejectCall',
                params: ({ event }) => ({
                  callId: event.call.callId,
                  replyTo: event.call.replyTo,
                  retryAt: event.retryAt,
                  at: event.call.at,
                }),
              },
              { type: 'countStat', params: { stat: 'rejected' } },
            ],
          },
          /** Shared and recovering: the fleet grants one probe per window; wait for its lease. */
          'breaker.leaseNeeded': { actions: { type: 'requestLease', params: ({ event }) => event.call } },
          'probe.leased': [
            {
              /** The lease is this call's: the breaker is asked again, as a leased probe. */
              guard: and(['isLeaseAwaited', 'isLeaseGranted']),
              actions: [
                {
                  type: 'askBreaker',
                  params: ({ context, event }) => ({ call: leasedCall(context, event.callId), leased: true, at: event.at }),
                },
                { type: 'forgetLease', params: ({ event }) => ({ callId: event.callId }) },
              ],
            },
            {
              /**
               * Another instance holds this window's probe: refused, to try again when that probe ends
               * at the latest (its start plus PROVIDER_TIMEOUT_MS), or in a moment when that is unknown.
               */
              guard: 'isLeaseAwaited',
              actions: [
                {
                  type: 'rejectCall',
                  params: ({ context, event }) => {
                    const call = leasedCall(context, event.callId);
                    return { callId: call.callId, replyTo: call.replyTo, retryAt: probeRetryAt(event), at: event.at };
                  },
                },
                { type: 'countStat', params: { stat: 'rejected' } },
                { type: 'forgetLease', params: ({ event }) => ({ callId: event.callId }) },
              ],
            },
            {
              guard: 'isLeaseGranted',
              actions: { type: 'freeLease', params: ({ event }) => ({ callId: event.callId, at: event.at }) },
            },
          ],
          /** A streak from too few voters: the provider stays up, the key gets its own circuit. */
          'breaker.keyStreak': { actions: { type: 'tripKey', params: ({ event }) => event } },
          /** The fleet's state, or its loss: the breaker adopts it. */
          'breaker.synced': { actions: { type: 'adoptFleetState', params: ({ event }) => event } },
          'breaker.unshared': { actions: { type: 'adoptFleetState', params: ({ event }) => event } },
          'upstream.succeeded': [
            {
              guard: 'isAnswerValid',
              actions: [
                { type: 'notifyBreaker', params: succeededResult },
                { type: 'reportToFleet', params: succeededResult },
                { type: 'notifyKey', params: ({ event }) => keySucceeded(event) },
                { type: 'replyAnswered', params: ({ event }) => event },
                { type: 'recordAnswered', params: ({ event }) => event },
                { type: 'countStat', params: { stat: 'successes' } },
                endCall,
              ],
            },
            {
              /** An answer that fails validation proves nothing about the provider: `invalid_output` never counts. */
              actions: [
                { type: 'notifyBreaker', params: invalidResult },
                { type: 'reportToFleet', params: invalidResult },
                /** The upstream answered with the key: the key works, whatever the answer's worth. */
                { type: 'notifyKey', params: ({ event }) => keySucceeded(event) },
                { type: 'replyAnswered', params: ({ event }) => event },
                { type: 'recordAnswered', params: ({ event }) => event },
                { type: 'countStat', params: { stat: statOf(ownClasses.invalidOutput) } },
                endCall,
              ],
            },
          ],
          /** Column B decides: the breaker hears a FAILURE (`call.failed`) or an ignored result. */
          'upstream.failed': [
            { guard: 'isCountedFailure', actions: failedCallActions(true) },
            { actions: failedCallActions(false) },
          ],
          /** The caller went away: abort the call; the breaker hears `aborted`, which never counts. */
          'call.cancelled': [
            {
              /** Still waiting for the probe lease: forget it (a lease granted later is freed at once). */
              guard: 'isLeaseAwaited',
              actions: { type: 'forgetLease', params: ({ event }) => ({ callId: event.callId }) },
            },
            {
              /** Running: its call actor is told (one already over has left the children: nothing to do). */
              actions: { type: 'cancelCall', params: ({ event }) => ({ callId: event.callId, at: event.at }) },
            },
          ],
          /** The call was in flight when its caller cancelled (its call actor reached `aborted`). */
          'upstream.cancelled': {
            actions: [
              { type: 'notifyBreaker', params: cancelledResult },
              { type: 'reportToFleet', params: cancelledResult },
              {
                type: 'notifyKey',
                params: ({ event }) => ({
                  type: 'key.failed' as const,
                  keyId: event.keyId,
                  callId: event.callId,
                  errorClass: ownClasses.callerAborted,
                  at: event.at,
                }),
              },
              { type: 'countStat', params: { stat: statOf(ownClasses.callerAborted) } },
              { type: 'recordAborted', params: ({ event }) => ({ durationMs: event.durationMs }) },
              endCall,
            ],
          },
        },
      },
    },
  });
}

/** The provider machine on docs/errors.md's table. */
export const providerMachine = createProviderMachine(errorPolicy);

/** An admitted call's start, for the key's book (the call may be the key's probe). */
function keyCalled(call: CallRequest): KeyBookEvent {
  return { type: 'key.called', keyId: call.keyId, callId: call.callId, at: call.at };
}

function keySucceeded(event: SucceededEvent): KeyBookEvent {
  return { type: 'key.answered', keyId: event.keyId, callId: event.callId, at: event.at };
}

function keyFailed(event: FailedEvent): KeyBookEvent {
  return {
    type: 'key.failed',
    keyId: event.keyId,
    callId: event.callId,
    errorClass: event.failure.errorClass,
    ...(event.failure.retryAfterMs === undefined ? {} : { retryAfterMs: event.failure.retryAfterMs }),
    at: event.at,
  };
}

/** A running call's id in the actor system (its actor leaves the system when it ends). */
export function callSystemId(callId: string): string {
  return `call.${callId}`;
}

/** A refused lease's retry time: when the holder's probe ends by, never before the answer's time. */
function probeRetryAt(event: Extract<FleetLinkReply, { type: 'probe.leased' }>): number {
  return Math.max(event.at, event.probeEndsBy ?? event.at);
}

function leasedCall(context: ProviderContext, callId: string): CallRequest {
  const call = context.leasing[callId];
  if (call === undefined) throw new Error(`No call waiting for a probe lease ${callId}`);
  return call;
}

export type ProviderMachine = typeof providerMachine;
