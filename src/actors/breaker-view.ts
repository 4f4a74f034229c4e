import type { SnapshotFrom } from 'xstate';
import type { breakerMachine } from '../machines/breaker.machine.js';
import type { BreakerStateName, BreakerView } from './types.js';

type BreakerSnapshot = SnapshotFrom<typeof breakerMachine>;

/** The breaker's state as docs/api.md names it: a forced open reads `open`. */
export function breakerStateName(snapshot: BreakerSnapshot): BreakerStateName {
  if (snapshot.matches('closed')) return 'closed';
  if (snapshot.matches('halfOpen')) return 'halfOpen';
  return 'open';
}

function iso(epochMs: number | null): string | null {
  return epochMs === null ? null : new Date(epochMs).toISOString();
}

export function breakerView(snapshot: BreakerSnapshot): BreakerView {
  const { context } = snapshot;
  return {
    state: breakerStateName(snapshot),
    consecutiveFailures: context.consecutiveFailures,
    openedAt: iso(context.openedAt),
    retryAt: iso(context.retryAt),
    threshold: context.threshold,
    recoveryMs: context.recoveryMs,
    minDistinctKeys: context.minDistinctKeys,
    distinctKeys: context.streakKeys.length,
    forced: snapshot.matches('forcedOpen'),
  };
}
