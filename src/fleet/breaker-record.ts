import { initialTransition, transition, type SnapshotFrom } from 'xstate';
import {
  breakerMachine,
  type BreakerAnswer,
  type BreakerEvent,
  type BreakerInput,
  type SharedBreakerState,
} from '../machines/breaker.machine.js';
import { askingCall } from '../machines/asking-call.js';

/**
 * The fleet's breaker as Redis holds it: the breaker machine's persisted snapshot, the delayed events the
 * machine scheduled (its `after`), and when its state last changed. Redis keeps this record and a version
 * and holds no rule: every instance computes the next record with the breaker machine itself (XState's
 * pure `transition`) and writes it back with a compare-and-set on the version.
 */
export interface BreakerRecord {
  /** `breakerMachine.getPersistedSnapshot` of the fleet's breaker (JSON). */
  readonly snapshot: unknown;
  /**
   * The machine's pending delayed events, each with the epoch ms it is due. A stored snapshot has no
   * running clock (a restored actor does not re-arm its timers either), so the time lives here as data
   * and is played before the next event: an open breaker whose `retryAt` has passed is half-open for
   * whoever reads it next.
   */
  readonly timers: readonly DueEvent[];
  /** Epoch ms of the last change of state (after an outage the newer of two states wins). */
  readonly changedAt: number;
}

interface DueEvent {
  readonly id: string;
  readonly type: string;
  readonly dueAt: number;
}

/** The settings every instance gives its breakers (the machine's input, without the owner). */
export type FleetBreakerSettings = Omit<BreakerInput, 'owner' | 'providerId'>;

export type BreakerSnapshot = SnapshotFrom<typeof breakerMachine>;

/** A fleet breaker step: the snapshot with its timers, and the machine's answer to an admission. */
export interface BreakerStep {
  readonly snapshot: BreakerSnapshot;
  readonly timers: readonly DueEvent[];
  readonly answer: BreakerAnswer['type'] | undefined;
}

/** The probe lease's holder as the lease's value says it: `callId|startedAt`. */
export interface LeaseHolder {
  readonly callId: string;
  /** Epoch ms the probe started; null when the value holds no start. */
  readonly startedAt: number | null;
}

export function leaseValue(callId: string, startedAt: number): string {
  return `${callId}|${Math.round(startedAt)}`;
}

export function parseLease(value: string | null): LeaseHolder | null {
  if (value === null || value === '') return null;
  const match = /^(.*)\|(\d+)$/.exec(value);
  return match === null
    ? { callId: value, startedAt: null }
    : { callId: match[1] ?? '', startedAt: Number(match[2]) };
}

/** The fleet's breaker before any event: the machine's initial state for these settings. */
export function initialStep(providerId: string, settings: FleetBreakerSettings, at: number): BreakerStep {
  const [snapshot, actions] = initialTransition(breakerMachine, { providerId, ...settings });
  return { snapshot, timers: schedule([], actions, at), answer: undefined };
}

/**
 * The stored record as a step to continue from (`fresh`: this instance's `initialStep`). The settings
 * are this instance's configuration, not the fleet's state: they replace the stored ones, so a changed
 * BREAKER_* setting applies to the shared breaker as it does to a local one.
 */
export function restoreStep(record: BreakerRecord, fresh: BreakerStep): BreakerStep {
  const stored = record.snapshot as { value: BreakerSnapshot['value']; context: BreakerSnapshot['context'] };
  const { threshold, recoveryMs, maxRecoveryMs, minDistinctKeys, strategy } = fresh.snapshot.context;
  const snapshot = breakerMachine.resolveState({
    value: stored.value,
    context: { ...stored.context, threshold, recoveryMs, maxRecoveryMs, minDistinctKeys, strategy },
  });
  return { snapshot, timers: record.timers, answer: undefined };
}

/** The stored snapshot as it was written. */
export function storedSnapshot(record: BreakerRecord): BreakerSnapshot {
  return breakerMachine.resolveState(record.snapshot as Parameters<typeof breakerMachine.resolveState>[0]);
}

/** Plays the delayed events due by `at`, in their order, as the machine's own clock would have. */
export function advanceTo(step: BreakerStep, at: number): BreakerStep {
  let { snapshot, timers } = step;
  for (;;) {
    const due = [...timers].filter((timer) => timer.dueAt <= at).sort((a, b) => a.dueAt - b.dueAt)[0];
    if (due === undefined) return { snapshot, timers, answer: step.answer };
    // The machine's own delayed event (`xstate.after.…`): XState types it outside BreakerEvent.
    const [next, actions] = transition(breakerMachine, snapshot, {
      type: due.type,
    } as unknown as BreakerEvent);
    snapshot = next;
    timers = schedule(
      timers.filter((timer) => timer !== due),
      actions,
      due.dueAt,
    );
  }
}

/** One event applied by the breaker machine: its timers first, then the event at its own time. */
export function applyEvent(step: BreakerStep, event: BreakerEvent): BreakerStep {
  const advanced = advanceTo(step, event.at);
  const [snapshot, actions] = transition(breakerMachine, advanced.snapshot, event);
  return { snapshot, timers: schedule(advanced.timers, actions, event.at), answer: answerOf(actions) };
}

/** The call held as the probe of this half-open window, or null. */
export function probeOf(snapshot: BreakerSnapshot): string | null {
  return snapshot.matches({ halfOpen: 'probing' }) ? snapshot.context.probeCallId : null;
}

/**
 * The stored probe must hold the fleet's probe lease: a lease that lapsed (its prober died, or lost
 * Redis) leaves a probe that proves nothing, which the machine hears as such (`aborted`, never counted),
 * freeing the window's slot for the next instance.
 */
export function settleProbe(step: BreakerStep, holder: LeaseHolder | null, at: number): BreakerStep {
  const probe = probeOf(step.snapshot);
  if (probe === null || probe === holder?.callId) return step;
  return applyEvent(step, { type: 'call.ignored', callId: probe, errorClass: 'aborted', at });
}

/**
 * `breaker.admit` for a call the fleet only knows by id: the fleet's copy of the breaker reads the
 * call's id and answers; the call itself (its request and key) stays with the instance that asked.
 */
export function admission(callId: string, at: number): Extract<BreakerEvent, { type: 'breaker.admit' }> {
  const call = askingCall(callId, at);
  return { type: 'breaker.admit', call, replyTo: call.replyTo, leased: false, at };
}

export function stateName(snapshot: BreakerSnapshot): SharedBreakerState['state'] {
  if (snapshot.matches('closed')) return 'closed';
  if (snapshot.matches('halfOpen')) return 'halfOpen';
  if (snapshot.matches('forcedOpen')) return 'forcedOpen';
  return 'open';
}

/**
 * The record to store after `step`. `before`: the state's name and `changedAt` as stored (null: nothing
 * stored); the state changed at `at` when its name differs.
 */
export function recordOf(
  step: BreakerStep,
  before: { readonly name: SharedBreakerState['state']; readonly changedAt: number } | null,
  at: number,
): BreakerRecord {
  const changed = before === null || before.name !== stateName(step.snapshot);
  return {
    snapshot: breakerMachine.getPersistedSnapshot(step.snapshot),
    timers: step.timers,
    changedAt: changed ? at : before.changedAt,
  };
}

/** What every instance's breaker adopts (`breaker.synced`) from the fleet's snapshot. */
export function sharedStateOf(
  snapshot: BreakerSnapshot,
  version: number,
  changedAt: number,
): SharedBreakerState {
  const { context } = snapshot;
  return {
    state: stateName(snapshot),
    consecutiveFailures: context.consecutiveFailures,
    streakKeys: context.streakKeys,
    openedAt: context.openedAt,
    retryAt: context.retryAt,
    opens: context.opens,
    openPeriodMs: context.openPeriodMs,
    version,
    changedAt,
  };
}

/** A record as read back from Redis (JSON), or null when it is not one (the fleet starts afresh). */
export function parseRecord(text: string | null): BreakerRecord | null {
  if (text === null || text === '') return null;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null) return null;
    const { snapshot, timers, changedAt } = value as Record<string, unknown>;
    if (
      typeof snapshot !== 'object' ||
      snapshot === null ||
      !('value' in snapshot) ||
      !('context' in snapshot)
    )
      return null;
    if (!Array.isArray(timers) || typeof changedAt !== 'number') return null;
    const due = timers.filter(
      (timer): timer is DueEvent =>
        typeof timer === 'object' &&
        timer !== null &&
        typeof (timer as DueEvent).id === 'string' &&
        typeof (timer as DueEvent).type === 'string' &&
        (timer as DueEvent).type.startsWith('xstate.after.') &&
        typeof (timer as DueEvent).dueAt === 'number',
    );
    return { snapshot, timers: due, changedAt };
  } catch {
    return null;
  }
}

/** The machine's delayed events (raised with a delay) become due times; a cancel drops one. */
function schedule(
  timers: readonly DueEvent[],
  actions: readonly { type: string; params?: unknown }[],
  at: number,
): readonly DueEvent[] {
  let next = timers;
  for (const action of actions) {
    const params = (action.params ?? {}) as {
      delay?: unknown;
      id?: unknown;
      event?: unknown;
      sendId?: unknown;
    };
    if (action.type === 'xstate.raise' && typeof params.delay === 'number' && typeof params.id === 'string') {
      const { id, delay } = params;
      const type = (params.event as { type?: unknown } | undefined)?.type;
      if (typeof type === 'string')
        next = [...next.filter((timer) => timer.id !== id), { id, type, dueAt: at + delay }];
    }
    if (action.type === 'xstate.cancel' && typeof params.sendId === 'string') {
      const { sendId } = params;
      next = next.filter((timer) => timer.id !== sendId);
    }
  }
  return next;
}

/** The breaker's answer to an admission, as it sends it to the asker. */
function answerOf(actions: readonly { type: string; params?: unknown }[]): BreakerAnswer['type'] | undefined {
  for (const action of actions) {
    if (action.type !== 'xstate.sendTo') continue;
    const type = (action.params as { event?: { type?: unknown } } | undefined)?.event?.type;
    if (type === 'breaker.admitted' || type === 'breaker.rejected' || type === 'breaker.leaseNeeded')
      return type;
  }
  return undefined;
}
