/**
 * The breaker's decision "open now?", apart from its states (cockatiel's split): a strategy reads the
 * failure record the breaker keeps and answers. A rate-based strategy is one more entry here; the
 * machine's states do not change.
 */
export interface FailureRecord {
  readonly consecutiveFailures: number;
}

export interface OpenStrategy {
  /** True when the counted failure just recorded (already included in `record`) must open the breaker. */
  shouldOpen(record: FailureRecord, threshold: number): boolean;
  /**
   * The same decision as a Lua expression over `failures` and `threshold`, for the fleet's breaker
   * script (src/fleet/breaker-script.ts), so Redis opens a shared breaker by the same rule.
   */
  readonly lua: string;
}

/** Opens after `threshold` consecutive counted failures (SPEC.md §2). */
export const consecutiveFailures: OpenStrategy = {
  shouldOpen: (record, threshold) => record.consecutiveFailures >= threshold,
  lua: 'failures >= threshold',
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
  /**
   * The same rule as a Lua expression over `period`, `recovery` and `maxRecovery`, for the fleet's
   * breaker script (src/fleet/breaker-script.ts), so every instance grows the shared period alike.
   */
  readonly lua: string;
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
  lua: 'math.min(period * 2, math.max(maxRecovery, recovery))',
};
