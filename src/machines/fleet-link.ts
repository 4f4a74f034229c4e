import { fromCallback, type ActorRefFrom, type AnyActorRef } from 'xstate';
import type { BreakerEvent, breakerMachine } from './breaker.machine.js';
import type { ProviderId } from './types.js';

/** What a provider actor gives the link between its breaker and the fleet store. */
export interface FleetLinkInput {
  readonly providerId: ProviderId;
  /** The provider's own breaker: the link reads its state to reconcile after an outage. */
  readonly breaker: ActorRefFrom<typeof breakerMachine>;
}

/** What the provider actor and its calls' attempts tell the fleet link. */
export type FleetLinkEvent =
  /**
   * Every call result and operator action the breaker hears (and each success, which may clear the
   * fleet's count even where the local breaker had nothing to clear), to be applied to the fleet state
   * as well. A call's start is not told: it is no operation of the fleet state (the probe's is its lease).
   */
  | { type: 'fleet.report'; event: BreakerEvent }
  /**
   * A call would be the half-open probe: ask the fleet for the one probe lease of this window. The
   * answer (`ProbeLeased`) goes to `replyTo`, the call's attempt, which waits for it.
   */
  | { type: 'probe.requested'; callId: string; replyTo: AnyActorRef; at: number };

/** What the fleet link tells its provider actor: the fleet's breaker state, or its loss. */
export type FleetLinkReply = Extract<BreakerEvent, { type: 'breaker.synced' | 'breaker.unshared' }>;

/** The fleet's answer to `probe.requested`, sent to the asking attempt. */
export interface ProbeLeased {
  readonly type: 'probe.leased';
  readonly callId: string;
  readonly granted: boolean;
  /**
   * Refused only: when the probe that holds the lease (another instance's, in flight) ends at the
   * latest, epoch ms (its start plus PROVIDER_TIMEOUT_MS); absent when unknown.
   */
  readonly probeEndsBy?: number;
  readonly at: number;
}

/**
 * The embedded default (no `REDIS_URL`): no fleet, so the link never answers and the breaker
 * decides alone. `createFleetLink` (src/fleet) replaces it through `.provide`.
 */
export const embeddedFleetLink = fromCallback<FleetLinkEvent, FleetLinkInput, FleetLinkReply>(
  () => undefined,
);
