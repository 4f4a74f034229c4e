/**
 * The breaker's decision "open now?", apart from its states (cockatiel's split): a strategy reads the
 * failure record the breaker keeps and answers. A rate-based strategy is one more entry here; the
 * machine's states do not change.
 */
interface FailureRecord {
  readonly consecutiveFailures: number;
}

export interface OpenStrategy {
  /** True when the counted failure just recorded (already included in `record`) must open the breaker. */
  shouldOpen(record: FailureRecord, threshold: number): boolean;
}

/** Opens after `threshold` consecutive counted failures (docs/errors.md "Resilience rules"). */
const consecutiveFailures: OpenStrategy = {
  shouldOpen: (record, threshold) => record.consecutiveFailures >= threshold,
};

export const openStrategies = { consecutiveFailures } as const satisfies Record<string, OpenStrategy>;
export type OpenStrategyName = keyof typeof openStrategies;

/**
 * How long the breaker stays open after a failed half-open probe: the next open period from the
 * current one. The first opening (from closed) always lasts `recoveryMs`; a probe success resets it.
 */
export interface OpenPeriodRule {
  /** The open period after a failed probe, given the one that just ended (all in ms). */
  next(currentMs: number, recoveryMs: number, maxRecoveryMs: number): number;
}

/** BREAKER_MAX_RECOVERY_MS when not configured: ten minutes. */
export const defaultMaxRecoveryMs = 600_000;

/**
 * Each failed probe doubles the open period, capped at `maxRecoveryMs` (a cap below `recoveryMs`
 * means no growth: the period stays `recoveryMs`). No jitter: the fleet shares one `retryAt` and
 * one probe lease, so instances never probe together, and the times shown stay exact.
 */
export const doublingOpenPeriod: OpenPeriodRule = {
  next: (currentMs, recoveryMs, maxRecoveryMs) => Math.min(currentMs * 2, Math.max(maxRecoveryMs, recoveryMs)),
};

/**
 * The quorum before a provider is declared down, so that one user's bad key cannot shut it for all: the
 * counted failures of the streak must come from at least `minDistinctKeys` distinct voters: distinct
 * origins (the callers' salted network addresses) when the calls carry them, distinct keys (salted key
 * fingerprints, never keys) otherwise. The breaker keeps at most `minDistinctKeys` ids per streak: all it needs to know is whether the quorum
 * is met. A streak that reaches the threshold with fewer keys is the key's problem, not the provider's.
 */
export interface KeyQuorumRule {
  /**
   * Who a counted failure is a vote of: the caller's origin (an opaque salted id of its network
   * address) when the call carries one, else its key id. So one address inventing keys is one voter.
   */
  voter(keyId: string, origin: string | undefined): string;
  /** The streak's voter ids after a counted failure by `keyId` (a voter): distinct, in order, at most `minDistinctKeys`. */
  withKey(keys: readonly string[], keyId: string, minDistinctKeys: number): readonly string[];
  /** The streak's distinct keys are enough to open the provider-wide breaker. */
  reached(distinctKeys: number, minDistinctKeys: number): boolean;
}

/** The breaker machine's `minDistinctKeys` when its input gives none: 1, the rule off (one key opens). */
export const defaultMinDistinctKeys = 1;

/** What an origin id may look like to vote: an origin that does not fit is no origin, so the call's key votes instead. */
const voterIdPattern = /^[\w.:+/=-]{1,128}$/;

export const distinctKeyQuorum: KeyQuorumRule = {
  voter: (keyId, origin) => (origin === undefined || !voterIdPattern.test(origin) ? keyId : `origin:${origin}`),
  withKey: (keys, keyId, minDistinctKeys) =>
    keys.includes(keyId) || keys.length >= minDistinctKeys ? keys : [...keys, keyId],
  reached: (distinctKeys, minDistinctKeys) => distinctKeys >= minDistinctKeys,
};
