import type { ProviderFailure } from '../errors/index.js';
import type { CallUpstreamInput, UpstreamEvent } from '../machines/provider.machine.js';
import type { ProviderAnswer, Validation } from '../machines/types.js';
import type { ProviderAdapter, ProviderId } from '../providers/index.js';
import { classifyOutcome } from './classify-outcome.js';

export type { CallUpstreamInput, UpstreamEvent } from '../machines/provider.machine.js';

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

export interface CallUpstreamOptions {
  readonly adapters: Readonly<Record<ProviderId, ProviderAdapter>>;
  /** Overall deadline of one call, kept apart from the caller's abort. */
  readonly timeoutMs: number;
  readonly now?: () => number;
}

/** The upstream calls of the provider actors: started and aborted by their actions, reported back as events. */
export interface UpstreamCalls {
  /** Starts one call; `report` receives its one `upstream.*` event, unless the call was aborted first. */
  start(input: CallUpstreamInput, report: (event: UpstreamEvent) => void): void;
  /** The caller cancelled (or the call is done): abort it if it still runs; it then reports nothing. */
  abort(callId: string): void;
  /** Calls still running (bounded by the calls in flight). */
  readonly size: number;
}

/**
 * The upstream calls as plain promises owned by the provider actors' `startUpstream` / `abortUpstream`
 * actions (a spawned actor per call cost ~70 µs of bookkeeping per call, see docs/benchmarks.md).
 * Each call has one AbortController, aborted by our deadline or by the caller's cancel; a flag says
 * which fired, so a timeout (counts) and a cancel (never counts) stay apart.
 */
export function createUpstreamCalls(options: CallUpstreamOptions): UpstreamCalls {
  const now = options.now ?? Date.now;
  const running = new Map<string, { readonly cancel: () => void }>();
  return {
    start(input, report) {
      const adapter = options.adapters[input.providerId];
      const controller = new AbortController();
      let deadlineFired = false;
      let callerAborted = false;
      const timer = setTimeout(() => {
        deadlineFired = true;
        controller.abort();
      }, options.timeoutMs);
      const startedAt = now();
      running.set(input.callId, {
        cancel: () => {
          callerAborted = true;
          clearTimeout(timer);
          controller.abort();
        },
      });
      const settle = (): boolean => {
        clearTimeout(timer);
        // An aborted call reports nothing: its caller is gone and the provider actor already moved on.
        return running.delete(input.callId) && !callerAborted;
      };
      adapter.generate(input.request, input.apiKey, controller.signal).then(
        (answer) => {
          if (!settle()) return;
          const at = now();
          const verdict = judgeAnswer(answer, input.validate);
          report({
            type: 'upstream.succeeded',
            callId: input.callId,
            answer,
            verdict,
            durationMs: at - startedAt,
            at,
          });
        },
        (error: unknown) => {
          if (!settle()) return;
          const at = now();
          const failure = classifyOutcome(
            error,
            { deadlineFired, callerAborted },
            (e) => classifySafely(adapter, e),
            options.timeoutMs,
          );
          report({ type: 'upstream.failed', callId: input.callId, failure, durationMs: at - startedAt, at });
        },
      );
    },
    abort(callId) {
      const call = running.get(callId);
      if (call === undefined) return;
      running.delete(callId);
      call.cancel();
    },
    get size() {
      return running.size;
    },
  };
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
