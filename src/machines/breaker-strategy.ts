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
