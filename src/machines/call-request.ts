import type { AnyActorRef } from 'xstate';
import type { ApiKey, GenerationRequest, ProviderAnswer, ProviderId, Validation } from './types.js';

/**
 * What a call carries through its life: its attempt (a child actor of the provider actor) holds it, so
 * the outcome knows whom to answer and which key and origin the call came with.
 */
export interface CallTicket {
  readonly callId: string;
  /** Who asked: the outcome goes back to them. */
  readonly replyTo: AnyActorRef;
  /**
   * The caller key's salted fingerprint (the same on every instance of a fleet): the call's result is
   * told to that key's health, and the breaker's quorum counts distinct ones when no origin is known.
   */
  readonly keyId: string;
  /**
   * The caller's network address as an opaque salted id (GenerateInput.origin); the breaker's quorum
   * counts distinct origins when calls carry one, so one address inventing keys opens nothing.
   */
  readonly origin?: string | undefined;
}

/** A call asked of a provider actor (`call.requested` without its type): carried, never copied. */
export interface CallRequest extends CallTicket {
  readonly request: GenerationRequest;
  readonly apiKey: ApiKey;
  readonly validate: (answer: ProviderAnswer) => Validation<unknown>;
  /** Each piece of a streamed answer, as it arrives (GenerateInput.onDelta). */
  readonly onDelta?: ((provider: ProviderId, text: string) => void) | undefined;
  /** Epoch ms when it was asked. */
  readonly at: number;
}
