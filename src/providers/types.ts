import type { ProviderFailure } from '../errors/index.js';

/** The three providers a user can pick, by their API ids. */
export const providerIds = ['claude', 'gpt', 'timelygpt'] as const;
export type ProviderId = (typeof providerIds)[number];

export const tasks = ['notes', 'mcq', 'fill'] as const;
export type Task = (typeof tasks)[number];

export interface ChatMessage {
  readonly role: 'user' | 'assistant';
  readonly content: string;
}

/** One provider-neutral generation request; adapters translate it to their wire format. */
export interface GenerationRequest {
  readonly task: Task;
  readonly system: string;
  readonly messages: readonly ChatMessage[];
  /** JSON schema (from the task's zod schema) the answer must follow; its name is the task. */
  readonly jsonSchema: Readonly<Record<string, unknown>>;
  readonly maxOutputTokens: number;
}

export interface TokenUsage {
  readonly inputTokens: number | null;
  readonly outputTokens: number | null;
}

/** What a provider answered, before the study-material validation reads it. */
export interface ProviderAnswer {
  readonly text: string;
  /** The model that actually answered, as the provider reported it. */
  readonly model: string;
  readonly usage: TokenUsage;
  /** The answer was cut off (`stop_reason: max_tokens`, `finish_reason: length`). */
  readonly truncated: boolean;
}

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
   * Rejects with whatever the SDK or the wire raised.
   */
  generate(request: GenerationRequest, apiKey: string, signal: AbortSignal): Promise<ProviderAnswer>;
  /** Pure: an error `generate` rejected with → its ERRORS.md class, message scrubbed of key-like text. */
  classify(error: unknown): ProviderFailure;
}
