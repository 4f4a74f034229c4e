import type { ErrorClass } from '../errors/index.js';
import type {
  AbortedRunOutcome,
  AnswerContinuation,
  ApiKey,
  Attempt,
  BreakerAction,
  CallBudget,
  CallRecord,
  FailedRunOutcome,
  FallbackPolicy,
  GenerationRequest,
  ProviderAnswer,
  ProviderId,
  ProviderStats,
  TokenUsage,
  Validation,
} from '../machines/types.js';

export { fallbackPolicies } from '../machines/types.js';
export type {
  
  AnswerContinuation,
  ApiKey,
  Attempt,
  BreakerAction,
  CallRecord,
  
  FallbackPolicy,
  
  Validation,
} from '../machines/types.js';

export interface ChainLink {
  readonly provider: ProviderId;
  /** The user's key, a `Secret` from the header parser on: held for the request only, revealed by the adapter alone. */
  readonly apiKey: ApiKey;
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
  /**
   * Called with each piece of text of the attempt in progress as its provider streams it (several pieces
   * may come in one call when they arrived together); an attempt that fails after some pieces is followed
   * by the next attempt's pieces, so a caller that shows them starts over on each `onAttempt`.
   */
  readonly onDelta?: (provider: ProviderId, text: string) => void;
  /**
   * How an answer cut mid-stream is continued by the next attempt (src/study/continuation.ts); absent: the
   * next attempt always starts over.
   */
  readonly continuation?: AnswerContinuation;
  /** The next attempt continues the answer from `prefix` (the text written so far, up to its last complete element). */
  readonly onContinued?: (provider: ProviderId, prefix: string) => void;
  /** The next attempt starts the answer over: the output streamed so far is void. */
  readonly onReset?: (reset: { readonly provider: ProviderId; readonly reason: string }) => void;
  /**
   * An opaque, already salted id of the client's network address (the HTTP layer's). The breaker's
   * quorum counts distinct origins when calls carry one (distinct key ids otherwise), so one address
   * inventing keys cannot open a provider's breaker for everyone.
   */
  readonly origin?: string;
  /** The request's or job's spending limit (`options.maxCostUsd`): a call whose worst case would pass it is not made. */
  readonly budget?: CallBudget;
}

/** One priced attempt, as the cost metric counts it. */
export interface CallCost {
  readonly provider: ProviderId;
  /** The model that answered. */
  readonly model: string;
  readonly usd: number;
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
  | FailedRunOutcome
  | AbortedRunOutcome;

export type BreakerStateName = 'closed' | 'open' | 'halfOpen';

export interface BreakerView {
  readonly state: BreakerStateName;
  readonly consecutiveFailures: number;
  /** ISO 8601, or null when closed. */
  readonly openedAt: string | null;
  readonly retryAt: string | null;
  readonly threshold: number;
  readonly recoveryMs: number;
  /** BREAKER_MIN_DISTINCT_KEYS: distinct keys a failure streak needs to open the breaker. */
  readonly minDistinctKeys: number;
  /** Distinct keys among the current streak's counted failures (counted up to `minDistinctKeys`; never which). */
  readonly distinctKeys: number;
  /** Held open by an operator until released. */
  readonly forced: boolean;
}

/** docs/api.md `GET /v1/providers` item. */
export interface ProviderStatus {
  readonly id: ProviderId;
  readonly model: string;
  readonly breaker: BreakerView;
  readonly stats: ProviderStats;
  /** How many callers' keys this provider refuses now (counts only: never which keys). */
  readonly keys: { readonly quarantined: number; readonly cooling: number };
}

/** docs/api.md `GET /v1/keys/status` item: the health of the caller's own key for one provider. */
export interface KeyStatus {
  readonly provider: ProviderId;
  readonly state: 'healthy' | 'quarantined' | 'cooling';
  readonly errorClass?: ErrorClass;
  /** Epoch ms until which the key is refused. */
  readonly until?: number;
}

export interface BreakerTransition {
  readonly provider: ProviderId;
  readonly from: BreakerStateName;
  readonly to: BreakerStateName;
  readonly at: number;
}

/** The actor system as the HTTP layer sees it. */
export interface Gateway {
  generate<T>(input: GenerateInput<T>): Promise<GenerateOutcome<T>>;
  providers(): readonly ProviderStatus[];
  provider(id: ProviderId): ProviderStatus;
  /** The health of the caller's key for `id` (looked up by its salted fingerprint; never stored). */
  keyHealth(id: ProviderId, apiKey: ApiKey): KeyStatus;
  controlBreaker(id: ProviderId, action: BreakerAction): ProviderStatus;
  onBreakerTransition(listener: (transition: BreakerTransition) => void): () => void;
  onCall(listener: (record: CallRecord) => void): () => void;
  onFallback(listener: (from: ProviderId, to: ProviderId) => void): () => void;
  /** Each attempt that could be priced, as it is recorded (the cost metric). */
  onCost(listener: (cost: CallCost) => void): () => void;
  stop(): Promise<void>;
}
