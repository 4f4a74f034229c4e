import { assign, fromPromise, sendParent, setup, type AnyActorRef } from 'xstate';
import { ownClasses, type ProviderFailure } from '../errors/index.js';
import type { CallTicket } from './call-request.js';
import type {
  ApiKey,
  GenerationRequest,
  ProviderAnswer,
  ProviderId,
  Validation,
} from './types.js';

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

/** What the provider actor gives the call it admitted (spawned as its child `call`, id = the call id). */
export interface CallInput extends CallTicket {
  readonly providerId: ProviderId;
  readonly request: GenerationRequest;
  readonly apiKey: ApiKey;
  readonly validate: (answer: ProviderAnswer) => Validation<unknown>;
  /** Each piece of a streamed answer, handed on as it arrives (GenerateInput.onDelta); absent: none wanted. */
  readonly onDelta?: ((provider: ProviderId, text: string) => void) | undefined;
  /** Epoch ms when the call went out (its durations count from it). */
  readonly startedAt: number;
  readonly timings: CallTimings;
}

/** What the `upstream` actor (the adapter's call) is given; it sends the answer's text to `call` as `upstream.delta`. */
export interface UpstreamInput {
  readonly providerId: ProviderId;
  readonly request: GenerationRequest;
  readonly apiKey: ApiKey;
  /** The call actor, which hears each piece as `upstream.delta`. */
  readonly call: AnyActorRef;
  /** The call's overall deadline (ms from its start): a stream is never paced past what it allows. */
  readonly deadlineMs: number;
}

/**
 * The `upstream` actor's contract: it resolves with the provider's answer or rejects with the failure
 * already classified (`ProviderFailure`, the adapter's `classify`); a stream's pieces go to
 * `input.call` as `upstream.delta` events. XState aborts `signal` when the call leaves `calling`
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

/**
 * What the adapter's stream sends the call: the answer's next text (`at`: epoch ms), joining the `pieces`
 * (the SDK's stream chunks) that arrived in one turn of the event loop.
 */
export type CallEvent =
  | { type: 'upstream.delta'; text: string; pieces: number; at: number }
  | { type: 'call.cancelled'; at: number };

/**
 * What a call reports to its provider actor, exactly once (the first of its answer, its failure, a
 * timeout of one of its clocks — a `timeout` failure — or its caller's cancel), with its ticket.
 */
export type UpstreamEvent =
  | (CallTicket & {
      type: 'upstream.succeeded';
      answer: ProviderAnswer;
      verdict: Validation<unknown>;
      durationMs: number;
      streamed: { chunks: number; firstTokenMs: number } | null;
      at: number;
    })
  | (CallTicket & {
      type: 'upstream.failed';
      failure: ProviderFailure;
      durationMs: number;
      streamed: { chunks: number; firstTokenMs: number } | null;
      /** The answer's text written before the failure (a failure mid-stream), for the next call to continue. */
      partialText?: string;
      at: number;
    })
  /** The caller cancelled while the call was in flight: aborted, counted nowhere. */
  | (CallTicket & { type: 'upstream.cancelled'; durationMs: number; at: number });

export interface CallContext {
  readonly input: CallInput;
  /** Pieces of a streamed answer so far (0: nothing streamed yet, or the adapter does not stream). */
  readonly chunks: number;
  /** Ms from going out to the first piece; null until one arrives. */
  readonly firstTokenMs: number | null;
  /** Epoch ms of the last piece (the idle clock runs from it). */
  readonly lastDeltaAt: number;
  /**
   * The pieces so far, joined: what a failure mid-stream leaves written (`partialText`). Bounded by the
   * adapters' answer ceiling (src/providers/streamed-text.ts).
   */
  readonly text: string;
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
function failureOf(error: unknown, context: CallContext): { failure: ProviderFailure; at: number } {
  if (error instanceof UpstreamFailure) return { failure: error.failure, at: error.at };
  return {
    failure: { errorClass: 'server_error', message: 'The provider failed in a way that could not be classified.' },
    at: context.input.startedAt,
  };
}

function streamedOf(context: CallContext): { chunks: number; firstTokenMs: number } | null {
  return context.firstTokenMs === null ? null : { chunks: context.chunks, firstTokenMs: context.firstTokenMs };
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
 * The life of one upstream call, a child actor of its provider actor from the moment the breaker admits
 * it: `calling` (the adapter's call runs as the invoked `upstream` actor) until the first of its answer
 * (`answered`), its failure (`failed`), one of its clocks (`timedOut`: the overall `deadline`, the
 * `firstTokenTimeout` before the first piece, or the `streamIdleTimeout` between two pieces, re-armed by
 * each) or its caller's cancel (`aborted`). That first one alone is reported to the parent; leaving
 * `calling` stops the `upstream` actor, and XState aborts the signal it handed the adapter. A timeout is
 * the provider's failure (it counts, docs/errors.md), a cancel is nobody's: which fired is the state
 * reached, not a flag. All three clocks are named delays on the actor's clock (a `SimulatedClock` drives
 * them). `calling` is `waitingFirstToken` until a piece arrives, then `streaming`; an adapter that does
 * not stream answers from `waitingFirstToken`.
 */
export const callMachine = setup({
  types: {
    input: {} as CallInput,
    context: {} as CallContext,
    events: {} as CallEvent,
  },
  actors: {
    /** Replaced (`.provide`) by the gateway with the adapters' calls (src/actors/upstream.ts). */
    upstream: fromPromise<UpstreamAnswer, UpstreamInput>(() =>
      Promise.reject(new Error('No upstream adapter was provided')),
    ),
  },
  actions: {
    /** The first piece of the answer: when it came (from `at`: the machine reads no clock). */
    markFirstToken: assign({
      chunks: ({ event }) => (event.type === 'upstream.delta' ? event.pieces : 0),
      text: ({ event }) => (event.type === 'upstream.delta' ? event.text : ''),
      firstTokenMs: ({ context, event }) =>
        event.type === 'upstream.delta' ? Math.max(0, event.at - context.input.startedAt) : null,
      lastDeltaAt: ({ context, event }) => (event.type === 'upstream.delta' ? event.at : context.lastDeltaAt),
    }),
    countChunk: assign({
      chunks: ({ context, event }) => context.chunks + (event.type === 'upstream.delta' ? event.pieces : 0),
      text: ({ context, event }) => (event.type === 'upstream.delta' ? context.text + event.text : context.text),
      lastDeltaAt: ({ context, event }) => (event.type === 'upstream.delta' ? event.at : context.lastDeltaAt),
    }),
    /** The piece goes on to whoever asked to see it (GenerateInput.onDelta); nothing else hears it. */
    relayDelta: ({ context, event }) => {
      if (event.type === 'upstream.delta') context.input.onDelta?.(context.input.providerId, event.text);
    },
    reportAnswer: sendParent(({ context }, params: UpstreamAnswer): UpstreamEvent => {
      const { input } = context;
      return {
        type: 'upstream.succeeded',
        callId: input.callId,
        replyTo: input.replyTo,
        keyId: input.keyId,
        origin: input.origin,
        answer: params.answer,
        verdict: judgeAnswer(params.answer, input.validate),
        durationMs: Math.max(0, params.at - input.startedAt),
        streamed: streamedOf(context),
        at: params.at,
      };
    }),
    reportFailure: sendParent(({ context }, params: { failure: ProviderFailure; at: number }): UpstreamEvent => {
      const { input } = context;
      return {
        type: 'upstream.failed',
        callId: input.callId,
        replyTo: input.replyTo,
        keyId: input.keyId,
        origin: input.origin,
        failure: params.failure,
        durationMs: Math.max(0, params.at - input.startedAt),
        streamed: streamedOf(context),
        ...(context.text === '' ? {} : { partialText: context.text }),
        at: params.at,
      };
    }),
    reportCancelled: sendParent(({ context, event }): UpstreamEvent => {
      const { input } = context;
      const at = event.type === 'call.cancelled' ? event.at : input.startedAt;
      return {
        type: 'upstream.cancelled',
        callId: input.callId,
        replyTo: input.replyTo,
        keyId: input.keyId,
        origin: input.origin,
        durationMs: Math.max(0, at - input.startedAt),
        at,
      };
    }),
  },
  delays: {
    deadline: ({ context }) => context.input.timings.deadlineMs,
    firstTokenTimeout: ({ context }) => context.input.timings.firstTokenTimeoutMs,
    streamIdleTimeout: ({ context }) => context.input.timings.streamIdleTimeoutMs,
  },
}).createMachine({
  id: 'call',
  context: ({ input }) => ({ input, chunks: 0, firstTokenMs: null, lastDeltaAt: input.startedAt, text: '' }),
  initial: 'calling',
  states: {
    /** The adapter's call runs; the first of its answer, its failure, a clock or a cancel ends it. */
    calling: {
      invoke: {
        id: 'upstream',
        src: 'upstream',
        input: ({ context, self }) => ({
          providerId: context.input.providerId,
          request: context.input.request,
          apiKey: context.input.apiKey,
          call: self,
          deadlineMs: context.input.timings.deadlineMs,
        }),
        onDone: {
          target: 'answered',
          actions: { type: 'reportAnswer', params: ({ event }) => event.output },
        },
        onError: {
          target: 'failed',
          actions: { type: 'reportFailure', params: ({ context, event }) => failureOf(event.error, context) },
        },
      },
      after: {
        deadline: {
          target: 'timedOut',
          actions: {
            type: 'reportFailure',
            params: ({ context }) =>
              timedOutBy(
                timeoutMessages.deadline(context.input.timings.deadlineMs),
                context.input.startedAt + context.input.timings.deadlineMs,
              ),
          },
        },
      },
      on: { 'call.cancelled': { target: 'aborted', actions: 'reportCancelled' } },
      initial: 'waitingFirstToken',
      states: {
        /** Nothing has arrived yet (an adapter that does not stream answers from here). */
        waitingFirstToken: {
          after: {
            firstTokenTimeout: {
              target: '#call.timedOut',
              actions: {
                type: 'reportFailure',
                params: ({ context }) =>
                  timedOutBy(
                    timeoutMessages.firstToken(context.input.timings.firstTokenTimeoutMs),
                    context.input.startedAt + context.input.timings.firstTokenTimeoutMs,
                  ),
              },
            },
          },
          on: { 'upstream.delta': { target: 'streaming', actions: ['markFirstToken', 'relayDelta'] } },
        },
        /** Pieces are arriving; each one re-arms the idle clock (re-entering the state). */
        streaming: {
          after: {
            streamIdleTimeout: {
              target: '#call.timedOut',
              actions: {
                type: 'reportFailure',
                params: ({ context }) =>
                  timedOutBy(
                    timeoutMessages.streamIdle(context.input.timings.streamIdleTimeoutMs),
                    context.lastDeltaAt + context.input.timings.streamIdleTimeoutMs,
                  ),
              },
            },
          },
          on: {
            'upstream.delta': { target: 'streaming', reenter: true, actions: ['countChunk', 'relayDelta'] },
          },
        },
      },
    },
    /*
     * The four ends are tagged `over`, not `type: 'final'`: the provider stops a call as soon as it hears
     * its report. A final state would also send the provider XState's `xstate.done.actor.<call id>`, an
     * event type new with every call, and XState keeps each state node's transition candidates per event
     * type for the life of the process: the heap would grow with every request
     * (scripts/heap-growth.ts measures it, docs/performance.md).
     */
    /** The provider answered first (its verdict travels with the report). */
    answered: { tags: ['over'] },
    /** The adapter's call failed first, with a classified failure. */
    failed: { tags: ['over'] },
    /** One of the call's clocks ran out first: reported as a `timeout` failure, which counts. */
    timedOut: { tags: ['over'] },
    /** The caller went away first: reported as `upstream.cancelled` (class `aborted`, counted nowhere). */
    aborted: { tags: ['over'] },
  },
});

export type CallMachine = typeof callMachine;
;
