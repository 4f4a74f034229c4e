import { getNextTransitions, type AnyMachineSnapshot } from 'xstate';

/**
 * Events to explore from a snapshot: the event types the snapshot can actually take (delayed
 * `xstate.after.*` ones included, docs/testing.md graph-test pitfall 1), each expanded into its payloads.
 */
export function eventsFrom<TEvent extends { type: string }>(
  snapshot: AnyMachineSnapshot,
  payloadsFor: (type: string, snapshot: AnyMachineSnapshot) => readonly TEvent[],
): TEvent[] {
  const types = [...new Set(getNextTransitions(snapshot).map((transition) => transition.eventType))];
  return types.flatMap((type) => payloadsFor(type, snapshot));
}

/**
 * The event types a transition's `sendTo` actions send. A report to the fleet link wraps a breaker
 * event; it is listed as `fleet:<type>` so a FAILURE told to the fleet is seen too.
 */
export function sentEventTypes(actions: readonly { type: string; params?: unknown }[]): string[] {
  return actions
    .filter((action) => action.type === 'xstate.sendTo')
    .map((action) => {
      const params = action.params as { event?: { type?: string; event?: { type?: string } } } | undefined;
      const event = params?.event;
      if (event?.type === 'fleet.report') return `fleet:${event.event?.type ?? '?'}`;
      return event?.type ?? '?';
    });
}
