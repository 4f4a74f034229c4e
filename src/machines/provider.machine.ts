import {
  and,
  assign,
  emit,
  enqueueActions,
  or,
  sendTo,
  setup,
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
import { breakerMachine, type BreakerEvent, type BreakerKeyStreak } from './breaker.machine.js';
import { embeddedFleetLink, type FleetLinkReply } from './fleet-link.js';
import {
  createKeyBookMachine,
  keyAdmission,
  keyHealthOff,
  type KeyBookEvent,
  type KeyHealthSettings,
  type KeySkipReason,
} from './key-book.machine.js';
import type {
  ApiKey,
  BreakerAction,
  CallRecord,
  GenerationRequest,
  ProviderAnswer,
  ProviderId,
  ProviderStats,
  Validation,
} from './types.js';

/**
 * What a call carries through its life and back with its outcome: the provider actor keeps nothing
 * per call in flight (a map of calls copied on every admission and every answer made each call cost
 * O(calls in flight)), so the outcome says whom to answer and which key the call used.
 */
export interface CallTicket {
  readonly callId: string;
  /** Who asked: the outcome goes back to them. */
  readonly replyTo: AnyActorRef;
  /**
   * The caller key's salted fingerprint (the same on every instance of a fleet): the breaker's quorum
   * counts distinct ones, and the call's result is told to that key's health too.
   */
  readonly keyId: string;
}

/** What the upstream call of an admitted request needs (its life: call.machine.ts). */
export interface CallUpstreamInput extends CallTicket {
  readonly providerId: ProviderId;
  readonly request: GenerationRequest;
  readonly apiKey: ApiKey;
  readonly validate: (answer: ProviderAnswer) => Validation<unknown>;
}

/**
 * What an upstream call reports to its provider actor, exactly once (call.machine.ts: the first of
 * its answer, its failure, its deadline — a `timeout` failure — or its caller's cancel).
 */
export type UpstreamEvent =
  | (CallTicket & {
      type: 'upstream.succeeded';
      answer: ProviderAnswer;
      verdict: Validation<unknown>;
      durationMs: number;
      at: number;
    })
  | (CallTicket & { type: 'upstream.failed'; failure: ProviderFailure; durationMs: number; at: number })
  /** The caller cancelled while the call was in flight: aborted, counted nowhere. */
  | (CallTicket & { type: 'upstream.cancelled'; durationMs: number; at: number });

export interface ProviderInput {
  readonly providerId: ProviderId;
  readonly model: string;
  readonly threshold: number;
  readonly recoveryMs: number;
  /** The cap of the breaker's growing open period (BREAKER_MAX_RECOVERY_MS). */
  readonly maxRecoveryMs?: number;
  /** The breaker's quorum of distinct keys (BREAKER_MIN_DISTINCT_KEYS). */
  readonly minDistinctKeys?: number;
  /** Per-key health (KEY_QUARANTINE_MS, KEY_COOLING_MS); absent: off. */
  readonly keyHealth?: KeyHealthSettings;
  /**
   * The breaker is shared with a fleet (REDIS_URL: the fleet link is `createFleetLink`'s). Absent or
   * false: the embedded link, which does nothing with what it hears, so a success nobody else needs is
   * told to no one.
   */
  readonly fleet?: boolean;
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
  /** Shared with a fleet (input `fleet`): only then does the fleet link do anything with a report. */
  readonly fleet: boolean;
}

/** Requests the provider actor serves. */
export type ProviderRequestEvent =
  | {
      type: 'call.requested';
      callId: string;
      request: GenerationRequest;
      apiKey: ApiKey;
      /** The key's salted fingerprint, the same on every instance of a fleet (never the key). */
      keyId: string;
      replyTo: AnyActorRef;
      validate: (answer: ProviderAnswer) => Validation<unknown>;
      at: number;
    }
  | { type: 'call.cancelled'; callId: string; at: number }
  | { type: 'breaker.control'; action: BreakerAction; at: number };

export type ProviderEvent = ProviderRequestEvent | UpstreamEvent | FleetLinkReply | BreakerKeyStreak;

/** A `call.requested` as it is kept while the fleet decides on the probe lease. */
export type CallRequest = Omit<Extract<ProviderRequestEvent, { type: 'call.requested' }>, 'type'>;

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
      at: number;
    }
  | {
      type: 'provider.failed';
      callId: string;
      providerId: ProviderId;
      failure: ProviderFailure;
      countedByBreaker: boolean;
      durationMs: number;
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

/**
 * One provider: it spawns its breaker and serves call requests. A call is admitted only while the
 * breaker says so; each outcome is classified and told to the breaker as a typed event, where only a
 * provider-side class can be a counted failure. Column B is read from `table` (the production
 * `errorPolicy` unless a test injects a flipped row).
 */
export function createProviderMachine(table: ErrorTable) {
  const isCounted = countedClassGuard(table);
  const keyBookMachine = createKeyBookMachine(table);
  /**
   * The breaker's event for a call with key `keyId` that ended in `errorClass`: a FAILURE exactly when
   * column B says so.
   */
  const breakerResult = (callId: string, errorClass: ErrorClass, at: number, keyId: string): BreakerEvent =>
    isCounted(errorClass)
      ? { type: 'call.failed', callId, errorClass, keyId, at }
      : { type: 'call.ignored', callId, errorClass, at };
  const statOf = (errorClass: ErrorClass): keyof ProviderCounters =>
    isCounted(errorClass) ? 'failures' : 'ignored';
  type FailedEvent = Extract<UpstreamEvent, { type: 'upstream.failed' }>;
  type SucceededEvent = Extract<UpstreamEvent, { type: 'upstream.succeeded' }>;
  const succeededResult = ({ event }: { event: SucceededEvent }): BreakerEvent => ({
    type: 'call.succeeded',
    callId: event.callId,
    at: event.at,
  });
  /** An answer that fails validation: `invalid_output`, which column B never counts. */
  const invalidResult = ({ event }: { event: SucceededEvent }): BreakerEvent =>
    breakerResult(event.callId, ownClasses.invalidOutput, event.at, event.keyId);
  const cancelledResult = ({
    event,
  }: {
    event: Extract<UpstreamEvent, { type: 'upstream.cancelled' }>;
  }): BreakerEvent => breakerResult(event.callId, ownClasses.callerAborted, event.at, event.keyId);
  const controlEvent = ({
    event,
  }: {
    event: Extract<ProviderRequestEvent, { type: 'breaker.control' }>;
  }): BreakerEvent => ({
    type: breakerEventFor[event.action],
    at: event.at,
  });
  const failedResult = ({ event }: { event: FailedEvent }): BreakerEvent =>
    breakerResult(event.callId, event.failure.errorClass, event.at, event.keyId);
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
      params: ({ event }: { event: FailedEvent }) => ({
        callId: event.callId,
        replyTo: event.replyTo,
        failure: event.failure,
        counted,
        durationMs: event.durationMs,
        at: event.at,
      }),
    },
    { type: 'countStat' as const, params: { stat: counted ? ('failures' as const) : ('ignored' as const) } },
  ];
  return setup({
    types: {
      input: {} as ProviderInput,
      context: {} as ProviderContext,
      events: {} as ProviderEvent,
      emitted: {} as ProviderEmitted,
      children: {} as { breaker: 'breaker'; fleetLink: 'fleetLink'; keyBook: 'keyBook' },
    },
    actors: {
      breaker: breakerMachine,
      keyBook: keyBookMachine,
      /** Replaced (`.provide`) by `createFleetLink` when a fleet store is configured. */
      fleetLink: embeddedFleetLink,
    },
    guards: {
      /** The caller's key is quarantined or cooling (and its probe is not due): no upstream call. */
      isKeyRefused: ({ context, event }) =>
        event.type === 'call.requested' &&
        !keyAdmission(context.keyBook.getSnapshot().context.keys, event.keyId, event.at).admit,
      /** The breaker admits this call: closed, or half-open with its probe slot free. */
      isBreakerAdmitting: ({ context }) => context.breaker.getSnapshot().hasTag('admitting'),
      /** The breaker is open but its `retryAt` has passed: the call may be the probe (time lives in the data). */
      isRecoveryDue: ({ context, event }) => {
        const breaker = context.breaker.getSnapshot();
        const { retryAt } = breaker.context;
        return breaker.matches('open') && retryAt !== null && 'at' in event && event.at >= retryAt;
      },
      /** The breaker is shared with a fleet and not closed: a probe needs the fleet's lease first. */
      isFleetProbe: ({ context }) => {
        const breaker = context.breaker.getSnapshot();
        return breaker.context.shared === true && !breaker.matches('closed');
      },
      /** The fleet granted the probe lease asked for this call. */
      isLeaseGranted: ({ event }) => event.type === 'probe.leased' && event.granted,
      /** The event answers a lease request whose call still waits (not cancelled). */
      isLeaseAwaited: ({ context, event }) => 'callId' in event && event.callId in context.leasing,
      /** The study layer accepted the answer (validated next to the call). */
      isAnswerValid: ({ event }) => event.type === 'upstream.succeeded' && event.verdict.ok,
      /**
       * Nobody needs to hear this call's start: the breaker would take no transition on `call.started`
       * (it decides, through its own transitions and guards: closed takes none) and the key's book does
       * not track the key (`isKeyTracked`). Each message to a child is a step of that child even when
       * it changes nothing (~1-2 µs, docs/performance.md), so such a start is told to no one.
       */
      isStartUnheard: ({ context, event }) =>
        event.type === 'call.requested' &&
        !isKeyTracked(context, event.keyId) &&
        !context.breaker.getSnapshot().can(callStarted(event)),
      /**
       * Only the fleet needs to hear this success: the breaker would take no transition on
       * `call.succeeded` (closed with nothing to clear) and the key's book does not track the key.
       */
      isSuccessUnheard: ({ context, event }) =>
        event.type === 'upstream.succeeded' &&
        !isKeyTracked(context, event.keyId) &&
        !context.breaker.getSnapshot().can(succeededResult({ event })),
      /**
       * No fleet shares this breaker (the embedded link, no REDIS_URL): a report to the link is a message
       * to an actor that does nothing with it (~4 µs a call, `npm run bench -- core`), so a success that
       * nobody else needs to hear is told to no one.
       */
      isFleetless: ({ context }) => !context.fleet,
      /** The failure is the provider's, so it counts toward the breaker (docs/errors.md column B). */
      isCountedFailure: ({ event }) =>
        event.type === 'upstream.failed' && isCounted(event.failure.errorClass),
    },
    actions: {
      /**
       * Tell the breaker what happened; `reportToFleet` follows it with the same event (but a call's start,
       * no operation of the fleet state: its probe is its lease). Two plain sends
       * rather than one `enqueueActions`, which builds its `enqueue` helpers (a dozen closures) and an
       * action object per send on every call (docs/performance.md).
       */
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
      /**
       * An admitted call's start, for the key's book when it tracks the key (`isKeyTracked`: the call may
       * be the key's probe); the breaker hears `call.started` beside it.
       */
      notifyKeyCalled: enqueueActions(({ context, enqueue }, params: CallRequest) => {
        if (isKeyTracked(context, params.keyId)) {
          enqueue.sendTo(context.keyBook, {
            type: 'key.called',
            keyId: params.keyId,
            callId: params.callId,
            at: params.at,
          } satisfies KeyBookEvent);
        }
      }),
      /** The key's book hears the call answered when it tracks the key (`isKeyTracked`: its probe succeeded). */
      notifyKeyAnswered: enqueueActions(({ context, enqueue }, params: KeyBookEvent) => {
        if (isKeyTracked(context, params.keyId)) enqueue.sendTo(context.keyBook, params);
      }),
      /** Refuse one call: the breaker (or the fleet's probe lease) does not admit it. */
      rejectCall: enqueueActions(
        ({ context, enqueue }, params: { callId: string; replyTo: AnyActorRef; at: number }) => {
          enqueue.sendTo(params.replyTo, {
            type: 'provider.rejected',
            callId: params.callId,
            providerId: context.providerId,
            retryAt: context.breaker.getSnapshot().context.retryAt,
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
      skipForKey: enqueueActions(({ context, enqueue }, params: CallRequest) => {
        const admission = keyAdmission(context.keyBook.getSnapshot().context.keys, params.keyId, params.at);
        if (admission.admit) return;
        enqueue.sendTo(params.replyTo, {
          type: 'provider.keySkipped',
          callId: params.callId,
          providerId: context.providerId,
          reason: admission.reason,
          errorClass: admission.errorClass,
          until: admission.until,
          at: params.at,
        } satisfies ProviderReply);
        enqueue.emit({
          type: 'call.finished',
          record: {
            provider: context.providerId,
            outcome: 'skipped',
            errorClass: admission.errorClass,
            durationMs: 0,
          },
        });
      }),
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
          event: breakerResult(params.callId, ownClasses.callerAborted, params.at, ''),
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
      replyFailed: enqueueActions(
        (
          { context, enqueue },
          params: {
            callId: string;
            replyTo: AnyActorRef;
            failure: ProviderFailure;
            counted: boolean;
            durationMs: number;
            at: number;
          },
        ) => {
          enqueue.sendTo(params.replyTo, {
            type: 'provider.failed',
            callId: params.callId,
            providerId: context.providerId,
            failure: params.failure,
            countedByBreaker: params.counted,
            durationMs: params.durationMs,
            at: params.at,
          } satisfies ProviderReply);
          enqueue.emit({
            type: 'call.finished',
            record: {
              provider: context.providerId,
              outcome: 'failed',
              errorClass: params.failure.errorClass,
              durationMs: params.durationMs,
            },
          });
        },
      ),
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
       * Runs one upstream call, its life decided by call.machine.ts; replaced (`.provide`) by the gateway
       * with `createUpstreamCalls`, whose calls report one `upstream.*` event each back to this actor.
       */
      startUpstream: (_, _params: CallUpstreamInput) => undefined,
      /**
       * The caller cancelled: a call still in flight is aborted and reported `upstream.cancelled`; a call
       * already settled (or never started) is left alone (call.machine.ts: its final states take nothing).
       */
      abortUpstream: (_, _params: { callId: string; at: number }) => undefined,
      /**
       * The breaker's quorum was not met: a failure streak from too few keys gives the failing key its
       * own circuit instead of opening the provider (issue 14 part 3; the key's health trips it).
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
    context: ({ input, spawn }) => {
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
        fleet: input.fleet ?? false,
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
      /** Always serving: calls run concurrently as children; the breaker decides each admission. */
      serving: {
        on: {
          'call.requested': [
            {
              /** The caller's own key is refused: skipped before the breaker is even asked. */
              guard: 'isKeyRefused',
              actions: { type: 'skipForKey', params: ({ event }) => callRequest(event) },
            },
            {
              /** Shared and recovering: the fleet grants one probe per window; wait for its lease. */
              guard: and([or(['isBreakerAdmitting', 'isRecoveryDue']), 'isFleetProbe']),
              actions: { type: 'requestLease', params: ({ event }) => callRequest(event) },
            },
            {
              /** Admitted, and a start the breaker and the key's book would ignore: the call just starts. */
              guard: and([or(['isBreakerAdmitting', 'isRecoveryDue']), 'isStartUnheard']),
              actions: [
                { type: 'countStat', params: { stat: 'calls' } },
                {
                  type: 'startUpstream',
                  params: ({ context, event }) => upstreamInput(context, callRequest(event)),
                },
              ],
            },
            {
              /** Admitted: the breaker hears the start (it may be the half-open probe), the key's book too if it tracks the key. */
              guard: or(['isBreakerAdmitting', 'isRecoveryDue']),
              actions: [
                { type: 'notifyBreaker', params: ({ event }) => callStarted(event) },
                { type: 'notifyKeyCalled', params: ({ event }) => callRequest(event) },
                { type: 'countStat', params: { stat: 'calls' } },
                {
                  type: 'startUpstream',
                  params: ({ context, event }) => upstreamInput(context, callRequest(event)),
                },
              ],
            },
            {
              actions: [
                {
                  type: 'rejectCall',
                  params: ({ event }) => ({ callId: event.callId, replyTo: event.replyTo, at: event.at }),
                },
                { type: 'countStat', params: { stat: 'rejected' } },
              ],
            },
          ],
          'probe.leased': [
            {
              guard: and(['isLeaseAwaited', 'isLeaseGranted', or(['isBreakerAdmitting', 'isRecoveryDue'])]),
              actions: [
                {
                  type: 'notifyBreaker',
                  params: ({ context, event }) => callStarted(leasedCall(context, event.callId)),
                },
                {
                  type: 'notifyKeyCalled',
                  params: ({ context, event }) => leasedCall(context, event.callId),
                },
                { type: 'countStat', params: { stat: 'calls' } },
                {
                  type: 'startUpstream',
                  params: ({ context, event }) => upstreamInput(context, leasedCall(context, event.callId)),
                },
                { type: 'forgetLease', params: ({ event }) => ({ callId: event.callId }) },
              ],
            },
            {
              /** Another instance holds this window's probe (or the breaker moved meanwhile). */
              guard: 'isLeaseAwaited',
              actions: [
                {
                  type: 'rejectCall',
                  params: ({ context, event }) => {
                    const call = leasedCall(context, event.callId);
                    return { callId: call.callId, replyTo: call.replyTo, at: event.at };
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
          /** A streak from too few keys: the provider stays up, the key gets its own circuit. */
          'breaker.keyStreak': { actions: { type: 'tripKey', params: ({ event }) => event } },
          /** The fleet's state, or its loss: the breaker adopts it. */
          'breaker.synced': { actions: { type: 'adoptFleetState', params: ({ event }) => event } },
          'breaker.unshared': { actions: { type: 'adoptFleetState', params: ({ event }) => event } },
          'upstream.succeeded': [
            {
              /** A valid answer nobody needs to hear of: the breaker has nothing to clear, the key is healthy, no fleet. */
              guard: and(['isAnswerValid', 'isSuccessUnheard', 'isFleetless']),
              actions: [
                { type: 'replyAnswered', params: ({ event }) => event },
                { type: 'recordAnswered', params: ({ event }) => event },
                { type: 'countStat', params: { stat: 'successes' } },
              ],
            },
            {
              /** A valid answer only the fleet needs to hear of (the breaker has nothing to clear, the key is healthy). */
              guard: and(['isAnswerValid', 'isSuccessUnheard']),
              actions: [
                { type: 'reportToFleet', params: succeededResult },
                { type: 'replyAnswered', params: ({ event }) => event },
                { type: 'recordAnswered', params: ({ event }) => event },
                { type: 'countStat', params: { stat: 'successes' } },
              ],
            },
            {
              guard: 'isAnswerValid',
              actions: [
                { type: 'notifyBreaker', params: succeededResult },
                { type: 'reportToFleet', params: succeededResult },
                { type: 'notifyKeyAnswered', params: ({ event }) => keySucceeded(event) },
                { type: 'replyAnswered', params: ({ event }) => event },
                { type: 'recordAnswered', params: ({ event }) => event },
                { type: 'countStat', params: { stat: 'successes' } },
              ],
            },
            {
              /** An answer that fails validation proves nothing about the provider: `invalid_output` never counts. */
              actions: [
                { type: 'notifyBreaker', params: invalidResult },
                { type: 'reportToFleet', params: invalidResult },
                /** The upstream answered with the key: the key works, whatever the answer's worth. */
                { type: 'notifyKeyAnswered', params: ({ event }) => keySucceeded(event) },
                { type: 'replyAnswered', params: ({ event }) => event },
                { type: 'recordAnswered', params: ({ event }) => event },
                { type: 'countStat', params: { stat: statOf(ownClasses.invalidOutput) } },
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
              /** In flight (or already settled: then its call machine ignores the cancel). */
              actions: {
                type: 'abortUpstream',
                params: ({ event }) => ({ callId: event.callId, at: event.at }),
              },
            },
          ],
          /** The call was in flight when its caller cancelled (its call machine reached `cancelled`). */
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
            ],
          },
        },
      },
    },
  });
}

/** The provider machine on docs/errors.md's table. */
export const providerMachine = createProviderMachine(errorPolicy);

/** What the upstream call of an admitted request needs. */
function upstreamInput(context: ProviderContext, call: CallRequest): CallUpstreamInput {
  return {
    providerId: context.providerId,
    callId: call.callId,
    replyTo: call.replyTo,
    keyId: call.keyId,
    request: call.request,
    apiKey: call.apiKey,
    validate: call.validate,
  };
}

/**
 * The key book holds an entry for the key (refused, or its probe due or in flight). Only then does a call's
 * start or answer change anything there: the book takes `key.called` and `key.answered` for tracked keys
 * alone (key-book.machine.ts, `isTracked`), so a healthy key's calls send it nothing (each such message
 * was a step of the book that changed nothing, ~1-3 µs per call).
 */
function isKeyTracked(context: ProviderContext, keyId: string): boolean {
  return context.keyBook.getSnapshot().context.keys.has(keyId);
}

/** What the breaker (and the fleet) hear when a call is admitted. */
function callStarted(call: CallRequest): BreakerEvent {
  return { type: 'call.started', callId: call.callId, at: call.at };
}

function keySucceeded(event: Extract<UpstreamEvent, { type: 'upstream.succeeded' }>): KeyBookEvent {
  return { type: 'key.answered', keyId: event.keyId, callId: event.callId, at: event.at };
}

function keyFailed(event: Extract<UpstreamEvent, { type: 'upstream.failed' }>): KeyBookEvent {
  return {
    type: 'key.failed',
    keyId: event.keyId,
    callId: event.callId,
    errorClass: event.failure.errorClass,
    ...(event.failure.retryAfterMs === undefined ? {} : { retryAfterMs: event.failure.retryAfterMs }),
    at: event.at,
  };
}

/** The request itself serves as the call it asks for (no copy per call; `type` is simply not read). */
function callRequest(event: Extract<ProviderRequestEvent, { type: 'call.requested' }>): CallRequest {
  return event;
}

function leasedCall(context: ProviderContext, callId: string): CallRequest {
  const call = context.leasing[callId];
  if (call === undefined) throw new Error(`No call waiting for a probe lease ${callId}`);
  return call;
}

export type ProviderMachine = typeof providerMachine;
