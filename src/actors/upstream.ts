import { fromPromise, type AnyActorRef } from 'xstate';
import type { ProviderFailure } from '../errors/index.js';
import {
  UpstreamFailure,
  type UpstreamAnswer,
  type UpstreamDelta,
  type UpstreamInput,
} from '../machines/attempt.machine.js';
import type { UpstreamStreamObserver } from '../machines/types.js';
import type { ProviderAdapter, ProviderId } from '../providers/index.js';

/**
 * The attempt machine's `upstream` actor (src/machines/attempt.machine.ts): the adapter's call as a
 * promise actor. XState hands it the `signal` it aborts when the attempt leaves `calling` (a clock ran
 * out, or the caller cancelled), so the SDK call is aborted by the actor's own stop. It resolves with the answer
 * and its time, or rejects with the failure as the adapter classified it (`UpstreamFailure`); a stream's
 * text goes to the attempt as `upstream.delta` (`turnObserver`).
 */
export function createUpstreamLogic(
  adapters: Readonly<Record<ProviderId, ProviderAdapter>>,
  now: () => number = Date.now,
) {
  return fromPromise<UpstreamAnswer, UpstreamInput>(({ input, signal }) => {
    const adapter = adapters[input.providerId];
    const stream = turnObserver(input.call, signal, now, input.deadlineMs);
    return adapter.generate(input.request, input.apiKey, signal, stream.observer).then(
      (answer) => {
        stream.flush();
        return { answer, at: now() };
      },
      (error: unknown) => {
        stream.flush();
        throw new UpstreamFailure(classifySafely(adapter, error), now());
      },
    );
  });
}

/**
 * The stream's text goes to the attempt once per turn of the event loop: the pieces the SDK parsed
 * from one network read (a provider answering at once sends hundreds in one read) become one
 * `upstream.delta` that says how many it joins, so the call's idle clock is re-armed once per read, not
 * once per token. A real provider's pieces arrive tens of milliseconds apart, one read each: nothing
 * is held back. `flush` hands on what is left before the call's answer or failure is reported, so the
 * call always hears its whole text first; nothing is sent once the call has stopped (`signal`).
 */
function turnObserver(
  call: AnyActorRef,
  signal: AbortSignal,
  now: () => number,
  readWithinMs: number,
): { observer: UpstreamStreamObserver; flush: () => void } {
  let text = '';
  let pieces = 0;
  let scheduled: NodeJS.Immediate | undefined;
  const flush = (): void => {
    if (scheduled !== undefined) clearImmediate(scheduled);
    scheduled = undefined;
    if (pieces === 0 || signal.aborted) return;
    const event: UpstreamDelta = { type: 'upstream.delta', text, pieces, at: now() };
    text = '';
    pieces = 0;
    call.send(event);
  };
  return {
    observer: {
      onDelta: (piece) => {
        text += piece;
        pieces += 1;
        scheduled ??= setImmediate(flush);
      },
      readWithinMs,
    },
    flush,
  };
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
