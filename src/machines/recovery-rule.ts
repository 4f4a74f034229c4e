/**
 * The open/probe rule a provider's breaker and a key's health share (breaker.machine.ts,
 * key-health.machine.ts): a refusal is dated, and time lives in the data, so it has ended once an
 * event's time reaches its date, whether or not a timer said so (a restored or adopted snapshot has
 * none running); then one call is let through as the probe, and only that call's result decides.
 * What opens a refusal, and for how long, differs between the two: the breaker's strategy and
 * quorum, a key's error-table column K.
 */
export const recoveryRule = {
  /** The refusal dated `until` (epoch ms; null: none) has ended at `at`. */
  isDue: (until: number | null, at: number): boolean => until !== null && at >= until,
  /** The result of call `callId` is the held probe's (`probeCallId`; null: none held). */
  isProbeResult: (probeCallId: string | null, callId: string | undefined): boolean =>
    probeCallId !== null && callId === probeCallId,
} as const;
