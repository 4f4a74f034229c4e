import { fromPromise } from 'xstate';
import type { ProviderFailure } from '../errors/index.js';
import {
  streamObserver,
  UpstreamFailure,
  type UpstreamAnswer,
  type UpstreamInput,
} from '../machines/call.machine.js';
import type { ProviderAdapter, ProviderId } from '../providers/index.js';

/**
 * The call machine's `upstream` actor (src/machines/call.machine.ts): the adapter's call as a promise
 * actor. XState hands it the `signal` it aborts when the call leaves `calling` (a clock ran out, or the
 * caller cancelled), so the SDK call is aborted by the actor's own stop. It resolves with the answer
 * and its time, or rejects with the failure as the adapter classified it (`UpstreamFailure`); a stream's
 * pieces go to the call actor as `upstream.delta`.
 */
export function createUpstreamLogic(
  adapters: Readonly<Record<ProviderId, ProviderAdapter>>,
  now: () => number = Date.now,
) {
  return fromPromise<UpstreamAnswer, UpstreamInput>(({ input, signal }) => {
    const adapter = adapters[input.providerId];
    return adapter.generate(input.request, input.apiKey, signal, streamObserver(input.call, now)).then(
      (answer) => ({ answer, at: now() }),
      (error: unknown) => {
        throw new UpstreamFailure(classifySafely(adapter, error), now());
      },
    );
  });
}

/**
 * A classifier that throws must not take the call down unreported: the failure is then read as a
 * provider-side `server_error`.
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
