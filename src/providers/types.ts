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
  ChatMessage,
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
   * One upstream generation call with the SDK's own retries off. `signal` aborts on the caller's
   * cancel and on the provider actor's overall deadline; the actor tells the two apart itself.
   * Rejects with whatever the SDK or the wire raised. `apiKey` stays a `Secret` up to here: the adapter
   * reveals it only into the upstream request's header. `observer`, when given, hears each piece of a
   * streamed answer as it arrives (an adapter that does not stream never calls it).
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
