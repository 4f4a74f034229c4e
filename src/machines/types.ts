/**
 * The types the machines speak in. `src/machines` is the bottom layer (it imports only `src/errors`),
 * so the words shared with the layers above — a provider id, a generation request, an answer, an
 * attempt — are defined here and re-exported by `src/providers` and `src/actors`.
 */
import type { ErrorClass } from '../errors/index.js';

/** The three providers a user can pick, by their API ids. */
export const providerIds = ['claude', 'gpt', 'timelygpt'] as const;
export type ProviderId = (typeof providerIds)[number];

export const tasks = ['notes', 'mcq', 'fill'] as const;
export type Task = (typeof tasks)[number];

interface ChatMessage {
  readonly role: 'user' | 'assistant';
  readonly content: string;
}

/** The languages study material is written in (docs/api.md `options.lang`). */
export type RequestLang = 'ko' | 'en';

/** One provider-neutral generation request; adapters translate it to their wire format. */
export interface GenerationRequest {
  readonly task: Task;
  /** The language the answer is written in (TimelyGPT's `locale`); never parsed back out of the prompt. */
  readonly lang: RequestLang;
  readonly system: string;
  readonly messages: readonly ChatMessage[];
  /** JSON schema (from the task's zod schema) the answer must follow; its name is the task. */
  readonly jsonSchema: Readonly<Record<string, unknown>>;
  readonly maxOutputTokens: number;
  /**
   * The longest answer text this call reads (UTF-16 units): the task's own ceiling (the study layer's
   * `maxAnswerChars`, far below a heap). The adapter stops reading the moment the text passes it, and the
   * call fails `invalid_output`; the transport bounds the bytes it reads for the call from it too.
   */
  readonly maxAnswerChars: number;
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
 * Receives an upstream call's answer as it is written: `onDelta` once per text piece, in order, as each
 * arrives (the first is the first token). The pieces joined are the answer's whole text.
 */
export interface UpstreamStreamObserver {
  onDelta(text: string): void;
  /**
   * The call's overall deadline, from its start (ms): the adapters' pace (streamed-text.ts) never holds a
   * stream back so long that the longest answer the call allows could not be read within half of it. A
   * provider that answers fast is read no slower than its deadline allows: the time the pace takes is never
   * the provider's timeout.
   */
  readonly readWithinMs?: number;
}

/**
 * A user's API key as the machines carry it: opaque, revealed only by the adapter's call.
 * `Secret` (src/security) is the one implementation.
 */
export interface ApiKey {
  readonly fingerprint: string;
  reveal(): string;
}

/** docs/api.md "Attempt": one upstream generation call, or one provider skipped. */
export interface Attempt {
  readonly provider: ProviderId;
  readonly model: string;
  readonly outcome: 'succeeded' | 'failed' | 'skipped';
  readonly errorClass?: ErrorClass;
  readonly httpStatus?: number;
  /** Why a provider was skipped: its breaker is open, or the caller's key is quarantined or cooling. */
  readonly reason?: 'circuit_open' | 'key_quarantined' | 'key_cooling';
  readonly countedByBreaker: boolean;
  /** Calls to the same provider before this one within the request (re-asks included). */
  readonly retry: number;
  readonly durationMs: number;
  readonly task?: Task;
  /** Scrubbed upstream message, for people reading the attempt table. */
  readonly message?: string;
  /** Present when the call streamed: how many pieces arrived, and when the first did (ms after the call went out). */
  readonly streamed?: { readonly chunks: number; readonly firstTokenMs: number };
  /** The call continued an answer another call had begun and failed in the middle of (docs/api.md "Streaming"). */
  readonly continuation?: true;
  /**
   * What the call cost in USD: its reported usage at the price of the model that answered (docs/api.md
   * "Cost"). Absent when the call reported no usage or its model has no price.
   */
  readonly costUsd?: number;
}

/**
 * How an answer cut in the middle is continued by the next call (the study layer's, src/study/continuation.ts;
 * the machines only carry it): where the text written so far can be continued from, the request that asks
 * for the rest, and the one answer made of both.
 */
export interface AnswerContinuation {
  /** The text cut back to its last complete element, or undefined when it cannot be continued (start over). */
  pointOf(written: string): string | undefined;
  /** The request asking for the rest of `prefix`. */
  request(request: GenerationRequest, prefix: string): GenerationRequest;
  /** `prefix` and what the continuing call answered, joined into the one answer that is validated. */
  merge(prefix: string, continuation: string): string;
}

export type FallbackPolicy = 'retry-then-fallback' | 'fallback-first';
export const fallbackPolicies = ['retry-then-fallback', 'fallback-first'] as const;

/** What the study layer says of an answer: the typed value, or why it is `invalid_output`. */
export type Validation<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly errors: readonly string[] };

export interface ProviderStats {
  readonly calls: number;
  readonly successes: number;
  readonly failures: number;
  readonly ignored: number;
  readonly rejected: number;
  readonly opens: number;
}

export type BreakerAction = 'reset' | 'forceOpen' | 'release';

/**
 * Emitted once per finished upstream call (metrics read these): answered (`succeeded`), failed, refused by
 * the breaker (`rejected`), skipped because the caller's key is quarantined or cooling (`skipped`, with the
 * class that refused the key), or abandoned while running because its caller went away (`aborted`).
 */
export interface CallRecord {
  readonly provider: ProviderId;
  readonly outcome: 'succeeded' | 'failed' | 'rejected' | 'aborted' | 'skipped';
  readonly errorClass?: ErrorClass;
  readonly durationMs: number;
  readonly usage?: TokenUsage;
}

/** How a generation run ends when no provider answered: docs/api.md's "when every provider fails" table. */
export interface FailedRunOutcome {
  readonly status: 'failed';
  readonly httpStatus: number;
  readonly code: string;
  readonly message: string;
  readonly attempts: readonly Attempt[];
  readonly retryAfterSeconds?: number;
}

/** How a generation run ends when its caller aborted it. */
export interface AbortedRunOutcome {
  readonly status: 'aborted';
  readonly attempts: readonly Attempt[];
}

/** Prices what calls used (the service's price table, injected: the machines hold no prices of their own). */
export interface CallPricing {
  /** USD of `usage` at `model`'s price; null when the model has no price or the call reported no usage. */
  costOf(model: string, usage: TokenUsage): number | null;
}

/**
 * A spending limit shared by every call of one request or job (`options.maxCostUsd`). The fallback run asks
 * it before each call whether the call's worst case still fits (guard `isWithinBudget`), holds that worst
 * case while the call is out, and settles it with what the call really cost when it ends, so parts running
 * side by side can never spend past the limit together.
 */
export interface CallBudget {
  /** The limit, USD. */
  readonly maxUsd: number;
  /** The most `request` can cost at `model`: its input tokens and its max output tokens; null when unpriced. */
  worstCaseOf(model: string, request: GenerationRequest): Promise<number | null>;
  /** Whether a call costing at most `usd` fits beside what is spent and held; an unpriced call (null) never does. */
  allows(usd: number | null): boolean;
  /** Holds `usd` for the call `callId`, about to go out. */
  hold(callId: string, usd: number): void;
  /** The call `callId` ended having cost `usd`; null: unknown (no usage reported), what was held stays spent. */
  settle(callId: string, usd: number | null): void;
}
