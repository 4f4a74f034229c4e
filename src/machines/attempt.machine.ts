import { assign, enqueueActions, fromPromise, sendTo, setup, type AnyActorRef } from 'xstate';
import {
  countedClassGuard,
  errorPolicy,
  ownClasses,
  type ErrorClass,
  type ErrorTable,
  type ProviderFailure,
} from '../errors/index.js';
import type { BreakerAnswer, BreakerEvent, BreakerStatus } from './breaker.machine.js';
import type { CallRequest, CallTicket } from './call-request.js';
import type { FleetLinkEvent, ProbeLeased } from './fleet-link.js';
import type { KeyBookEvent } from './key-book.machine.js';
import type { KeyAnswer, KeySkipReason } from './key-health.machine.js';
import type { CallRecord, ProviderAnswer, ProviderId, Validation } from './types.js';

/** PROVIDER_TIMEOUT_MS's default: the whole call, from going out to the last byte. */
export const defaultDeadlineMs = 60_000;
/** FIRST_TOKEN_TIMEOUT_MS's default: from going out to the first piece of the answer. */
export const defaultFirstTokenTimeoutMs = 30_000;
/** STREAM_IDLE_TIMEOUT_MS's default: the longest silence between two pieces of a streamed answer. */
export const defaultStreamIdleTimeoutMs = 20_000;

/** The call's three clocks, in ms (the `deadline`, `firstTokenTimeout` and `streamIdleTimeout` delays). */
export interface CallTimings {
  readonly deadlineMs: number;
  readonly firstTokenTimeoutMs: number;
  readonly streamIdleTimeoutMs: number;
}

/**
 * What the provider actor gives each attempt it spawns (id = the call id): the call as asked, the
 * provider's settings, and the actors the attempt asks on its way (the provider's own children).
 */
export interface AttemptInput {
  readonly providerId: ProviderId;
  /** The provider actor that spawned it: it hears `attempt.ended`, then stops the attempt. */
  readonly owner: AnyActorRef;
  /** The call as its caller asked it: carried, never copied. */
  readonly call: CallRequest;
  readonly timings: CallTimings;
  /** The provider's key book: asked first whether the caller's key lets the call out. */
  readonly keyBook: AnyActorRef;
  /** The provider's breaker: asked next, and told the outcome. */
  readonly breaker: AnyActorRef;
  /** The provider's link to the fleet store: the probe lease, and every outcome the breaker hears. */
  readonly fleetLink: AnyActorRef;
}

/** What the `upstream` actor (the adapter's call) is given; it sends the answer's text to `call` as `upstream.delta`. */
export interface UpstreamInput {
  readonly providerId: ProviderId;
  readonly request: CallRequest['request'];
  readonly apiKey: CallRequest['apiKey'];
  /** The attempt, which hears each piece as `upstream.delta`. */
  readonly call: AnyActorRef;
  /** The call's overall deadline (ms from its start): a stream is never paced past what it allows. */
  readonly deadlineMs: number;
}

/**
 * The `upstream` actor's contract: it resolves with the provider's answer or rejects with the failure
 * already classified (`ProviderFailure`, the adapter's `classify`); a stream's pieces go to
 * `input.call` as `upstream.delta` events. XState aborts `signal` when the attempt leaves `calling`
 * (its deadline, a timeout of its stream, or its caller's cancel). It resolves with the answer and when it
 * came (epoch ms).
 */
export interface UpstreamAnswer {
  readonly answer: ProviderAnswer;
  readonly at: number;
}

/** What the `upstream` actor rejects with: the classified failure and when it came (epoch ms). */
export class UpstreamFailure extends Error {
  constructor(
    readonly failure: ProviderFailure,
    readonly at: number,
  ) {
    super(failure.message);
    this.name = 'UpstreamFailure';
  }
}

/** The answer's next text (`at`: epoch ms), joining the `pieces` (the SDK's stream chunks) of one turn of the event loop. */
export type UpstreamDelta = { type: 'upstream.delta'; text: string; pieces: number; at: number };

/** The caller went away (client gone, job cancelled): forwarded by the provider actor. */
export type AttemptCancelled = { type: 'call.cancelled'; at: number };

/** Everything an attempt hears: the answers to its questions, its stream, its caller's cancel. */
export type AttemptEvent =
  | KeyAnswer
  | BreakerAnswer
  | BreakerStatus
  | ProbeLeased
  | UpstreamDelta
  | AttemptCancelled;

/** The call's streaming figures (Attempt.streamed), or null when it did not stream. */
export type Streamed = { chunks: number; firstTokenMs: number } | null;

/** What an attempt answers the caller of `call.requested`, exactly once per call. */
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
      /**
       * The breaker refuses the next call (it may have opened on this very failure), as it answered the
       * attempt right after hearing the failure; absent: it admits. A retry then need not wait its backoff.
       */
      breakerRefusing?: true;
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

/**
 * What an attempt tells its provider actor as it ends, once: the provider stops it and counts the
 * record (null: withdrawn before anything happened, nothing to count).
 */
export type AttemptEnded = { type: 'attempt.ended'; callId: string; record: CallRecord | null };

export interface AttemptContext {
  readonly input: AttemptInput;
  /** The fleet granted this call the probe lease: the breaker is asked again as a leased probe. */
  readonly leased: boolean;
  /** Pieces of a streamed answer so far (0: nothing streamed yet, or the adapter does not stream). */
  readonly chunks: number;
  /** Ms from the call's start to the first piece; null until one arrives. */
  readonly firstTokenMs: number | null;
  /** Epoch ms of the last piece (the idle clock runs from it). */
  readonly lastDeltaAt: number;
  /**
   * The pieces so far, joined: what a failure mid-stream leaves written (`partialText`). Bounded by the
   * adapters' answer ceiling (src/providers/streamed-text.ts).
   */
  readonly text: string;
  /** The failure being reported, kept while the breaker answers whether it still admits; null before. */
  readonly failure: { readonly failure: ProviderFailure; readonly at: number } | null;
}

/**
 * The study layer's verdict on an answer; a truncated answer is `invalid_output` whatever it holds.
 * Judged next to the call, so the breaker hears an invalid answer as inconclusive, never as a success.
 */
function judgeAnswer(
  answer: ProviderAnswer,
  validate: (answer: ProviderAnswer) => Validation<unknown>,
): Validation<unknown> {
  if (answer.truncated) {
    return {
      ok: false,
      errors: ['The answer was cut off (max tokens reached) before the JSON was complete.'],
    };
  }
  try {
    return validate(answer);
  } catch (error) {
    return {
      ok: false,
      errors: [`The answer could not be read: ${error instanceof Error ? error.message : 'unknown error'}`],
    };
  }
}

/**
 * What an `upstream` actor rejected with: a classified failure and its time, or (a bug in the runtime)
 * anything else, read as a provider-side `server_error` at the call's start.
 */
function failureOf(error: unknown, context: AttemptContext): { failure: ProviderFailure; at: number } {
  if (error instanceof UpstreamFailure) return { failure: error.failure, at: error.at };
  return {
    failure: { errorClass: 'server_error', message: 'The provider failed in a way that could not be classified.' },
    at: context.input.call.at,
  };
}

function streamedOf(context: AttemptContext): Streamed {
  return context.firstTokenMs === null ? null : { chunks: context.chunks, firstTokenMs: context.firstTokenMs };
}

function durationOf(context: AttemptContext, at: number): number {
  return Math.max(0, at - context.input.call.at);
}

/** Why a clock ended a call, in the `timeout` failure's message. */
const timeoutMessages = {
  deadline: (ms: number) => `The provider did not answer within ${ms} ms.`,
  firstToken: (ms: number) => `The provider sent nothing within ${ms} ms.`,
  streamIdle: (ms: number) => `The provider's answer stalled for ${ms} ms.`,
} as const;

/** One of the call's clocks ran out `at`: a `timeout` failure (counted), saying which clock in its message. */
function timedOutBy(message: string, at: number): { failure: ProviderFailure; at: number } {
  return { failure: { errorClass: ownClasses.deadlineFired, message }, at };
}

/**
 * A call's outcome as its three listeners hear it, in this order: the breaker (`result`), the fleet link
 * (the same result, for the fleet's copy of the breaker) and the key's health (`key`).
 */
function outcomeReports(input: AttemptInput, result: BreakerEvent, key: KeyBookEvent): readonly (readonly [AnyActorRef, BreakerEvent | FleetLinkEvent | KeyBookEvent])[] {
  return [
    [input.breaker, result],
    [input.fleetLink, { type: 'fleet.report', event: result } satisfies FleetLinkEvent],
    [input.keyBook, key],
  ];
}

/** A refused lease's retry time: when the holder's probe ends by, never before the answer's time. */
function probeRetryAt(event: ProbeLeased): number {
  return Math.max(event.at, event.probeEndsBy ?? event.at);
}

/**
 * One call's whole path, a child actor of its provider actor (id = the call id) from the caller's
 * request to its one reply: the caller's key is asked (`checkingKey`), then the breaker (`admitting`);
 * a shared breaker that recovers needs the fleet's probe lease first (`awaitingProbeLease`, then the
 * breaker is asked again as a leased probe). An admitted call goes out (`calling`: the adapter's call
 * runs as the invoked `upstream` actor, `awaitingFirstToken` until a piece arrives, then `streaming`)
 * until the first of its answer, its failure, one of its clocks (the overall `deadline`, the
 * `firstTokenTimeout`, the `streamIdleTimeout` re-armed by each piece) or its caller's cancel. Every
 * outcome is told to the breaker (column B of `table` decides: only a provider-side class is a counted
 * failure), the fleet and the key's health; a failure then waits for the breaker to say whether it
 * still admits (`reporting`), which its caller reads to retry at once into a refusal rather than after
 * a backoff. The caller hears exactly one reply; the provider hears `attempt.ended` with the record and
 * stops the attempt. Every step is a question by message and a state: no actor's snapshot is read.
 */
export function createAttemptMachine(table: ErrorTable) {
  const isCounted = countedClassGuard(table);
  /** The breaker's event for a call that ended in `errorClass`: a FAILURE exactly when column B says so. */
  const breakerResult = (ticket: CallTicket, errorClass: ErrorClass, at: number): BreakerEvent =>
    isCounted(errorClass)
      ? { type: 'call.failed', callId: ticket.callId, errorClass, keyId: ticket.keyId, origin: ticket.origin, at }
      : { type: 'call.ignored', callId: ticket.callId, errorClass, at };
  /** The failure a clock's end makes, for the `after` transitions. */
  const timedOut = (clock: keyof typeof timeoutMessages) => ({
    type: 'reportFailure' as const,
    params: ({ context }: { context: AttemptContext }) => {
      const { timings, call } = context.input;
      if (clock === 'deadline') return timedOutBy(timeoutMessages.deadline(timings.deadlineMs), call.at + timings.deadlineMs);
      if (clock === 'firstToken')
        return timedOutBy(timeoutMessages.firstToken(timings.firstTokenTimeoutMs), call.at + timings.firstTokenTimeoutMs);
      return timedOutBy(timeoutMessages.streamIdle(timings.streamIdleTimeoutMs), context.lastDeltaAt + timings.streamIdleTimeoutMs);
    },
  });
  /** The caller hears the failure; `breakerRefusing` is the breaker's answer to `breaker.status`. */
  const replyFailed = (breakerRefusing: boolean) => ({ type: 'replyFailed' as const, params: { breakerRefusing } });
  return setup({
    types: {} as {
      input: AttemptInput;
      context: AttemptContext;
      events: AttemptEvent;
    },
    actors: {
      /** Replaced (`.provide`) by the gateway with the adapters' calls (src/actors/upstream.ts). */
      upstream: fromPromise<UpstreamAnswer, UpstreamInput>(() =>
        Promise.reject(new Error('No upstream adapter was provided')),
      ),
    },
    guards: {
      /** The fleet granted this call the probe lease. */
      isLeaseGranted: ({ event }) => event.type === 'probe.leased' && event.granted,
    },
    actions: {
      /** May the caller's key make this call? (The key's actor, or the book, answers `key.*`.) */
      askKeyBook: sendTo(
        ({ context }) => context.input.keyBook,
        ({ context, self }): KeyBookEvent => ({
          type: 'key.admit',
          keyId: context.input.call.keyId,
          call: context.input.call,
          replyTo: self,
          at: context.input.call.at,
        }),
      ),
      /** May this call go out? (The breaker alone decides, and answers `breaker.*`.) */
      askBreaker: sendTo(
        ({ context }) => context.input.breaker,
        ({ context, self }): BreakerEvent => ({
          type: 'breaker.admit',
          call: context.input.call,
          replyTo: self,
          leased: context.leased,
          at: context.input.call.at,
        }),
      ),
      /** Shared and recovering: ask the fleet for this window's one probe lease. */
      askForLease: sendTo(
        ({ context }) => context.input.fleetLink,
        ({ context, self }): FleetLinkEvent => ({
          type: 'probe.requested',
          callId: context.input.call.callId,
          replyTo: self,
          at: context.input.call.at,
        }),
      ),
      markLeased: assign({ leased: true }),
      /** A lease granted to this withdrawn call goes back to the fleet: its probe is over, not counted. */
      freeLease: sendTo(
        ({ context }) => context.input.fleetLink,
        ({ context }, params: { at: number }): FleetLinkEvent => ({
          type: 'fleet.report',
          event: { type: 'call.ignored', callId: context.input.call.callId, errorClass: ownClasses.callerAborted, at: params.at },
        }),
      ),
      /** The call goes out: the key's health hears its start (the call may be the key's probe). */
      tellKeyCalled: sendTo(
        ({ context }) => context.input.keyBook,
        ({ context }): KeyBookEvent => ({
          type: 'key.called',
          keyId: context.input.call.keyId,
          callId: context.input.call.callId,
          at: context.input.call.at,
        }),
      ),
      /** The first piece of the answer: when it came (from `at`: the machine reads no clock). */
      markFirstToken: assign({
        chunks: ({ event }) => (event.type === 'upstream.delta' ? event.pieces : 0),
        text: ({ event }) => (event.type === 'upstream.delta' ? event.text : ''),
        firstTokenMs: ({ context, event }) => (event.type === 'upstream.delta' ? durationOf(context, event.at) : null),
        lastDeltaAt: ({ context, event }) => (event.type === 'upstream.delta' ? event.at : context.lastDeltaAt),
      }),
      countChunk: assign({
        chunks: ({ context, event }) => context.chunks + (event.type === 'upstream.delta' ? event.pieces : 0),
        text: ({ context, event }) => (event.type === 'upstream.delta' ? context.text + event.text : context.text),
        lastDeltaAt: ({ context, event }) => (event.type === 'upstream.delta' ? event.at : context.lastDeltaAt),
      }),
      /** The piece goes on to whoever asked to see it (GenerateInput.onDelta); nothing else hears it. */
      relayDelta: ({ context, event }) => {
        if (event.type === 'upstream.delta') context.input.call.onDelta?.(context.input.providerId, event.text);
      },
      /**
       * The answer came: judged once, here (the verdict travels with the reply); the breaker hears a
       * success for a valid answer and `invalid_output` (column B) for an invalid one; the key worked
       * either way; the caller hears the answer; the provider, the record.
       */
      reportAnswer: enqueueActions(({ context, enqueue }, params: UpstreamAnswer) => {
        const { input } = context;
        const { call } = input;
        const verdict = judgeAnswer(params.answer, call.validate);
        const durationMs = durationOf(context, params.at);
        const result: BreakerEvent = verdict.ok
          ? { type: 'call.succeeded', callId: call.callId, at: params.at }
          : breakerResult(call, ownClasses.invalidOutput, params.at);
        for (const [to, message] of outcomeReports(input, result, { type: 'key.answered', keyId: call.keyId, callId: call.callId, at: params.at }))
          enqueue.sendTo(to, message);
        enqueue.sendTo(call.replyTo, {
          type: 'provider.succeeded',
          callId: call.callId,
          providerId: input.providerId,
          answer: params.answer,
          verdict,
          durationMs,
          streamed: streamedOf(context),
          at: params.at,
        } satisfies ProviderReply);
        const record: CallRecord = verdict.ok
          ? { provider: input.providerId, outcome: 'succeeded', durationMs, usage: params.answer.usage }
          : {
              provider: input.providerId,
              outcome: 'failed',
              errorClass: ownClasses.invalidOutput,
              durationMs,
              usage: params.answer.usage,
            };
        enqueue.sendTo(input.owner, { type: 'attempt.ended', callId: call.callId, record } satisfies AttemptEnded);
      }),
      /**
       * The call failed (or a clock ran out): the breaker (column B), the fleet and the key's health hear
       * it, and the breaker is asked whether it still admits; the failure is kept for the reply.
       */
      reportFailure: enqueueActions(({ context, enqueue, self }, params: { failure: ProviderFailure; at: number }) => {
        const { input } = context;
        const { call } = input;
        const result = breakerResult(call, params.failure.errorClass, params.at);
        enqueue.assign({ failure: params });
        const keyFailed: KeyBookEvent = {
          type: 'key.failed',
          keyId: call.keyId,
          callId: call.callId,
          errorClass: params.failure.errorClass,
          ...(params.failure.retryAfterMs === undefined ? {} : { retryAfterMs: params.failure.retryAfterMs }),
          at: params.at,
        };
        for (const [to, message] of outcomeReports(input, result, keyFailed)) enqueue.sendTo(to, message);
        enqueue.sendTo(input.breaker, { type: 'breaker.status', replyTo: self, at: params.at } satisfies BreakerEvent);
      }),
      /** The caller hears the failure kept by `reportFailure`; the provider, the record. */
      replyFailed: enqueueActions(({ context, enqueue }, params: { breakerRefusing: boolean }) => {
        const { input, failure: kept } = context;
        if (kept === null) throw new Error('An attempt replied a failure it never had');
        const { call } = input;
        const { failure, at } = kept;
        const durationMs = durationOf(context, at);
        enqueue.sendTo(call.replyTo, {
          type: 'provider.failed',
          callId: call.callId,
          providerId: input.providerId,
          failure,
          countedByBreaker: isCounted(failure.errorClass),
          durationMs,
          streamed: streamedOf(context),
          ...(context.text === '' ? {} : { partialText: context.text }),
          ...(params.breakerRefusing ? { breakerRefusing: true as const } : {}),
          at,
        } satisfies ProviderReply);
        enqueue.sendTo(input.owner, {
          type: 'attempt.ended',
          callId: call.callId,
          record: { provider: input.providerId, outcome: 'failed', errorClass: failure.errorClass, durationMs },
        } satisfies AttemptEnded);
      }),
      /** The caller went away while the call was in flight: `aborted`, which never counts, told to all. */
      reportCancelled: enqueueActions(({ context, enqueue }, params: { at: number }) => {
        const { input } = context;
        const { call } = input;
        const result = breakerResult(call, ownClasses.callerAborted, params.at);
        const keyFailed: KeyBookEvent = { type: 'key.failed', keyId: call.keyId, callId: call.callId, errorClass: ownClasses.callerAborted, at: params.at };
        for (const [to, message] of outcomeReports(input, result, keyFailed)) enqueue.sendTo(to, message);
        enqueue.sendTo(input.owner, {
          type: 'attempt.ended',
          callId: call.callId,
          record: {
            provider: input.providerId,
            outcome: 'aborted',
            errorClass: ownClasses.callerAborted,
            durationMs: durationOf(context, params.at),
          },
        } satisfies AttemptEnded);
      }),
      /** The breaker (or the fleet's probe lease) does not admit the call: refused, with when to try again. */
      replyRejected: enqueueActions(({ context, enqueue }, params: { retryAt: number | null; at: number }) => {
        const { input } = context;
        const { call } = input;
        enqueue.sendTo(call.replyTo, {
          type: 'provider.rejected',
          callId: call.callId,
          providerId: input.providerId,
          retryAt: params.retryAt,
          at: params.at,
        } satisfies ProviderReply);
        enqueue.sendTo(input.owner, {
          type: 'attempt.ended',
          callId: call.callId,
          record: { provider: input.providerId, outcome: 'rejected', errorClass: ownClasses.breakerRefused, durationMs: 0 },
        } satisfies AttemptEnded);
      }),
      /** The caller's key is refused: skipped at once, with the key's reason, class and `until`. */
      replySkipped: enqueueActions(({ context, enqueue }, params: Extract<KeyAnswer, { type: 'key.refused' }>) => {
        const { input } = context;
        const { call } = input;
        enqueue.sendTo(call.replyTo, {
          type: 'provider.keySkipped',
          callId: call.callId,
          providerId: input.providerId,
          reason: params.reason,
          errorClass: params.errorClass,
          until: params.until,
          at: call.at,
        } satisfies ProviderReply);
        enqueue.sendTo(input.owner, {
          type: 'attempt.ended',
          callId: call.callId,
          record: { provider: input.providerId, outcome: 'skipped', errorClass: params.errorClass, durationMs: 0 },
        } satisfies AttemptEnded);
      }),
      /** Cancelled before the call went out: nothing happened to count; the provider stops the attempt. */
      endWithdrawn: sendTo(
        ({ context }) => context.input.owner,
        ({ context }): AttemptEnded => ({ type: 'attempt.ended', callId: context.input.call.callId, record: null }),
      ),
    },
    delays: {
      deadline: ({ context }) => context.input.timings.deadlineMs,
      firstTokenTimeout: ({ context }) => context.input.timings.firstTokenTimeoutMs,
      streamIdleTimeout: ({ context }) => context.input.timings.streamIdleTimeoutMs,
    },
  }).createMachine({
    id: 'attempt',
    context: ({ input }) => ({
      input,
      leased: false,
      chunks: 0,
      firstTokenMs: null,
      lastDeltaAt: input.call.at,
      text: '',
      failure: null,
    }),
    initial: 'checkingKey',
    states: {
      /** The caller's key is asked first: a quarantined or cooling key is skipped before the breaker is asked. */
      checkingKey: {
        entry: 'askKeyBook',
        on: {
          'key.admitted': 'admitting',
          'key.refused': { target: 'skipped', actions: { type: 'replySkipped', params: ({ event }) => event } },
          'call.cancelled': { target: 'withdrawn', actions: 'endWithdrawn' },
        },
      },
      /** The breaker decides: closed admits, open refuses until `retryAt`, half-open admits one probe. */
      admitting: {
        entry: 'askBreaker',
        on: {
          'breaker.admitted': { target: 'calling', actions: 'tellKeyCalled' },
          'breaker.rejected': {
            target: 'rejected',
            actions: {
              type: 'replyRejected',
              params: ({ context, event }) => ({ retryAt: event.retryAt, at: context.input.call.at }),
            },
          },
          'breaker.leaseNeeded': 'awaitingProbeLease',
          'call.cancelled': { target: 'withdrawn', actions: 'endWithdrawn' },
        },
      },
      /**
       * Shared with a fleet and recovering: one probe per window for the whole fleet. Granted, the breaker
       * is asked again as a leased probe; refused (another instance probes), the call is refused, to try
       * again when that probe ends at the latest. Cancelled meanwhile, it waits for the answer all the same.
       */
      awaitingProbeLease: {
        entry: 'askForLease',
        on: {
          'probe.leased': [
            { guard: 'isLeaseGranted', target: 'admitting', actions: 'markLeased' },
            {
              target: 'rejected',
              actions: { type: 'replyRejected', params: ({ event }) => ({ retryAt: probeRetryAt(event), at: event.at }) },
            },
          ],
          'call.cancelled': 'withdrawingProbe',
        },
      },
      /**
       * Cancelled while the fleet was asked for the probe lease: a lease granted now would hold the fleet's
       * one probe of the window for a call that never goes out, so it is freed at once (reported to the
       * fleet as an aborted call, which no breaker counts). A fleet that does not answer within the call's
       * deadline has nothing to free.
       */
      withdrawingProbe: {
        after: { deadline: { target: 'withdrawn', actions: 'endWithdrawn' } },
        on: {
          'probe.leased': [
            { guard: 'isLeaseGranted', target: 'withdrawn', actions: [{ type: 'freeLease', params: ({ event }) => ({ at: event.at }) }, 'endWithdrawn'] },
            { target: 'withdrawn', actions: 'endWithdrawn' },
          ],
        },
      },
      /**
       * The adapter's call runs; the first of its answer, its failure, a clock or a cancel ends it.
       * Leaving this state stops the `upstream` actor, and XState aborts the signal it handed the adapter.
       */
      calling: {
        invoke: {
          id: 'upstream',
          src: 'upstream',
          input: ({ context, self }) => ({
            providerId: context.input.providerId,
            request: context.input.call.request,
            apiKey: context.input.call.apiKey,
            call: self,
            deadlineMs: context.input.timings.deadlineMs,
          }),
          onDone: { target: 'done', actions: { type: 'reportAnswer', params: ({ event }) => event.output } },
          onError: {
            target: 'reporting',
            actions: { type: 'reportFailure', params: ({ context, event }) => failureOf(event.error, context) },
          },
        },
        after: { deadline: { target: 'reporting', actions: timedOut('deadline') } },
        on: {
          'call.cancelled': {
            target: 'aborted',
            actions: { type: 'reportCancelled', params: ({ event }) => ({ at: event.at }) },
          },
        },
        initial: 'awaitingFirstToken',
        states: {
          /** Nothing has arrived yet (an adapter that does not stream answers from here). */
          awaitingFirstToken: {
            after: { firstTokenTimeout: { target: '#attempt.reporting', actions: timedOut('firstToken') } },
            on: { 'upstream.delta': { target: 'streaming', actions: ['markFirstToken', 'relayDelta'] } },
          },
          /** Pieces are arriving; each one re-arms the idle clock (re-entering the state). */
          streaming: {
            after: { streamIdleTimeout: { target: '#attempt.reporting', actions: timedOut('streamIdle') } },
            on: {
              'upstream.delta': { target: 'streaming', reenter: true, actions: ['countChunk', 'relayDelta'] },
            },
          },
        },
      },
      /**
       * The failure was told to the breaker, the fleet and the key; the breaker answers whether it still
       * admits, and the caller hears the failure with that answer.
       */
      reporting: {
        on: {
          'breaker.admitting': { target: 'failed', actions: replyFailed(false) },
          'breaker.refusing': { target: 'failed', actions: replyFailed(true) },
        },
      },
      /*
       * The ends are tagged `over`, not `type: 'final'`: the provider stops an attempt as soon as it hears
       * `attempt.ended`. A final state would also send the provider XState's `xstate.done.actor.<call id>`,
       * an event type new with every call, and XState keeps each state node's transition candidates per
       * event type for the life of the process: the heap would grow with every request
       * (scripts/heap-growth.ts measures it, docs/performance.md).
       */
      /** The provider answered (valid or not: the verdict travels with the reply). */
      done: { tags: ['over'] },
      /** The call failed, or one of its clocks ran out (a `timeout` failure, which counts). */
      failed: { tags: ['over'] },
      /** The breaker, or the fleet's probe lease, refused the call: it never went out. */
      rejected: { tags: ['over'] },
      /** The caller's key is quarantined or cooling: the call never went out. */
      skipped: { tags: ['over'] },
      /** The caller went away while the call was in flight: `aborted`, counted nowhere. */
      aborted: { tags: ['over'] },
      /** The caller went away before the call went out: nothing to tell anyone. */
      withdrawn: { tags: ['over'] },
    },
  });
}

/** The attempt machine on docs/errors.md's table. */
export const attemptMachine = createAttemptMachine(errorPolicy);

