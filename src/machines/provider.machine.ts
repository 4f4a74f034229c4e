import {
  assign,
  emit,
  enqueueActions,
  sendTo,
  setup,
  stopChild,
  type ActorRefFrom,
  type AnyActorRef,
} from 'xstate';
import { countedClassGuard, errorPolicy, type ErrorClass, type ErrorTable } from '../errors/index.js';
import {
  createAttemptMachine,
  defaultDeadlineMs,
  defaultFirstTokenTimeoutMs,
  defaultStreamIdleTimeoutMs,
  type AttemptCancelled,
  type AttemptEnded,
  type AttemptInput,
  type CallTimings,
} from './attempt.machine.js';
import { breakerMachine, type BreakerEvent, type BreakerKeyStreak } from './breaker.machine.js';
import type { CallRequest } from './call-request.js';
import { embeddedFleetLink, type FleetLinkEvent, type FleetLinkReply } from './fleet-link.js';
import {
  createKeyBookMachine,
  keyHealthOff,
  type KeyBookEvent,
  type KeyHealthSettings,
} from './key-book.machine.js';
import type { BreakerAction, CallRecord, ProviderId, ProviderStats } from './types.js';

export type { CallRequest } from './call-request.js';
export type { ProviderReply } from './attempt.machine.js';

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

/** `stats` after one more call ended with `record`: a refusal, a success, or a failure counted or not (column B). */
function countedStats(stats: ProviderStats, record: CallRecord, isCounted: (errorClass: ErrorClass) => boolean): ProviderStats {
  if (record.outcome === 'rejected') return { ...stats, rejected: stats.rejected + 1 };
  if (record.outcome === 'succeeded') return { ...stats, calls: stats.calls + 1, successes: stats.successes + 1 };
  if (record.outcome === 'skipped') return stats;
  const counted = record.errorClass !== undefined && isCounted(record.errorClass);
  return counted ? { ...stats, calls: stats.calls + 1, failures: stats.failures + 1 } : { ...stats, calls: stats.calls + 1, ignored: stats.ignored + 1 };
}

interface ProviderContext {
  readonly providerId: ProviderId;
  readonly model: string;
  readonly breaker: ActorRefFrom<typeof breakerMachine>;
  /** The breaker's link to the fleet store (a no-op without `REDIS_URL`). */
  readonly fleetLink: ActorRefFrom<typeof embeddedFleetLink>;
  /** The health of the callers' keys for this provider (key-book.machine.ts). */
  readonly keyBook: ActorRefFrom<ReturnType<typeof createKeyBookMachine>>;
  /** What this provider's calls came to (GET /v1/providers `stats`). */
  readonly stats: ProviderStats;
  readonly timings: CallTimings;
}

/** Requests the provider actor serves. */
export type ProviderRequestEvent =
  | ({ type: 'call.requested' } & CallRequest)
  | { type: 'call.cancelled'; callId: string; at: number }
  | { type: 'breaker.control'; action: BreakerAction; at: number };

export type ProviderEvent = ProviderRequestEvent | AttemptEnded | FleetLinkReply | BreakerKeyStreak;

export type ProviderEmitted = { type: 'call.finished'; record: CallRecord };

function emptyStats(): ProviderStats {
  return { calls: 0, successes: 0, failures: 0, ignored: 0, rejected: 0, opens: 0 };
}

const breakerEventFor = {
  reset: 'breaker.reset',
  forceOpen: 'breaker.forceOpen',
  release: 'breaker.release',
} as const;

/**
 * One provider: the owner of its breaker, its key book, its fleet link and its settings. It does not
 * carry a call's steps: each `call.requested` is spawned as an attempt of its own (attempt.machine.ts,
 * id = the call id), which asks the key book, the breaker and the fleet link by message, makes the
 * call, reports its outcome and answers the caller. The provider stops an attempt when it hears
 * `attempt.ended`, and counts its record; it passes on its caller's cancel (the fleet link answers a probe
 * lease to the attempt that asked). Column B (`table`, the production `errorPolicy`
 * unless a test injects a flipped row) decides what counts, in the attempt and in the counters.
 */
export function createProviderMachine(table: ErrorTable) {
  const isCounted = countedClassGuard(table);
  const attempt = createAttemptMachine(table);
  const keyBookMachine = createKeyBookMachine(table);
  const controlEvent = ({
    event,
  }: {
    event: Extract<ProviderRequestEvent, { type: 'breaker.control' }>;
  }): BreakerEvent => ({
    type: breakerEventFor[event.action],
    at: event.at,
  });
  return setup({
    types: {} as {
      input: ProviderInput;
      context: ProviderContext;
      events: ProviderEvent;
      emitted: ProviderEmitted;
    },
    actors: {
      breaker: breakerMachine,
      keyBook: keyBookMachine,
      /** Replaced (`.provide`) by the gateway with the adapters' calls as its `upstream` actor. */
      attempt,
      /** Replaced (`.provide`) by `createFleetLink` when a fleet store is configured. */
      fleetLink: embeddedFleetLink,
    },
    guards: {
      /** The attempt ended with something to count (an attempt withdrawn before it went out has none). */
      hasRecord: ({ event }) => event.type === 'attempt.ended' && event.record !== null,
    },
    actions: {
      /** Tell the breaker an operator's action. */
      notifyBreaker: sendTo(
        ({ context }) => context.breaker,
        (_, params: BreakerEvent) => params,
      ),
      /** The fleet hears what the breaker heard, through the fleet link (a no-op without `REDIS_URL`). */
      reportToFleet: sendTo(
        ({ context }) => context.fleetLink,
        (_, params: BreakerEvent): FleetLinkEvent => ({ type: 'fleet.report', event: params }),
      ),
      /** The fleet's state (or its loss) for the breaker to adopt; never echoed back to the fleet. */
      adoptFleetState: sendTo(
        ({ context }) => context.breaker,
        (_, params: Extract<BreakerEvent, { type: 'breaker.synced' | 'breaker.unshared' }>) => params,
      ),
      /** The call's own actor: it takes the call's whole path from here. */
      startAttempt: enqueueActions(({ context, enqueue, self }, call: CallRequest) => {
        const input: AttemptInput = {
          providerId: context.providerId,
          owner: self,
          call,
          timings: context.timings,
          keyBook: context.keyBook,
          breaker: context.breaker,
          fleetLink: context.fleetLink,
        };
        enqueue.spawnChild('attempt', { id: call.callId, systemId: attemptSystemId(call.callId), input });
      }),
      /** The attempt is over: it leaves the provider's children (and the system). */
      endAttempt: stopChild((_, params: { callId: string }) => params.callId),
      /** Pass the caller's cancel on to its call's attempt, if it still runs (one already over has left). */
      passToAttempt: enqueueActions(({ enqueue, system }, params: { callId: string; event: AttemptCancelled }) => {
        const running: AnyActorRef | undefined = system.get(attemptSystemId(params.callId));
        if (running !== undefined) enqueue.sendTo(running, params.event);
      }),
      /** Count the attempt's record, by column B. */
      countRecord: assign(({ context }, record: CallRecord) => ({ stats: countedStats(context.stats, record, isCounted) })),
      /** The listeners (metrics) hear every finished call. */
      announceRecord: emit((_, record: CallRecord): ProviderEmitted => ({ type: 'call.finished', record })),
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
        stats: emptyStats(),
        timings: {
          deadlineMs: input.timings?.deadlineMs ?? defaultDeadlineMs,
          firstTokenTimeoutMs: input.timings?.firstTokenTimeoutMs ?? defaultFirstTokenTimeoutMs,
          streamIdleTimeoutMs: input.timings?.streamIdleTimeoutMs ?? defaultStreamIdleTimeoutMs,
        },
      };
    },
    initial: 'serving',
    states: {
      /**
       * Always serving: each call runs as an attempt of its own, concurrently; the provider answers for
       * its breaker, its keys and its settings.
       */
      serving: {
        on: {
          /** A call: its attempt takes it from here (key, breaker, lease, upstream, report, reply). */
          'call.requested': { actions: { type: 'startAttempt', params: ({ event }) => event } },
          /** Its caller went away: its attempt hears it (one already over has left: nothing to do). */
          'call.cancelled': {
            actions: {
              type: 'passToAttempt',
              params: ({ event }) => ({ callId: event.callId, event: { type: 'call.cancelled', at: event.at } }),
            },
          },
          /** An attempt is over: stopped, and its record counted. */
          'attempt.ended': [
            {
              guard: 'hasRecord',
              actions: [
                { type: 'countRecord', params: ({ event }) => event.record as CallRecord },
                { type: 'announceRecord', params: ({ event }) => event.record as CallRecord },
                { type: 'endAttempt', params: ({ event }) => ({ callId: event.callId }) },
              ],
            },
            { actions: { type: 'endAttempt', params: ({ event }) => ({ callId: event.callId }) } },
          ],
          /** An operator's action: the breaker and the fleet hear it. */
          'breaker.control': {
            actions: [
              { type: 'notifyBreaker', params: controlEvent },
              { type: 'reportToFleet', params: controlEvent },
            ],
          },
          /** A streak from too few voters: the provider stays up, the key gets its own circuit. */
          'breaker.keyStreak': { actions: { type: 'tripKey', params: ({ event }) => event } },
          /** The fleet's state, or its loss: the breaker adopts it. */
          'breaker.synced': { actions: { type: 'adoptFleetState', params: ({ event }) => event } },
          'breaker.unshared': { actions: { type: 'adoptFleetState', params: ({ event }) => event } },
        },
      },
    },
  });
}

/** The provider machine on docs/errors.md's table. */
export const providerMachine = createProviderMachine(errorPolicy);

/** A running attempt's id in the actor system (it leaves the system when it ends). */
function attemptSystemId(callId: string): string {
  return `attempt.${callId}`;
}

