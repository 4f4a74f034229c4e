import {
  assertEvent,
  and,
  assign,
  emit,
  enqueueActions,
  fromCallback,
  sendTo,
  setup,
  spawnChild,
  type ActorRefFrom,
  type AnyActorRef,
  type EventObject,
} from 'xstate';
import {
  isCountedErrorClass,
  type CountedErrorClass,
  type IgnoredErrorClass,
  type ProviderFailure,
} from '../errors/index.js';
import { breakerMachine, type BreakerEvent } from '../machines/breaker.machine.js';
import type { GenerationRequest, ProviderAnswer, ProviderId } from '../providers/index.js';
import type { Secret } from '../security/secret.js';
import type { CallUpstreamInput, UpstreamEvent } from './call-upstream.js';
import type { BreakerAction, CallRecord, ProviderStats, Validation } from './types.js';

export interface ProviderInput {
  readonly providerId: ProviderId;
  readonly model: string;
  readonly threshold: number;
  readonly recoveryMs: number;
}

interface PendingCall {
  readonly replyTo: AnyActorRef;
  readonly startedAt: number;
}

export interface ProviderContext {
  readonly providerId: ProviderId;
  readonly model: string;
  readonly breaker: ActorRefFrom<typeof breakerMachine>;
  /** Calls in flight, by call id: who asked, so the answer goes back to them. */
  readonly pending: Readonly<Record<string, PendingCall>>;
  readonly stats: ProviderStats;
}

/** Requests the provider actor serves. */
export type ProviderRequestEvent =
  | {
      type: 'call.requested';
      callId: string;
      request: GenerationRequest;
      apiKey: Secret;
      replyTo: AnyActorRef;
      validate: (answer: ProviderAnswer) => Validation<unknown>;
      at: number;
    }
  | { type: 'call.cancelled'; callId: string; at: number }
  | { type: 'breaker.control'; action: BreakerAction; at: number };

export type ProviderEvent = ProviderRequestEvent | UpstreamEvent;

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
    }
  | {
      type: 'provider.failed';
      callId: string;
      providerId: ProviderId;
      failure: ProviderFailure;
      countedByBreaker: boolean;
      durationMs: number;
    }
  | { type: 'provider.rejected'; callId: string; providerId: ProviderId; retryAt: number | null };

export type ProviderEmitted = { type: 'call.finished'; record: CallRecord };

const emptyStats: ProviderStats = { calls: 0, successes: 0, failures: 0, ignored: 0, rejected: 0, opens: 0 };

const breakerEventFor = {
  reset: 'breaker.reset',
  forceOpen: 'breaker.forceOpen',
  release: 'breaker.release',
} as const;

/**
 * One provider: it spawns its breaker and serves call requests. A call is admitted only while the
 * breaker says so; each outcome is classified and told to the breaker as a typed event, where only a
 * provider-side class can be a counted failure.
 */
export const providerMachine = setup({
  types: {
    input: {} as ProviderInput,
    context: {} as ProviderContext,
    events: {} as ProviderEvent,
    emitted: {} as ProviderEmitted,
    children: {} as { breaker: 'breaker' },
  },
  actors: {
    breaker: breakerMachine,
    /** Replaced per deployment (`.provide`) by `createCallUpstream` with the real adapters. */
    callUpstream: fromCallback<EventObject, CallUpstreamInput, UpstreamEvent>(() => undefined),
  },
  guards: {
    /** The breaker admits this call: closed, or half-open with its probe slot free. */
    isBreakerAdmitting: ({ context }) => context.breaker.getSnapshot().hasTag('admitting'),
    /** The event answers a call still waiting for it (not cancelled). */
    isPendingCall: ({ context, event }) => 'callId' in event && event.callId in context.pending,
    /** The study layer accepted the answer (validated next to the call). */
    isAnswerValid: ({ event }) => event.type === 'upstream.succeeded' && event.verdict.ok,
    /** The failure is the provider's, so it counts toward the breaker (ERRORS.md column B). */
    isCountedFailure: ({ event }) =>
      event.type === 'upstream.failed' && isCountedErrorClass(event.failure.errorClass),
  },
  actions: {
    notifyBreaker: sendTo(
      ({ context }) => context.breaker,
      (_, params: BreakerEvent) => params,
    ),
    reply: sendTo(
      (_, params: { to: AnyActorRef; reply: ProviderReply }) => params.to,
      (_, params: { to: AnyActorRef; reply: ProviderReply }) => params.reply,
    ),
    trackCall: assign({
      pending: ({ context }, params: { callId: string; call: PendingCall }) => ({
        ...context.pending,
        [params.callId]: params.call,
      }),
    }),
    countStat: assign({
      stats: ({ context }, params: { stat: keyof ProviderStats }) => ({
        ...context.stats,
        [params.stat]: context.stats[params.stat] + 1,
      }),
    }),
    recordCall: emit((_, params: CallRecord) => ({ type: 'call.finished' as const, record: params })),
    replyAnswered: enqueueActions(
      ({ context, enqueue }, params: { event: Extract<UpstreamEvent, { type: 'upstream.succeeded' }> }) => {
        const { event } = params;
        enqueue.sendTo(pendingCall(context, event.callId).replyTo, {
          type: 'provider.succeeded',
          callId: event.callId,
          providerId: context.providerId,
          answer: event.answer,
          verdict: event.verdict,
          durationMs: event.durationMs,
        } satisfies ProviderReply);
        enqueue.emit({
          type: 'call.finished',
          record: {
            provider: context.providerId,
            outcome: event.verdict.ok ? 'succeeded' : 'failed',
            ...(event.verdict.ok ? {} : { errorClass: 'invalid_output' as const }),
            durationMs: event.durationMs,
            usage: event.answer.usage,
          },
        });
      },
    ),
    replyFailed: enqueueActions(
      (
        { context, enqueue },
        params: { callId: string; failure: ProviderFailure; counted: boolean; durationMs: number },
      ) => {
        enqueue.sendTo(pendingCall(context, params.callId).replyTo, {
          type: 'provider.failed',
          callId: params.callId,
          providerId: context.providerId,
          failure: params.failure,
          countedByBreaker: params.counted,
          durationMs: params.durationMs,
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
    /** The call's child actor is done: stop it and forget the call. */
    finishCall: enqueueActions(({ context, enqueue }, params: { callId: string }) => {
      enqueue.stopChild(params.callId);
      const { [params.callId]: _finished, ...pending } = context.pending;
      enqueue.assign({ pending });
    }),
  },
}).createMachine({
  id: 'provider',
  context: ({ input, spawn }) => ({
    providerId: input.providerId,
    model: input.model,
    breaker: spawn('breaker', {
      id: 'breaker',
      systemId: `breaker.${input.providerId}`,
      input: { providerId: input.providerId, threshold: input.threshold, recoveryMs: input.recoveryMs },
    }),
    pending: {},
    stats: emptyStats,
  }),
  initial: 'serving',
  on: {
    'breaker.control': {
      actions: {
        type: 'notifyBreaker',
        params: ({ event }) => ({ type: breakerEventFor[event.action], at: event.at }),
      },
    },
  },
  states: {
    /** Always serving: calls run concurrently as children; the breaker decides each admission. */
    serving: {
      on: {
        'call.requested': [
          {
            guard: 'isBreakerAdmitting',
            actions: [
              {
                type: 'notifyBreaker',
                params: ({ event }) => ({ type: 'call.started', callId: event.callId, at: event.at }),
              },
              {
                type: 'trackCall',
                params: ({ event }) => ({
                  callId: event.callId,
                  call: { replyTo: event.replyTo, startedAt: event.at },
                }),
              },
              { type: 'countStat', params: { stat: 'calls' } },
              spawnChild('callUpstream', {
                id: ({ event }) => event.callId,
                input: ({ context, event }) => {
                  assertEvent(event, 'call.requested');
                  return {
                    providerId: context.providerId,
                    callId: event.callId,
                    request: event.request,
                    apiKey: event.apiKey,
                    validate: event.validate,
                  };
                },
              }),
            ],
          },
          {
            actions: [
              {
                type: 'reply',
                params: ({ context, event }) => ({
                  to: event.replyTo,
                  reply: {
                    type: 'provider.rejected',
                    callId: event.callId,
                    providerId: context.providerId,
                    retryAt: context.breaker.getSnapshot().context.retryAt,
                  },
                }),
              },
              { type: 'countStat', params: { stat: 'rejected' } },
              {
                type: 'recordCall',
                params: ({ context }) => ({
                  provider: context.providerId,
                  outcome: 'rejected',
                  errorClass: 'circuit_open',
                  durationMs: 0,
                }),
              },
            ],
          },
        ],
        'upstream.succeeded': [
          {
            guard: and(['isPendingCall', 'isAnswerValid']),
            actions: [
              {
                type: 'notifyBreaker',
                params: ({ event }) => ({ type: 'call.succeeded', callId: event.callId, at: event.at }),
              },
              { type: 'replyAnswered', params: ({ event }) => ({ event }) },
              { type: 'countStat', params: { stat: 'successes' } },
              { type: 'finishCall', params: ({ event }) => ({ callId: event.callId }) },
            ],
          },
          {
            /** An answer that fails validation proves nothing about the provider: `invalid_output` never counts. */
            guard: 'isPendingCall',
            actions: [
              {
                type: 'notifyBreaker',
                params: ({ event }) => ({
                  type: 'call.ignored',
                  callId: event.callId,
                  errorClass: 'invalid_output',
                  at: event.at,
                }),
              },
              { type: 'replyAnswered', params: ({ event }) => ({ event }) },
              { type: 'countStat', params: { stat: 'ignored' } },
              { type: 'finishCall', params: ({ event }) => ({ callId: event.callId }) },
            ],
          },
        ],
        'upstream.failed': [
          {
            guard: and(['isPendingCall', 'isCountedFailure']),
            actions: [
              {
                type: 'notifyBreaker',
                // isCountedFailure admitted only the provider-side classes of ERRORS.md column B.
                params: ({ event }) => ({
                  type: 'call.failed',
                  callId: event.callId,
                  errorClass: event.failure.errorClass as CountedErrorClass,
                  at: event.at,
                }),
              },
              {
                type: 'replyFailed',
                params: ({ event }) => ({
                  callId: event.callId,
                  failure: event.failure,
                  counted: true,
                  durationMs: event.durationMs,
                }),
              },
              { type: 'countStat', params: { stat: 'failures' } },
              { type: 'finishCall', params: ({ event }) => ({ callId: event.callId }) },
            ],
          },
          {
            guard: 'isPendingCall',
            actions: [
              {
                type: 'notifyBreaker',
                params: ({ event }) => ({
                  type: 'call.ignored',
                  callId: event.callId,
                  errorClass: event.failure.errorClass as IgnoredErrorClass,
                  at: event.at,
                }),
              },
              {
                type: 'replyFailed',
                params: ({ event }) => ({
                  callId: event.callId,
                  failure: event.failure,
                  counted: false,
                  durationMs: event.durationMs,
                }),
              },
              { type: 'countStat', params: { stat: 'ignored' } },
              { type: 'finishCall', params: ({ event }) => ({ callId: event.callId }) },
            ],
          },
        ],
        /** The caller went away: abort the call; the breaker hears `aborted`, which never counts. */
        'call.cancelled': {
          guard: 'isPendingCall',
          actions: [
            {
              type: 'notifyBreaker',
              params: ({ event }) => ({
                type: 'call.ignored',
                callId: event.callId,
                errorClass: 'aborted',
                at: event.at,
              }),
            },
            { type: 'countStat', params: { stat: 'ignored' } },
            { type: 'finishCall', params: ({ event }) => ({ callId: event.callId }) },
          ],
        },
      },
    },
  },
});

function pendingCall(context: ProviderContext, callId: string): PendingCall {
  const call = context.pending[callId];
  if (call === undefined) throw new Error(`No pending call ${callId}`);
  return call;
}

export type ProviderMachine = typeof providerMachine;
