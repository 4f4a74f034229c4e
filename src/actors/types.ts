import type { ErrorClass } from '../errors/index.js';
import type { GenerationRequest, ProviderAnswer, ProviderId, Task, TokenUsage } from '../providers/index.js';

/** API.md "Attempt": one upstream generation call, or one provider skipped. */
export interface Attempt {
  readonly provider: ProviderId;
  readonly model: string;
  readonly outcome: 'succeeded' | 'failed' | 'skipped';
  readonly errorClass?: ErrorClass;
  readonly httpStatus?: number;
  readonly reason?: 'circuit_open';
  readonly countedByBreaker: boolean;
  /** Calls to the same provider before this one within the request (re-asks included). */
  readonly retry: number;
  readonly durationMs: number;
  readonly task?: Task;
  /** Scrubbed upstream message, for people reading the attempt table. */
  readonly message?: string;
}

export type FallbackPolicy = 'retry-then-fallback' | 'fallback-first';
export const fallbackPolicies = ['retry-then-fallback', 'fallback-first'] as const;

/** What the study layer says of an answer: the typed value, or why it is `invalid_output`. */
export type Validation<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly errors: readonly string[] };

export interface ChainLink {
  readonly provider: ProviderId;
  /** The user's key: held in memory for the request only; never logged or stored. */
  readonly apiKey: string;
}

export interface GenerateInput<T> {
  readonly request: GenerationRequest;
  readonly validate: (answer: ProviderAnswer) => Validation<T>;
  /** Ordered providers that have a key. */
  readonly chain: readonly ChainLink[];
  readonly policy?: FallbackPolicy;
  /** Caller abort (client gone, job cancelled): stops the run, aborts the in-flight call, counts nowhere. */
  readonly signal?: AbortSignal;
  /** Called as each attempt is recorded (jobs stream them over SSE). */
  readonly onAttempt?: (attempt: Attempt) => void;
}

export type GenerateOutcome<T> =
  | {
      readonly status: 'succeeded';
      readonly value: T;
      readonly provider: ProviderId;
      readonly model: string;
      readonly fallback: boolean;
      readonly attempts: readonly Attempt[];
      readonly usage: TokenUsage;
    }
  | {
      readonly status: 'failed';
      /** API.md's "when every provider fails" table. */
      readonly httpStatus: number;
      readonly code: string;
      readonly message: string;
      readonly attempts: readonly Attempt[];
      readonly retryAfterSeconds?: number;
    }
  | { readonly status: 'aborted'; readonly attempts: readonly Attempt[] };

export type BreakerStateName = 'closed' | 'open' | 'halfOpen';

export interface BreakerView {
  readonly state: BreakerStateName;
  readonly consecutiveFailures: number;
  /** ISO 8601, or null when closed. */
  readonly openedAt: string | null;
  readonly retryAt: string | null;
  readonly threshold: number;
  readonly recoveryMs: number;
  /** Held open by an operator until released. */
  readonly forced: boolean;
}

export interface ProviderStats {
  readonly calls: number;
  readonly successes: number;
  readonly failures: number;
  readonly ignored: number;
  readonly rejected: number;
  readonly opens: number;
}

/** API.md `GET /v1/providers` item. */
export interface ProviderStatus {
  readonly id: ProviderId;
  readonly model: string;
  readonly breaker: BreakerView;
  readonly stats: ProviderStats;
}

export type BreakerAction = 'reset' | 'forceOpen' | 'release';

export interface BreakerTransition {
  readonly provider: ProviderId;
  readonly from: BreakerStateName;
  readonly to: BreakerStateName;
  readonly at: number;
}

/**
 * Emitted once per finished upstream call (metrics read these): answered (`succeeded`), failed, refused by
 * the breaker (`rejected`), or abandoned while running because its caller went away (`aborted`).
 */
export interface CallRecord {
  readonly provider: ProviderId;
  readonly outcome: 'succeeded' | 'failed' | 'rejected' | 'aborted';
  readonly errorClass?: ErrorClass;
  readonly durationMs: number;
  readonly usage?: TokenUsage;
}

/** The actor system as the HTTP layer sees it. */
export interface Gateway {
  generate<T>(input: GenerateInput<T>): Promise<GenerateOutcome<T>>;
  providers(): readonly ProviderStatus[];
  provider(id: ProviderId): ProviderStatus;
  controlBreaker(id: ProviderId, action: BreakerAction): ProviderStatus;
  onBreakerTransition(listener: (transition: BreakerTransition) => void): () => void;
  onCall(listener: (record: CallRecord) => void): () => void;
  onFallback(listener: (from: ProviderId, to: ProviderId) => void): () => void;
  stop(): Promise<void>;
}
