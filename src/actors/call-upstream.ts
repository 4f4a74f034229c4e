import { fromCallback, type EventObject } from 'xstate';
import type { ProviderFailure } from '../errors/index.js';
import type { GenerationRequest, ProviderAdapter, ProviderAnswer, ProviderId } from '../providers/index.js';
import type { Validation } from './types.js';
import type { Secret } from '../security/secret.js';
import { classifyOutcome } from './classify-outcome.js';

export interface CallUpstreamInput {
  readonly providerId: ProviderId;
  readonly callId: string;
  readonly request: GenerationRequest;
  readonly apiKey: Secret;
  readonly validate: (answer: ProviderAnswer) => Validation<unknown>;
}

/**
 * The study layer's verdict on an answer; a truncated answer is `invalid_output` whatever it holds.
 * Decided next to the call, so the breaker hears an invalid answer as inconclusive, never as a success.
 */
export function judgeAnswer(
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

/** What an upstream call reports to its provider actor, exactly once. */
export type UpstreamEvent =
  | {
      type: 'upstream.succeeded';
      callId: string;
      answer: ProviderAnswer;
      verdict: Validation<unknown>;
      durationMs: number;
      at: number;
    }
  | { type: 'upstream.failed'; callId: string; failure: ProviderFailure; durationMs: number; at: number };

export interface CallUpstreamOptions {
  readonly adapters: Readonly<Record<ProviderId, ProviderAdapter>>;
  /** Overall deadline of one call, kept apart from the caller's abort (stopping this actor). */
  readonly timeoutMs: number;
  readonly now?: () => number;
}

/**
 * One upstream generation call as a callback actor. Stopping the actor (the caller cancelled)
 * aborts the call; our own deadline aborts it too, and the two are told apart by which fired.
 */
export function createCallUpstream(options: CallUpstreamOptions) {
  const now = options.now ?? Date.now;
  return fromCallback<EventObject, CallUpstreamInput, UpstreamEvent>(({ input, sendBack }) => {
    const adapter = options.adapters[input.providerId];
    // One controller for both reasons to stop; which one fired is kept apart for the classifier.
    const controller = new AbortController();
    let deadlineFired = false;
    let callerAborted = false;
    const timer = setTimeout(() => {
      deadlineFired = true;
      controller.abort();
    }, options.timeoutMs);
    const startedAt = now();
    let settled = false;

    adapter.generate(input.request, input.apiKey.reveal(), controller.signal).then(
      (answer) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        const at = now();
        const verdict = judgeAnswer(answer, input.validate);
        sendBack({
          type: 'upstream.succeeded',
          callId: input.callId,
          answer,
          verdict,
          durationMs: at - startedAt,
          at,
        });
      },
      (error: unknown) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        const at = now();
        const failure = classifyOutcome(
          error,
          { deadlineFired, callerAborted },
          (e) => classifySafely(adapter, e),
          options.timeoutMs,
        );
        sendBack({ type: 'upstream.failed', callId: input.callId, failure, durationMs: at - startedAt, at });
      },
    );

    return () => {
      clearTimeout(timer);
      if (!settled) {
        settled = true;
        callerAborted = true;
        controller.abort();
      }
    };
  });
}

/**
 * A classifier that throws must not take the provider actor down (a crashed actor would leave every
 * waiting request hanging): the failure is then read as a provider-side `server_error`.
 */
function classifySafely(adapter: ProviderAdapter, error: unknown): ProviderFailure {
  try {
    return adapter.classify(error);
  } catch {
    return {
      errorClass: 'server_error',
      message: 'The provider failed in a way that could not be classified.',
    };
  }
}
