import { fromCallback, type EventObject } from 'xstate';
import type { ProviderFailure } from '../errors/index.js';
import type { GenerationRequest, ProviderAdapter, ProviderAnswer, ProviderId } from '../providers/index.js';
import type { Secret } from '../security/secret.js';
import { classifyOutcome } from './classify-outcome.js';

export interface CallUpstreamInput {
  readonly providerId: ProviderId;
  readonly callId: string;
  readonly request: GenerationRequest;
  readonly apiKey: Secret;
}

/** What an upstream call reports to its provider actor, exactly once. */
export type UpstreamEvent =
  | { type: 'upstream.succeeded'; callId: string; answer: ProviderAnswer; durationMs: number; at: number }
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
    const caller = new AbortController();
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), options.timeoutMs);
    const startedAt = now();
    let settled = false;

    adapter
      .generate(input.request, input.apiKey.reveal(), AbortSignal.any([caller.signal, deadline.signal]))
      .then(
        (answer) => {
          if (settled) return;
          settled = true;
          const at = now();
          sendBack({
            type: 'upstream.succeeded',
            callId: input.callId,
            answer,
            durationMs: at - startedAt,
            at,
          });
        },
        (error: unknown) => {
          if (settled) return;
          settled = true;
          const at = now();
          const failure = classifyOutcome(
            error,
            { deadlineFired: deadline.signal.aborted, callerAborted: caller.signal.aborted },
            (e) => adapter.classify(e),
            options.timeoutMs,
          );
          sendBack({
            type: 'upstream.failed',
            callId: input.callId,
            failure,
            durationMs: at - startedAt,
            at,
          });
        },
      )
      .finally(() => clearTimeout(timer));

    return () => {
      clearTimeout(timer);
      if (!settled) {
        settled = true;
        caller.abort();
      }
    };
  });
}
