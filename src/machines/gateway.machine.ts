import { setup, type ActorRefFrom } from 'xstate';
import type { ProviderId } from './types.js';
import { providerMachine, type ProviderInput } from './provider.machine.js';

export interface GatewayInput {
  readonly providers: readonly ProviderInput[];
}

export interface GatewayContext {
  readonly providers: Readonly<Partial<Record<ProviderId, ActorRefFrom<typeof providerMachine>>>>;
}

/**
 * The root of the actor system: it spawns one provider actor per provider (each spawning its own
 * breaker), under system ids `provider.<id>` and `breaker.<id>`. The fallback runs (one actor per
 * request, actor id `run`, system ids `run.…`) live in the same system with the root as their parent:
 * their end comes back to it as `xstate.done.actor.run`, which changes nothing here, and a run that
 * failed (a bug) rejects its own request only: its `xstate.error.actor.run` is handled and changes
 * nothing. Unhandled, a child's error event puts its parent in error too: the whole system would be
 * restarted, failing every request in flight.
 */
export const gatewayMachine = setup({
  types: {} as {
    input: GatewayInput;
    context: GatewayContext;
  },
  actors: { provider: providerMachine },
}).createMachine({
  id: 'gateway',
  context: ({ input, spawn }) => ({
    providers: Object.fromEntries(
      input.providers.map((provider) => [
        provider.providerId,
        spawn('provider', {
          id: `provider.${provider.providerId}`,
          systemId: `provider.${provider.providerId}`,
          input: provider,
        }),
      ]),
    ),
  }),
  initial: 'running',
  states: {
    /** Serving; the provider actors live as long as the gateway. */
    running: {
      on: { 'xstate.error.actor.run': {} },
    },
  },
});
