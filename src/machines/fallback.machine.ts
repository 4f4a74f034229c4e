import { and, assign, emit, fromPromise, sendTo, setup, type AnyActorRef } from 'xstate';
import {
  countsInTable,
  errorPolicy,
  invalidOutputMessage,
  ownClasses,
  type ErrorClass,
  type ErrorTable,
} from '../errors/index.js';
import { failureVerdict, type FailureVerdict } from './failure-verdict.js';
import type { ProviderReply } from './provider.machine.js';
import type {
  AnswerContinuation,
  ApiKey,
  Attempt,
  CallBudget,
  CallPricing,
  FallbackPolicy,
  GenerationRequest,
  ProviderAnswer,
  ProviderId,
  Validation,
} from './types.js';

/** One provider of the chain, in the user's order. */
export interface FallbackLink {
  readonly provider: ProviderId;
  readonly model: string;
  readonly apiKey: ApiKey;
  /** The key's salted fingerprint, for the provider's per-key health (never the key). */
  readonly keyId: string;
  /** The provider actor that serves calls to this provider. */
  readonly ref: AnyActorRef;
}

export interface FallbackInput {
  readonly runId: string;
  readonly links: readonly FallbackLink[];
  readonly request: GenerationRequest;
  readonly validate: (answer: ProviderAnswer) => Validation<unknown>;
  readonly policy: FallbackPolicy;
  /** Retries of a provider-side failure on the same provider (RETRY_MAX, default 2). */
  readonly retryMax: number;
  /** One delay per retry; the last repeats (RETRY_BACKOFF_MS, default 1000,2000). */
  readonly backoffMs: readonly number[];
  /** Epoch ms when the run starts: its clock until an event brings a later time. */
  readonly startedAt: number;
  /** Each piece of a streamed answer of the call in flight (GenerateInput.onDelta), carried to the call. */
  readonly onDelta?: ((provider: ProviderId, text: string) => void) | undefined;
  /** The caller's salted address id (GenerateInput.origin): the breaker's quorum counts distinct ones. */
  readonly origin?: string | undefined;
  /**
   * How an answer cut mid-stream is continued (GenerateInput.continuation, the study layer's); absent: the
   * output of a call that failed mid-stream is never continued, the next attempt starts over.
   */
  readonly continuation?: AnswerContinuation | undefined;
  /** Prices each answered call's usage (the Attempt's `costUsd`); absent: attempts carry no cost. */
  readonly pricing?: CallPricing | undefined;
  /**
   * The request's or job's spending limit (`options.maxCostUsd`): each call goes out only when its worst case
   * fits (`budgeting`); absent: no limit, and no call waits for a price.
   */
  readonly budget?: CallBudget | undefined;
}

/** Output a failed call left written (it streamed some text, or answered something invalid). */
interface Written {
  /** Who wrote it, and how its call ended (for the reset's reason). */
  readonly provider: ProviderId;
  readonly errorClass: ErrorClass;
  /** Where the answer so far can be continued from (the study layer's cut); absent: it starts over. */
  readonly prefix?: string;
}

interface LastFailure {
  readonly errorClass: ErrorClass;
  /** The caller's key was refused without a call: retrying the same key now would be refused again. */
  readonly keySkipped?: boolean;
  readonly answerText?: string;
  readonly validationErrors?: readonly string[];
  /** The call left output behind: the next attempt continues it (`prefix`) or starts over. */
  readonly written?: Written;
  /**
   * The provider's breaker refused the next call when the failure was told to it (it may have opened on
   * this very failure): a retry goes at once, so the refusal is recorded without a backoff first.
   */
  readonly breakerRefusing?: true;
}

/**
 * The run's state. The input is kept whole under `run` (never copied) and the usage as one object, so
 * the context has 12 fields: V8 copies an object of 20 or more fields, as XState's `assign` does on
 * every update (`Object.assign({}, context, update)`), through its slow dictionary path, many times dearer
 * than below 20 fields (figures in docs/performance.md).
 */
export interface FallbackContext {
  /** The run's input, as given. */
  readonly run: FallbackInput;
  /** Position in `links` of the provider being tried. */
  readonly index: number;
  /** Calls to the current provider so far (re-asks included): the next attempt's `retry`. */
  readonly calls: number;
  /** Backoff retries used on the current provider. */
  readonly retries: number;
  readonly reasked: boolean;
  /** The request sent next: the original, or the re-ask carrying the validation errors. */
  readonly nextRequest: GenerationRequest;
  /**
   * The answer so far that the next call continues (a cut answer's prefix; `nextRequest` is then sent as its
   * continuation request), or null: the next call writes a whole answer.
   */
  readonly continued: string | null;
  /** Every call and skip so far, in order (one per exit from `calling` but an abort: see `currentCallId`). */
  readonly attempts: readonly Attempt[];
  /** `retry-after` hints known so far, in ms: upstream values and times to the next half-open. */
  readonly retryAfterMs: readonly number[];
  readonly lastFailure: LastFailure | null;
  /**
   * Tokens summed over every call that answered before the last (null until one reports a count): a
   * valid answer ends the run, and its tokens are added in the run's output, not here.
   */
  readonly usage: { readonly inputTokens: number | null; readonly outputTokens: number | null };
  /** The run's clock: the time the last event carried, plus the backoff delays waited since. */
  readonly now: number;
}

/** `at`: epoch ms when it happened; time enters the run only through events (and the backoff delays). */
export type FallbackEvent = ProviderReply | { type: 'request.aborted'; at: number };

/** One reply of the provider, as the transition that takes it hands it to its actions (typed `params`). */
type Reply<T extends ProviderReply['type']> = Extract<ProviderReply, { type: T }>;

type FallbackEmitted =
  | { type: 'attempt.recorded'; attempt: Attempt }
  | { type: 'fallback.taken'; from: ProviderId; to: ProviderId }
  /** The next call continues the answer from `prefix` (what was written so far stands, up to there). */
  | { type: 'answer.continued'; provider: ProviderId; prefix: string }
  /** The next call starts the answer over: what was written so far is void. */
  | { type: 'answer.reset'; provider: ProviderId; reason: string };

export type FallbackOutput =
  | {
      status: 'succeeded';
      value: unknown;
      provider: ProviderId;
      model: string;
      fallback: boolean;
      attempts: readonly Attempt[];
      usage: { inputTokens: number | null; outputTokens: number | null };
    }
  | ({ status: 'failed'; attempts: readonly Attempt[] } & FailureVerdict)
  | { status: 'aborted'; attempts: readonly Attempt[] };

type SucceededOutput = Extract<FallbackOutput, { status: 'succeeded' }>;

/**
 * How a run ended: each final state's own `output`, read by the machine's output. The final state
 * reached says it, so no assign records it on the way in (an assign copies the context and the
 * snapshot: the largest allocation of a step, docs/performance.md).
 */
interface Settled {
  readonly status: 'succeeded' | 'failed' | 'aborted';
}

/** A final state's output that carries its own verdict (`overBudget`), not one read from the attempts. */
function isVerdict(output: unknown): output is FailureVerdict {
  return typeof output === 'object' && output !== null && 'code' in output && 'httpStatus' in output;
}

function settledStatus(output: unknown): Settled['status'] {
  const status =
    typeof output === 'object' && output !== null && 'status' in output ? output.status : undefined;
  if (status === 'succeeded' || status === 'failed' || status === 'aborted') return status;
  throw new Error('The fallback run ended outside its final states');
}

/**
 * The id of the run's call in flight (or the next one): the run's id and the call's number. Each stay in
 * `calling` ends in exactly one recorded attempt (an answer, a failure or a skip) unless the run is
 * aborted, which ends it, so the number is the attempts so far plus one: derived, not assigned on each
 * entry to `calling` (an assign copies the context and rebuilds the snapshot, docs/performance.md). The
 * providers' replies carry it, and `isCurrentCall` tells a late reply to a call given up on by it.
 */
export function currentCallId(context: FallbackContext): string {
  return `${context.run.runId}:${context.attempts.length + 1}`;
}

function currentLink(context: FallbackContext): FallbackLink {
  const link = context.run.links[context.index];
  if (link === undefined) throw new Error(`No provider at position ${context.index}`);
  return link;
}

function hasNextProvider(context: FallbackContext): boolean {
  return context.index + 1 < context.run.links.length;
}

/** fallback-first never retries a provider while another one remains: the next provider is tried at once. */
function isSameProviderRetryAllowed(context: FallbackContext): boolean {
  return context.run.policy === 'retry-then-fallback' || !hasNextProvider(context);
}

/** The shortest `Retry-After` hint for a refusal whose breaker is already past `retryAt` (probe in flight). */
const minRetryAfterMs = 1000;

/** RETRY_BACKOFF_MS: the delay before the next retry; the last one repeats. */
function backoffOf(context: FallbackContext): number {
  return context.run.backoffMs[Math.min(context.retries, context.run.backoffMs.length - 1)] ?? 0;
}

/**
 * The context after one more attempt: counted as a call unless skipped, its hint kept, the clock moved.
 * Attempts and updates are written as whole literals: spreading an object just built, followed by more
 * properties (`{ ...attemptBase(context), model }`), takes V8's slow clone path, many times dearer per
 * object than a literal (docs/performance.md).
 */
function appendAttempt(
  context: FallbackContext,
  attempt: Attempt,
  lastFailure: LastFailure | null,
  hint: number | undefined,
  at: number,
): Pick<FallbackContext, 'attempts' | 'calls' | 'lastFailure' | 'retryAfterMs' | 'now'> {
  return {
    attempts: [...context.attempts, attempt],
    calls: attempt.outcome === 'skipped' ? context.calls : context.calls + 1,
    lastFailure,
    retryAfterMs: hint === undefined ? context.retryAfterMs : [...context.retryAfterMs, hint],
    now: Math.max(context.now, at),
  };
}

function addUsage(total: number | null, more: number | null): number | null {
  if (more === null) return total;
  return (total ?? 0) + more;
}

/** The run's tokens with one more answer's added (a count stays null until some answer reports it). */
function withAnswerUsage(usage: FallbackContext['usage'], answer: ProviderAnswer): FallbackContext['usage'] {
  return {
    inputTokens: addUsage(usage.inputTokens, answer.usage.inputTokens),
    outputTokens: addUsage(usage.outputTokens, answer.usage.outputTokens),
  };
}

type SucceededReply = Extract<ProviderReply, { type: 'provider.succeeded' }>;

function withCost(costUsd: number | null): { costUsd?: number } {
  return costUsd === null ? {} : { costUsd };
}

/** A provider passed over without a call: its breaker refused (`circuit_open`), or the caller's key is refused. */
function skippedAttempt(context: FallbackContext, errorClass: ErrorClass, reason: NonNullable<Attempt['reason']>): Attempt {
  const link = currentLink(context);
  return {
    provider: link.provider,
    retry: context.calls,
    task: context.run.request.task,
    model: link.model,
    outcome: 'skipped',
    errorClass,
    reason,
    countedByBreaker: false,
    durationMs: 0,
  };
}

/** The attempt of the call that answered valid material. */
function answeredAttempt(context: FallbackContext, event: SucceededReply): Attempt {
  const costUsd = costOfAnswer(context, event.answer);
  return {
    provider: currentLink(context).provider,
    retry: context.calls,
    task: context.run.request.task,
    model: event.answer.model,
    durationMs: event.durationMs,
    outcome: 'succeeded',
    countedByBreaker: false,
    ...(event.streamed === null ? {} : { streamed: event.streamed }),
    ...(context.continued === null ? {} : { continuation: true as const }),
    ...(costUsd === null ? {} : { costUsd }),
  };
}

/** What an answer cost: its reported usage at the price of the model that answered; null when unknown. */
function costOfAnswer(context: FallbackContext, answer: ProviderAnswer): number | null {
  return context.run.pricing?.costOf(answer.model, answer.usage) ?? null;
}

/**
 * What the call that just ended cost, for the budget: an answer's priced usage (null when it reported none:
 * what was held stays spent); a failure before any output costs nothing, one after some output is unknown
 * (null); a call the breaker or the key's health refused never went out.
 */
function spentByReply(context: FallbackContext, event: FallbackEvent): number | null {
  if (event.type === 'provider.succeeded') return costOfAnswer(context, event.answer);
  if (event.type === 'provider.failed') return event.streamed === null || event.streamed.chunks === 0 ? 0 : null;
  if (event.type === 'request.aborted') return null;
  return 0;
}

/** The message of `BUDGET_EXCEEDED`: what the next call could cost against what the budget leaves. */
function budgetMessage(context: FallbackContext, worstUsd: number | null): string {
  const link = currentLink(context);
  const maxUsd = context.run.budget?.maxUsd ?? 0;
  if (worstUsd === null)
    return `The next call to ${link.provider} (${link.model}) cannot be priced (the model has no price: set MODEL_PRICES), so it was not made within options.maxCostUsd ${maxUsd}.`;
  return `The next call to ${link.provider} (${link.model}) could cost up to $${worstUsd}, which would pass options.maxCostUsd ${maxUsd} with what was already spent; it was not made.`;
}

/**
 * A run that ends on a valid answer, read from the answer itself: the step that takes it to `succeeded`
 * assigns nothing (an assign copies the context and rebuilds the snapshot, docs/performance.md).
 */
function succeededOutput(context: FallbackContext, event: FallbackEvent): SucceededOutput {
  if (event.type !== 'provider.succeeded' || !event.verdict.ok)
    throw new Error('The fallback run succeeded without a valid answer');
  const { answer } = event;
  return {
    status: 'succeeded',
    value: event.verdict.value,
    provider: currentLink(context).provider,
    model: answer.model,
    fallback: context.index > 0,
    attempts: [...context.attempts, answeredAttempt(context, event)],
    usage: withAnswerUsage(context.usage, answer),
  };
}

/** The whole answer so far: `text` written by the call in flight, after the prefix it continued. */
function writtenSoFar(context: FallbackContext, text: string): string {
  const { continued } = context;
  const continuation = context.run.continuation;
  return continued === null || continuation === undefined ? text : continuation.merge(continued, text);
}

/**
 * What a call that failed after streaming `partialText` leaves written: the answer so far and, when the
 * study layer finds a sound cut in it, the prefix the next call continues from. A call that wrote nothing
 * leaves the answer as it was (a continued prefix stays continued).
 */
function writtenBy(context: FallbackContext, errorClass: ErrorClass, partialText: string | undefined): Written | undefined {
  if (partialText === undefined || partialText === '') return undefined;
  const provider = currentLink(context).provider;
  const prefix = context.run.continuation?.pointOf(writtenSoFar(context, partialText));
  return prefix === undefined || prefix === '' ? { provider, errorClass } : { provider, errorClass, prefix };
}

/**
 * The re-ask after `invalid_output`: the model sees its answer and what was wrong with it. An answer that
 * was not kept (the adapter stopped reading it past the call's ceiling) is left out: only what was wrong.
 */
export function withValidationErrors(
  request: GenerationRequest,
  answerText: string,
  errors: readonly string[],
): GenerationRequest {
  return {
    ...request,
    messages: [
      ...request.messages,
      ...(answerText === '' ? [] : [{ role: 'assistant' as const, content: answerText }]),
      {
        role: 'user',
        content: `Your answer failed validation:\n- ${errors.join('\n- ')}\nAnswer again with only the corrected JSON.`,
      },
    ],
  };
}

/** The request the next call sends: `nextRequest`, or its continuation request when an answer is being continued. */
function requestOf(context: FallbackContext): GenerationRequest {
  const { continued } = context;
  const continuation = context.run.continuation;
  if (continued === null || continuation === undefined) return context.nextRequest;
  return continuation.request(context.nextRequest, continued);
}

/** A continuing call's answer is judged as the one answer it makes with the prefix (merged, validated whole). */
function validateOf(context: FallbackContext): FallbackInput['validate'] {
  const { continued } = context;
  const { validate, continuation } = context.run;
  if (continued === null || continuation === undefined) return validate;
  return (answer) => validate({ ...answer, text: continuation.merge(continued, answer.text) });
}

/**
 * The retry-and-fallback run of one generation. Tries the chain in order; a provider whose breaker
 * refuses is skipped at once; retries (after named backoff delays) and the single re-ask follow
 * docs/errors.md's table (`table`, the production `errorPolicy` unless a test injects a flipped row);
 * every call and skip is recorded as an Attempt, in order.
 */
export function createFallbackMachine(table: ErrorTable) {
  return setup({
    types: {
      input: {} as FallbackInput,
      context: {} as FallbackContext,
      events: {} as FallbackEvent,
      emitted: {} as FallbackEmitted,
      output: {} as FallbackOutput,
    },
    actors: {
      /** The worst case of the next call, priced by the budget (it counts the request's tokens off the main thread). */
      worstCase: fromPromise<number | null, { budget: CallBudget; model: string; request: GenerationRequest }>(({ input }) =>
        input.budget.worstCaseOf(input.model, input.request),
      ),
    },
    guards: {
      /** The request or job has a spending limit: each call is priced before it goes out. */
      hasBudget: ({ context }) => context.run.budget !== undefined,
      /** The next call's worst case fits beside what the budget has spent and holds (an unpriced call never does). */
      isWithinBudget: ({ context }, params: { usd: number | null }) => context.run.budget?.allows(params.usd) === true,
      /** The reply belongs to the call in flight, not to one this run already gave up on. */
      isCurrentCall: ({ context, event }) => 'callId' in event && event.callId === currentCallId(context),
      /** The study layer accepted the answer (its verdict, judged next to the call, travels with the reply). */
      isAnswerValid: ({ event }) => event.type === 'provider.succeeded' && event.verdict.ok,
      /** `invalid_output` gets exactly one re-ask with the validation errors. */
      isReaskDue: ({ context }) =>
        context.lastFailure !== null &&
        context.lastFailure.keySkipped !== true &&
        table[context.lastFailure.errorClass].retry === 'once' &&
        !context.reasked &&
        isSameProviderRetryAllowed(context),
      /** A provider-side class, retries left, and the policy lets this provider be retried now. */
      isRetryDue: ({ context }) =>
        context.lastFailure !== null &&
        context.lastFailure.keySkipped !== true &&
        table[context.lastFailure.errorClass].retry === 'yes' &&
        context.retries < context.run.retryMax &&
        isSameProviderRetryAllowed(context),
      /** The provider's breaker said, with the failure, that it refuses calls (it just opened): a backoff would only delay the refusal. */
      isProviderRefusing: ({ context }) => context.lastFailure?.breakerRefusing === true,
      /** The failed call left output with a sound cut: the next call continues from it. */
      hasContinuationPoint: ({ context }) => context.lastFailure?.written?.prefix !== undefined,
      /** The failed call left output that cannot be continued: the next call starts over. */
      hasVoidOutput: ({ context }) => context.lastFailure?.written !== undefined,
      /** The class allows falling back, and a provider remains. */
      canFallBack: ({ context }) =>
        context.lastFailure !== null &&
        table[context.lastFailure.errorClass].fallback &&
        hasNextProvider(context),
    },
    actions: {
      /** The call about to go out holds its worst case in the budget until it ends. */
      holdBudget: ({ context }, params: { usd: number | null }) => {
        if (params.usd !== null) context.run.budget?.hold(currentCallId(context), params.usd);
      },
      /** The call ended: what it held is settled against what it really cost. */
      settleBudget: ({ context, event }) => {
        context.run.budget?.settle(currentCallId(context), spentByReply(context, event));
      },
      sendCallRequest: sendTo(
        ({ context }) => currentLink(context).ref,
        ({ context, self }) => ({
          type: 'call.requested' as const,
          callId: currentCallId(context),
          request: requestOf(context),
          apiKey: currentLink(context).apiKey,
          keyId: currentLink(context).keyId,
          origin: context.run.origin,
          replyTo: self,
          validate: validateOf(context),
          onDelta: context.run.onDelta,
          at: context.now,
        }),
      ),
      cancelCall: sendTo(
        ({ context }) => currentLink(context).ref,
        ({ context, event }) => ({
          type: 'call.cancelled' as const,
          callId: currentCallId(context),
          at: event.type === 'request.aborted' ? event.at : context.now,
        }),
      ),
      /** The breaker refused the call: a skip, with the time to its half-open as a `retry-after` hint. */
      recordSkip: assign(({ context }, event: Reply<'provider.rejected'>) => {
        const attempt = skippedAttempt(context, ownClasses.breakerRefused, ownClasses.breakerRefused);
        // A half-open breaker whose probe is in flight is past `retryAt`: try again in a moment.
        const hint = event.retryAt === null ? undefined : Math.max(minRetryAfterMs, event.retryAt - event.at);
        return appendAttempt(context, attempt, { errorClass: ownClasses.breakerRefused }, hint, event.at);
      }),
      /**
       * The caller's key is quarantined or cooling: a skip with the key's reason and the class that
       * refused it (so docs/api.md's failure table applies unchanged), its `until` as a `retry-after` hint.
       */
      recordKeySkip: assign(({ context }, event: Reply<'provider.keySkipped'>) => {
        const attempt = skippedAttempt(context, event.errorClass, event.reason);
        const lastFailure = { errorClass: event.errorClass, keySkipped: true };
        return appendAttempt(context, attempt, lastFailure, Math.max(0, event.until - event.at), event.at);
      }),
      /** The call failed with a classified failure. */
      recordFailure: assign(({ context }, event: Reply<'provider.failed'>) => {
        const link = currentLink(context);
        const attempt: Attempt = {
          provider: link.provider,
          retry: context.calls,
          task: context.run.request.task,
          model: link.model,
          outcome: 'failed',
          errorClass: event.failure.errorClass,
          ...(event.failure.httpStatus === undefined ? {} : { httpStatus: event.failure.httpStatus }),
          countedByBreaker: event.countedByBreaker,
          durationMs: event.durationMs,
          message: event.failure.message,
          ...(event.streamed === null ? {} : { streamed: event.streamed }),
          ...(context.continued === null ? {} : { continuation: true as const }),
        };
        const written = writtenBy(context, event.failure.errorClass, event.partialText);
        // An answer the adapter stopped reading (past the call's ceiling) is `invalid_output` with its reason.
        const { validationErrors } = event.failure;
        const lastFailure = {
          errorClass: event.failure.errorClass,
          ...(written === undefined ? {} : { written }),
          ...(validationErrors === undefined ? {} : { validationErrors }),
          ...(event.breakerRefusing === true ? { breakerRefusing: true as const } : {}),
        };
        return appendAttempt(context, attempt, lastFailure, event.failure.retryAfterMs, event.at);
      }),
      /**
       * The provider answered material that failed validation: `invalid_output`, with what was wrong (for
       * the re-ask), and the call's tokens counted. One assign for all of it. (A valid answer ends the run
       * and is read by its output: nothing to record.)
       */
      recordInvalidAnswer: assign(({ context }, event: Reply<'provider.succeeded'>) => {
        const { answer, verdict } = event;
        if (verdict.ok) return {};
        const next = appendAttempt(
          context,
          {
            provider: currentLink(context).provider,
            retry: context.calls,
            task: context.run.request.task,
            model: answer.model,
            durationMs: event.durationMs,
            outcome: 'failed',
            errorClass: ownClasses.invalidOutput,
            countedByBreaker: countsInTable(table, ownClasses.invalidOutput),
            message: invalidOutputMessage(verdict.errors),
            ...(event.streamed === null ? {} : { streamed: event.streamed }),
            ...(context.continued === null ? {} : { continuation: true as const }),
            ...withCost(costOfAnswer(context, answer)),
          },
          {
            errorClass: ownClasses.invalidOutput,
            answerText: writtenSoFar(context, answer.text),
            validationErrors: verdict.errors,
            // An invalid answer is never continued: the re-ask or the next provider writes a whole one.
            ...(event.streamed === null && context.continued === null
              ? {}
              : { written: { provider: currentLink(context).provider, errorClass: ownClasses.invalidOutput } }),
          },
          undefined,
          event.at,
        );
        return {
          usage: withAnswerUsage(context.usage, answer),
          attempts: next.attempts,
          calls: next.calls,
          lastFailure: next.lastFailure,
          retryAfterMs: next.retryAfterMs,
          now: next.now,
        };
      }),
      /** The backoff's delay has passed: the clock moved by it (no wall clock read in actions). */
      countRetry: assign(({ context }) => ({
        retries: context.retries + 1,
        now: context.now + backoffOf(context),
      })),
      /** A retry at once, without a backoff (the breaker just refused the provider). */
      countImmediateRetry: assign(({ context }) => ({ retries: context.retries + 1 })),
      announceAttempt: emit(({ context }) => ({
        type: 'attempt.recorded' as const,
        attempt: context.attempts[context.attempts.length - 1] as Attempt,
      })),
      /** The valid answer's attempt, as the run's output records it (nothing was assigned for it). */
      announceAnswer: emit(({ context }, event: Reply<'provider.succeeded'>) => ({
        type: 'attempt.recorded' as const,
        attempt: answeredAttempt(context, event),
      })),
      prepareReask: assign(({ context }) => ({
        reasked: true,
        nextRequest: withValidationErrors(
          context.nextRequest,
          context.lastFailure?.answerText ?? '',
          context.lastFailure?.validationErrors ?? [],
        ),
      })),
      nextProvider: assign(({ context }) => ({
        index: context.index + 1,
        calls: 0,
        retries: 0,
        reasked: false,
        nextRequest: context.run.request,
      })),
      /** The next call continues the answer from the failed call's cut (its request says so, its attempt too). */
      continueAnswer: assign(({ context }) => ({ continued: context.lastFailure?.written?.prefix ?? context.continued })),
      announceContinuation: emit(({ context }) => ({
        type: 'answer.continued' as const,
        provider: currentLink(context).provider,
        prefix: context.continued ?? '',
      })),
      /** The next call writes a whole answer: what was written so far is void. */
      startOver: assign({ continued: null }),
      announceReset: emit(({ context }) => {
        const written = context.lastFailure?.written;
        const provider = written?.provider ?? currentLink(context).provider;
        return {
          type: 'answer.reset' as const,
          provider,
          reason: `${provider} failed (${written?.errorClass ?? 'error'}); the next answer starts over`,
        };
      }),
      announceFallback: emit(({ context }) => ({
        type: 'fallback.taken' as const,
        from: currentLink(context).provider,
        to: (context.run.links[context.index + 1] ?? currentLink(context)).provider,
      })),
    },
    delays: {
      /** RETRY_BACKOFF_MS: one delay per retry, the last repeats. */
      retryBackoff: ({ context }) => backoffOf(context),
    },
  }).createMachine({
    id: 'fallback',
    context: ({ input }) => ({
      run: input,
      index: 0,
      calls: 0,
      retries: 0,
      reasked: false,
      nextRequest: input.request,
      continued: null,
      attempts: [],
      retryAfterMs: [],
      lastFailure: null,
      usage: { inputTokens: null, outputTokens: null },
      now: input.startedAt,
    }),
    initial: 'budgeting',
    states: {
      /** A call is about to go out: with a budget it is priced first, else it goes at once. */
      budgeting: {
        always: [{ guard: 'hasBudget', target: 'pricing' }, { target: 'calling' }],
      },
      /** Pricing the next call's worst case; it goes out only when that fits the budget (docs/api.md "Cost"). */
      pricing: {
        invoke: {
          id: 'worstCase',
          src: 'worstCase',
          input: ({ context }) => ({
            budget: context.run.budget as CallBudget,
            model: currentLink(context).model,
            request: requestOf(context),
          }),
          onDone: [
            {
              guard: { type: 'isWithinBudget', params: ({ event }) => ({ usd: event.output }) },
              target: 'calling',
              actions: { type: 'holdBudget', params: ({ event }) => ({ usd: event.output }) },
            },
            { target: 'overBudget' },
          ],
        },
        on: { 'request.aborted': 'aborted' },
      },
      /** One call is in flight to the current provider (or its breaker is about to refuse it). */
      calling: {
        entry: 'sendCallRequest',
        on: {
          /** The verdict judged next to the call decides between success and `invalid_output`. */
          'provider.succeeded': [
            {
              guard: and(['isCurrentCall', 'isAnswerValid']),
              target: 'succeeded',
              actions: ['settleBudget', { type: 'announceAnswer', params: ({ event }) => event }],
            },
            {
              guard: 'isCurrentCall',
              target: 'deciding',
              actions: ['settleBudget', { type: 'recordInvalidAnswer', params: ({ event }) => event }, 'announceAttempt'],
            },
          ],
          'provider.failed': {
            guard: 'isCurrentCall',
            target: 'deciding',
            actions: ['settleBudget', { type: 'recordFailure', params: ({ event }) => event }, 'announceAttempt'],
          },
          'provider.rejected': {
            guard: 'isCurrentCall',
            target: 'deciding',
            actions: ['settleBudget', { type: 'recordSkip', params: ({ event }) => event }, 'announceAttempt'],
          },
          'provider.keySkipped': {
            guard: 'isCurrentCall',
            target: 'deciding',
            actions: ['settleBudget', { type: 'recordKeySkip', params: ({ event }) => event }, 'announceAttempt'],
          },
          'request.aborted': { target: 'aborted', actions: ['settleBudget', 'cancelCall'] },
        },
      },
      /** After a failure or a skip: re-ask, retry after a backoff, fall back, or give up — the policy table decides. */
      deciding: {
        always: [
          { guard: 'isReaskDue', target: 'resuming', actions: 'prepareReask' },
          /** The breaker just opened: retry at once, so the refusal is recorded as a skip without a wait. */
          {
            guard: and(['isRetryDue', 'isProviderRefusing']),
            target: 'resuming',
            actions: 'countImmediateRetry',
          },
          { guard: 'isRetryDue', target: 'backingOff' },
          { guard: 'canFallBack', target: 'resuming', actions: ['announceFallback', 'nextProvider'] },
          { target: 'failed' },
        ],
      },
      /** Waiting out the named backoff before retrying the same provider; never a sleep. */
      backingOff: {
        after: { retryBackoff: { target: 'resuming', actions: 'countRetry' } },
        on: { 'request.aborted': 'aborted' },
      },
      /**
       * The next attempt (a re-ask, a retry or a fallback) is about to go out after one that left output
       * behind: it continues the answer from the cut the study layer found in it, or starts it over (the
       * output so far is void: `answer.reset`). After a call that wrote nothing, the answer stays as it was.
       */
      resuming: {
        always: [
          { guard: 'hasContinuationPoint', target: 'budgeting', actions: ['continueAnswer', 'announceContinuation'] },
          { guard: 'hasVoidOutput', target: 'budgeting', actions: ['startOver', 'announceReset'] },
          { target: 'budgeting' },
        ],
      },
      /** A provider answered valid material: the output is read from that answer (`succeededOutput`). */
      succeeded: {
        type: 'final',
        output: ({ context, event }): SucceededOutput & Settled => succeededOutput(context, event),
      },
      /** Every provider failed or was skipped; the output carries docs/api.md's status and code. */
      failed: { type: 'final', output: { status: 'failed' } satisfies Settled },
      /**
       * The next call's worst case would take the spent total past the budget (or cannot be priced): it is
       * not made, and the request ends 422 `BUDGET_EXCEEDED` with the attempts so far.
       */
      overBudget: {
        type: 'final',
        output: ({ context, event }): Settled & FailureVerdict => ({
          status: 'failed',
          httpStatus: 422,
          code: 'BUDGET_EXCEEDED',
          message: budgetMessage(context, 'output' in event && (typeof event.output === 'number' || event.output === null) ? event.output : null),
        }),
      },
      /** The caller went away; the in-flight call was cancelled and counts nowhere. */
      aborted: { type: 'final', output: { status: 'aborted' } satisfies Settled },
    },
    /** `event` is the final state's done event, its output the state's (`Settled`, or the whole success). */
    output: ({ context, event }): FallbackOutput => {
      const status = settledStatus(event.output);
      if (status === 'succeeded') return event.output as SucceededOutput;
      if (status === 'aborted') return { status: 'aborted', attempts: context.attempts };
      if (isVerdict(event.output)) return { status: 'failed', attempts: context.attempts, ...event.output };
      return {
        status: 'failed',
        attempts: context.attempts,
        ...failureVerdict(context.attempts, context.retryAfterMs, table),
      };
    },
  });
}

/** The retry-and-fallback machine on docs/errors.md's table. */
export const fallbackMachine = createFallbackMachine(errorPolicy);

