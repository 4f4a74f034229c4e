/**
 * Two instances' breakers sharing one fleet breaker through the real Redis: each instance is its breaker
 * actor and its fleet link (src/fleet), wired as a provider actor wires them (results go to both,
 * the fleet's state goes to the breaker, a probe that needs the fleet's lease asks the link for it).
 * Time is the test's: the actors run on a simulated clock and the links read the same time.
 */
import { assign, createActor, sendTo, setup, SimulatedClock, type ActorRefFrom } from 'xstate';
import { createFleetLink } from '../../src/fleet/fleet-link.js';
import { createRedisStateStore, type SharedBreakerStore } from '../../src/fleet/redis-state-store.js';
import {
  breakerMachine,
  type BreakerAnswer,
  type BreakerEvent,
  type BreakerInput,
  type BreakerKeyStreak,
} from '../../src/machines/breaker.machine.js';
import type { FleetLinkReply, ProbeLeased } from '../../src/machines/fleet-link.js';
import { admit } from '../core/breaker-admit.js';

type InstanceEvent =
  | { type: 'test.admit'; callId: string; at: number }
  | { type: 'test.report'; event: BreakerEvent }
  | BreakerAnswer
  | FleetLinkReply
  | ProbeLeased
  | BreakerKeyStreak;

/** The last admission's answer as the caller would hear it (after the fleet's lease when one was needed). */
type Admission = 'admitted' | 'rejected' | null;

function instanceMachine(store: SharedBreakerStore, now: () => number) {
  return setup({
    types: {
      input: {} as Omit<BreakerInput, 'owner'> & { providerId: 'claude' },
      context: {} as {
        breaker: ActorRefFrom<typeof breakerMachine>;
        link: ActorRefFrom<ReturnType<typeof createFleetLink>>;
        admission: Admission;
      },
      events: {} as InstanceEvent,
    },
    actors: {
      breaker: breakerMachine,
      // No periodic re-read: each step waits for the writes and pub/sub it caused, nothing else moves.
      fleetLink: createFleetLink(store, { now, syncIntervalMs: 600_000 }),
    },
  }).createMachine({
    context: ({ input, spawn, self }) => {
      const breaker = spawn('breaker', { id: 'breaker', input: { ...input, owner: self } });
      return {
        breaker,
        link: spawn('fleetLink', { id: 'fleetLink', input: { providerId: input.providerId, breaker } }),
        admission: null,
      };
    },
    on: {
      'test.admit': {
        actions: [
          assign({ admission: null }),
          sendTo(
            ({ context }) => context.breaker,
            ({ event, self }) => admit(event.callId, event.at, { replyTo: self }),
          ),
        ],
      },
      'test.report': {
        actions: [
          sendTo(
            ({ context }) => context.breaker,
            ({ event }) => event.event,
          ),
          sendTo(
            ({ context }) => context.link,
            ({ event }) => ({ type: 'fleet.report' as const, event: event.event }),
          ),
        ],
      },
      'breaker.admitted': { actions: assign({ admission: 'admitted' }) },
      'breaker.rejected': { actions: assign({ admission: 'rejected' }) },
      'breaker.leaseNeeded': {
        actions: sendTo(
          ({ context }) => context.link,
          ({ event, self }) => ({ type: 'probe.requested' as const, callId: event.call.callId, replyTo: self, at: now() }),
        ),
      },
      'probe.leased': [
        {
          guard: ({ event }) => event.granted,
          actions: sendTo(
            ({ context }) => context.breaker,
            ({ event, self }) => admit(event.callId, event.at, { replyTo: self, leased: true }),
          ),
        },
        { actions: assign({ admission: 'rejected' }) },
      ],
      'breaker.synced': {
        actions: sendTo(
          ({ context }) => context.breaker,
          ({ event }) => event,
        ),
      },
      'breaker.unshared': {
        actions: sendTo(
          ({ context }) => context.breaker,
          ({ event }) => event,
        ),
      },
    },
  });
}

export interface PairInstance {
  admit(callId: string): void;
  report(event: BreakerEvent): void;
  breaker(): ReturnType<ActorRefFrom<typeof breakerMachine>['getSnapshot']>;
  admission(): Admission;
}

export interface FleetPair {
  readonly instances: readonly [PairInstance, PairInstance];
  /** The test's time, epoch ms: events carry it, the links read it. */
  now(): number;
  /** Time passes: the instances' clocks (their breakers' timers) and the links' time move on together. */
  advance(ms: number): void;
  /** The fleet breaker as Redis holds it: its record (JSON) and its probe lease. */
  stored(): Promise<{
    record: { snapshot: { value: unknown; context: Record<string, unknown> } } | null;
    lease: string | null;
  }>;
  stop(): Promise<void>;
}

/**
 * Two instances, each with its own Redis connections, sharing the claude breaker under a prefix of
 * their own (a fresh fleet breaker).
 */
export async function startFleetPair(
  url: string,
  prefix: string,
  settings: Omit<BreakerInput, 'owner' | 'providerId'>,
  startAt: number,
): Promise<FleetPair> {
  let time = startAt;
  const now = () => time;
  const stores = [0, 1].map(() =>
    createRedisStateStore({ url, prefix, breaker: settings, probeLeaseMs: 600_000, commandTimeoutMs: 5000 }),
  );
  await Promise.all(stores.map((store) => store.ready(5000)));
  const clocks = [new SimulatedClock(), new SimulatedClock()];
  for (const clock of clocks) clock.set(startAt);
  const actors = stores.map((store, index) =>
    createActor(instanceMachine(store.breakers, now), {
      clock: clocks[index],
      input: { providerId: 'claude' as const, ...settings },
    }).start(),
  );
  const instanceOf = (actor: (typeof actors)[number]): PairInstance => ({
    admit: (callId) => actor.send({ type: 'test.admit', callId, at: time }),
    report: (event) => actor.send({ type: 'test.report', event }),
    breaker: () => actor.getSnapshot().context.breaker.getSnapshot(),
    admission: () => actor.getSnapshot().context.admission,
  });
  const client = stores[0]!.client;
  return {
    instances: [instanceOf(actors[0]!), instanceOf(actors[1]!)],
    now,
    advance(ms) {
      time += ms;
      for (const clock of clocks) clock.increment(ms);
    },
    async stored() {
      const [record, lease] = await Promise.all([
        client.hget(`${prefix}breaker:claude`, 'record'),
        client.get(`${prefix}breaker:claude:probe`),
      ]);
      return { record: record === null ? null : (JSON.parse(record) as never), lease };
    },
    async stop() {
      for (const actor of actors) actor.stop();
      const keys = await client.keys(`${prefix}*`);
      if (keys.length > 0) await client.del(...keys);
      await Promise.all(stores.map((store) => store.close()));
    },
  };
}
