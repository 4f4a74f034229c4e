import type { ProviderFailure } from '../errors/index.js';
import type {
  ApiKey,
  GenerationRequest,
  ProviderAnswer,
  ProviderId,
  UpstreamStreamObserver,
} from '../machines/types.js';

export { providerIds, tasks } from '../machines/types.js';
export type {
  ApiKey,
  
  GenerationRequest,
  ProviderAnswer,
  ProviderId,
  Task,
  TokenUsage,
  UpstreamStreamObserver,
} from '../machines/types.js';

/**
 * One provider's upstream, injected into its provider actor. The adapter decides what an error *is*
 * (`classify`); nothing downstream looks at HTTP statuses or messages again.
 */
export interface ProviderAdapter {
  readonly id: ProviderId;
  readonly model: string;
  /**
   * One upstream generation call with the SDK's own retries off, streamed: `observer.onDelta` gets each
   * text piece as it arrives (the first is the first token), and the promise resolves with the whole
   * answer at the stream's end. Deadlines are the caller's: `signal` aborts on the caller's cancel and
   * on any of the call's deadlines (first token, idle, overall), and the adapter stops reading at once.
   * Rejects with whatever the SDK or the wire raised, mid-stream included. `apiKey` stays a `Secret` up
   * to here: the adapter reveals it only into the upstream request's header.
   */
  generate(
    request: GenerationRequest,
    apiKey: ApiKey,
    signal: AbortSignal,
    observer?: UpstreamStreamObserver,
  ): Promise<ProviderAnswer>;
  /** Pure: an error `generate` rejected with → its docs/errors.md class, message scrubbed of key-like text. */
  classify(error: unknown): ProviderFailure;
}
