import type { BreakerEvent, SharedBreakerState } from '../machines/breaker.machine.js';
import {
  admission,
  advanceTo,
  applyEvent,
  initialStep,
  leaseValue,
  parseLease,
  parseRecord,
  probeOf,
  recordOf,
  restoreStep,
  settleProbe,
  sharedStateOf,
  stateName,
  storedSnapshot,
  type BreakerStep,
  type FleetBreakerSettings,
} from './breaker-record.js';
import type { FleetBreakerOperation, FleetBreakerResult } from './redis-state-store.js';

/** One provider's fleet breaker as Redis holds it: the record (JSON), its version, the probe lease's value. */
export interface StoredBreaker {
  readonly version: number;
  readonly record: string | null;
  readonly lease: string | null;
}

/** What the lease becomes with a write: kept, dropped (it is no probe's any more), or taken by a new probe. */
type LeaseChange = 'keep' | 'drop' | { readonly take: string };

/** What a write wants stored: a new record (null: the record as it is) and what becomes of the lease. */
interface Write {
  readonly record: string | null;
  readonly lease: LeaseChange;
}

/** The Redis side: a read, and a compare-and-set on the version and the lease as they were read. */
export interface BreakerCells {
  read(providerId: string): Promise<StoredBreaker>;
  /**
   * Writes only if the version and the lease are still `expected`'s; otherwise writes nothing and answers
   * what is stored now, so the writer can apply its event again without another read.
   */
  write(
    providerId: string,
    expected: StoredBreaker,
    next: Write,
  ): Promise<
    | { readonly written: true; readonly version: number }
    | { readonly written: false; readonly current: StoredBreaker }
  >;
}

/** What the fleet's breaker is asked to do: events come in batches (see `flush`). */
type Operation =
  | Exclude<FleetBreakerOperation, { op: 'event' }>
  | { readonly op: 'events'; readonly events: readonly BreakerEvent[] };

interface Queued {
  readonly event: BreakerEvent;
  resolve(result: FleetBreakerResult): void;
  reject(error: unknown): void;
}

/**
 * Attempts of one operation against writes of other instances before it gives up (each conflict means
 * another write succeeded, so the fleet as a whole always progresses).
 */
const maxAttempts = 50;

/**
 * The fleet's breakers, decided by the breaker machine: each operation reads the stored snapshot and
 * lease, plays the machine's due timers, applies the event with the pure `transition`, and writes the
 * result only if nothing moved since the read; on a conflict it reads again and applies again.
 */
export function createFleetBreakers(cells: BreakerCells, settings: FleetBreakerSettings) {
  const initial = new Map<string, BreakerStep>();
  const freshFor = (providerId: string): BreakerStep => {
    let step = initial.get(providerId);
    if (step === undefined) {
      step = initialStep(providerId, settings, 0);
      initial.set(providerId, step);
    }
    return step;
  };

  /** The operation decided on `stored`: its result, and the write it needs (none: nothing changes). */
  function decide(
    providerId: string,
    stored: StoredBreaker,
    operation: Operation,
    now: number,
  ): { result: FleetBreakerResult; write: Write | undefined } {
    const record = parseRecord(stored.record);
    const holder = parseLease(stored.lease);
    const fresh = freshFor(providerId);
    const restored = record === null ? fresh : restoreStep(record, fresh);
    const before =
      record === null ? null : { name: stateName(restored.snapshot), changedAt: record.changedAt };
    let step = settleProbe(advanceTo(restored, now), holder, now);
    let changedAt = now;
    let take: string | undefined;
    let granted = false;
    let probeStartedAt: number | null = null;
    switch (operation.op) {
      case 'read':
        // A read writes nothing: the view is what the next writer will store.
        return {
          result: {
            shared: sharedStateOf(step.snapshot, stored.version, before?.changedAt ?? 0),
            granted,
            probeStartedAt,
          },
          write: undefined,
        };
      case 'events':
        for (const event of operation.events) {
          step = applyEvent(step, event);
          changedAt = event.at;
        }
        break;
      case 'acquire': {
        const asked = applyEvent(step, admission(operation.callId, now));
        const probe = probeOf(asked.snapshot);
        if (asked.answer !== 'breaker.admitted') {
          probeStartedAt = holder?.startedAt ?? null;
        } else if (probe !== operation.callId) {
          // Admitted without being a probe: the fleet's breaker is closed.
          granted = true;
        } else if (holder !== null) {
          // The machine would take this call as the probe, but a lease is out: the window's probe runs.
          probeStartedAt = holder.startedAt;
        } else {
          step = asked;
          take = leaseValue(operation.callId, now);
          granted = true;
        }
        break;
      }
      case 'merge': {
        const { local } = operation;
        // After an outage the newer of the local and the fleet state wins; an empty store takes the local one.
        if (
          before === null ||
          (local.changedAt > before.changedAt && local.state !== stateName(step.snapshot))
        ) {
          // The fleet's copy adopts the local state as the local breaker adopts the fleet's, then decides
          // by itself again.
          step = applyEvent(step, {
            type: 'breaker.synced',
            shared: { ...local, version: stored.version },
            at: now,
          });
          step = applyEvent(step, { type: 'breaker.unshared', at: now });
          changedAt = local.changedAt;
        }
        break;
      }
    }
    const next = recordOf(step, before, changedAt);
    const text = JSON.stringify(next);
    const probe = probeOf(step.snapshot);
    const lease: LeaseChange =
      take !== undefined ? { take } : holder !== null && holder.callId !== probe ? 'drop' : 'keep';
    const result = {
      shared: sharedStateOf(step.snapshot, stored.version, next.changedAt),
      granted,
      probeStartedAt,
    };
    if (text === stored.record && lease === 'keep') return { result, write: undefined };
    return { result, write: { record: text === stored.record ? null : text, lease } };
  }

  /**
   * What this instance last read or wrote of each breaker: the first guess of the next write, which the
   * compare-and-set checks (a stale guess costs one refused write, whose answer is the current state).
   */
  const known = new Map<string, StoredBreaker>();

  async function run(providerId: string, operation: Operation, now: number): Promise<FleetBreakerResult> {
    let guess = operation.op === 'read' ? undefined : known.get(providerId);
    let stored = guess ?? (await cells.read(providerId));
    for (let tries = 0; tries < maxAttempts; tries += 1) {
      const { result, write } = decide(providerId, stored, operation, now);
      if (write === undefined) {
        // Nothing to write was decided on what Redis holds, never on a guess.
        if (guess === undefined) {
          known.set(providerId, stored);
          return result;
        }
        guess = undefined;
        stored = await cells.read(providerId);
        continue;
      }
      const written = await cells.write(providerId, stored, write);
      if (written.written) {
        const lease =
          write.lease === 'drop' ? null : write.lease === 'keep' ? stored.lease : write.lease.take;
        known.set(providerId, { version: written.version, record: write.record ?? stored.record, lease });
        return { ...result, shared: { ...result.shared, version: written.version } };
      }
      guess = undefined;
      stored = written.current;
    }
    throw new Error(`The fleet breaker of ${providerId} kept changing under ${operation.op}`);
  }

  /**
   * Events told while this instance's write of the same breaker is under way wait for it and then go
   * in one write, in their order: a busy provider costs one compare-and-set per round trip, not one per
   * call, and fewer writers conflict.
   */
  const queues = new Map<string, Queued[]>();
  async function flush(providerId: string): Promise<void> {
    for (;;) {
      const batch = queues.get(providerId) ?? [];
      if (batch.length === 0) {
        queues.delete(providerId);
        return;
      }
      queues.set(providerId, []);
      const events = batch.map((queued) => queued.event);
      try {
        const result = await run(
          providerId,
          { op: 'events', events },
          Math.min(...events.map((event) => event.at)),
        );
        for (const queued of batch) queued.resolve(result);
      } catch (error) {
        for (const queued of batch) queued.reject(error);
      }
    }
  }

  return function apply(
    providerId: string,
    operation: FleetBreakerOperation,
    now: number,
  ): Promise<FleetBreakerResult> {
    if (operation.op !== 'event') return run(providerId, operation, now);
    return new Promise((resolve, reject) => {
      const queue = queues.get(providerId);
      if (queue !== undefined) {
        queue.push({ event: operation.event, resolve, reject });
        return;
      }
      queues.set(providerId, [{ event: operation.event, resolve, reject }]);
      void flush(providerId);
    });
  };
}

/** The view of a published record, for the instances that hear it (undefined: not a record). */
export function publishedState(version: number, text: string): SharedBreakerState | undefined {
  const record = parseRecord(text);
  return record === null ? undefined : sharedStateOf(storedSnapshot(record), version, record.changedAt);
}
