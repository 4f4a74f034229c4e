import { fromCallback } from 'xstate';
import type { FleetLinkEvent, FleetLinkInput, FleetLinkReply, ProbeLeased } from '../machines/fleet-link.js';
import type { BreakerEvent, SharedBreakerState } from '../machines/breaker.machine.js';
import { stateName as localStateName } from './breaker-record.js';
import type { FleetBreakerOperation, FleetBreakerResult, SharedBreakerStore } from './redis-state-store.js';

export interface FleetLinkOptions {
  /** How often the link re-reads the fleet state (a lost pub/sub message heals within this). */
  readonly syncIntervalMs?: number;
  /**
   * The probe lease's lifetime without renewal (the store's `probeLeaseMs`): while this instance's probe
   * call runs, the link renews its lease every third of it, so the lease outlives the call but lapses
   * within this of the instance's death. Without it, no renewal (the lease must outlive the longest call).
   */
  readonly probeLeaseMs?: number;
  /** Renewal stops after this even if the probe's outcome was never seen (PROVIDER_TIMEOUT_MS + margin). */
  readonly probeMaxMs?: number;
  /**
   * PROVIDER_TIMEOUT_MS, the longest a probe call can take: a call refused because another instance's
   * probe holds the lease is told that probe ends by its start plus this (`probe.leased.probeEndsBy`).
   * Without it, the refusal says nothing of when (try again in a moment).
   */
  readonly probeDeadlineMs?: number;
  readonly now?: () => number;
}

/**
 * The breaker events the fleet's breaker applies too: call results and operator actions. An admission
 * is not one (the probe's is its lease: `acquire`), nor the fleet's own state coming back.
 */
function isFleetEvent(event: BreakerEvent): boolean {
  switch (event.type) {
    case 'call.succeeded':
    case 'call.failed':
    case 'call.ignored':
    case 'breaker.reset':
    case 'breaker.forceOpen':
    case 'breaker.release':
      return true;
    default:
      return false;
  }
}

/**
 * The link between one provider's breaker actor and the fleet store: every breaker event is applied
 * to the fleet's breaker by the breaker machine (fleet-breaker.ts: compare-and-set on its version) and
 * the fleet's result, or any other
 * instance's change heard on pub/sub, comes back as `breaker.synced` for the breaker to adopt.
 * While the store is unreachable the breaker decides locally (`breaker.unshared`); on reconnection
 * the link reconciles: the newer of the local and the fleet state wins, so nothing opens or closes
 * only because Redis came back.
 */
export function createFleetLink(store: SharedBreakerStore, options: FleetLinkOptions = {}) {
  const now = options.now ?? Date.now;
  return fromCallback<FleetLinkEvent, FleetLinkInput, FleetLinkReply>(({ input, receive, sendBack }) => {
    const { providerId, breaker } = input;
    let shared = false;
    let lastVersion = -1;
    let lastChangedAt = 0;
    let inFlight = 0;
    let stopped = false;
    /** This instance's probes in flight whose fleet lease it renews, by call id. */
    const renewals = new Map<string, ReturnType<typeof setInterval>>();
    const stopRenewing = (callId: string): void => {
      const timer = renewals.get(callId);
      if (timer === undefined) return;
      clearInterval(timer);
      renewals.delete(callId);
    };
    const renewWhileRunning = (callId: string): void => {
      const leaseMs = options.probeLeaseMs;
      if (leaseMs === undefined || renewals.has(callId)) return;
      const until = now() + (options.probeMaxMs ?? 120_000);
      const timer = setInterval(() => {
        if (stopped || now() > until) return stopRenewing(callId);
        if (!store.isUp()) return;
        void store.renew(providerId, callId).then(
          (held) => {
            // false: the lease is no longer this call's (it ended, or lapsed and another instance probes).
            if (!held) stopRenewing(callId);
          },
          () => undefined,
        );
      }, Math.max(10, Math.floor(leaseMs / 3)));
      timer.unref?.();
      renewals.set(callId, timer);
    };
    /**
     * When the other instance's probe that holds the lease ends at the latest: its start plus the call's
     * deadline, never past a whole deadline from now (another clock may run ahead). A time already past is
     * the provider machine's to bound (`probeRetryAt`: never before the answer's time).
     */
    const probeEnd = (startedAt: number | null, at: number): number | undefined => {
      const deadline = options.probeDeadlineMs;
      if (startedAt === null || deadline === undefined) return undefined;
      return Math.min(startedAt + deadline, at + deadline);
    };
    /** When the local breaker last changed state on its own (while unshared). */
    let localChangedAt: number | null = null;
    let lastLocalState = localStateName(breaker.getSnapshot());

    const adopt = (state: SharedBreakerState, force: boolean): void => {
      if (stopped || (!force && state.version <= lastVersion)) return;
      lastVersion = state.version;
      lastChangedAt = state.changedAt;
      shared = true;
      localChangedAt = null;
      sendBack({ type: 'breaker.synced', shared: state, at: now() });
    };
    const lose = (): void => {
      if (stopped || !shared) return;
      shared = false;
      sendBack({ type: 'breaker.unshared', at: now() });
    };

    const run = (operation: FleetBreakerOperation, at: number): Promise<FleetBreakerResult | undefined> => {
      inFlight += 1;
      return store
        .apply(providerId, operation, at)
        .then(
          (result) => {
            // A periodic read that finds the fleet elsewhere than the local breaker, with nothing
            // else in flight, repairs a missed update even when the version did not move.
            const repair =
              operation.op === 'read' &&
              inFlight === 1 &&
              result.shared.state !== localStateName(breaker.getSnapshot());
            adopt(result.shared, operation.op === 'merge' || repair);
            return result;
          },
          () => {
            lose();
            return undefined;
          },
        )
        .finally(() => {
          inFlight -= 1;
        });
    };

    const reconcile = (): void => {
      const snapshot = breaker.getSnapshot();
      const { context } = snapshot;
      void run(
        {
          op: 'merge',
          local: {
            state: localStateName(snapshot),
            consecutiveFailures: context.consecutiveFailures,
            streakKeys: context.streakKeys,
            openedAt: context.openedAt,
            retryAt: context.retryAt,
            openPeriodMs: context.openPeriodMs,
            opens: context.opens,
            changedAt: localChangedAt ?? lastChangedAt,
          },
        },
        now(),
      );
    };

    const watchLocal = breaker.subscribe((snapshot) => {
      const name = localStateName(snapshot);
      if (name === lastLocalState) return;
      lastLocalState = name;
      if (!shared) localChangedAt = now();
    });
    const unsubscribe = store.subscribe(providerId, (state) => {
      if (shared) adopt(state, false);
    });
    const unwatch = store.onAvailability((up) => (up ? reconcile() : lose()));
    const poll = setInterval(() => {
      if (!store.isUp() || inFlight > 0) return;
      if (!shared) {
        reconcile();
        return;
      }
      void run({ op: 'read' }, now());
    }, options.syncIntervalMs ?? 1000);
    poll.unref?.();
    if (store.isUp()) reconcile();

    receive((event) => {
      if (event.type === 'probe.requested') {
        const ask = store.isUp()
          ? run({ op: 'acquire', callId: event.callId }, event.at)
          : Promise.resolve(undefined);
        // Unreachable store: the local breaker alone decides this window's probe.
        void ask.then((result) => {
          if (stopped) return;
          const granted = result?.granted ?? true;
          if (result?.granted === true) renewWhileRunning(event.callId);
          const at = now();
          const probeEndsBy = granted ? undefined : probeEnd(result?.probeStartedAt ?? null, at);
          // To the attempt that asked (a withdrawn one frees a lease it no longer needs).
          const answer: ProbeLeased = { type: 'probe.leased', callId: event.callId, granted, ...(probeEndsBy === undefined ? {} : { probeEndsBy }), at };
          event.replyTo.send(answer);
        });
        return;
      }
      // The probe's outcome (or any end of that call): its lease needs no more renewal.
      if ('callId' in event.event) stopRenewing(event.event.callId);
      if (!isFleetEvent(event.event) || !store.isUp()) return;
      void run({ op: 'event', event: event.event }, event.event.at);
    });

    return () => {
      stopped = true;
      for (const callId of [...renewals.keys()]) stopRenewing(callId);
      clearInterval(poll);
      watchLocal.unsubscribe();
      unsubscribe();
      unwatch();
    };
  });
}
