/**
 * The breaker as the service shows it from outside (`GET /v1/providers`), the model of
 * breaker.service.test.ts. It mirrors src/machines/breaker.machine.ts state for state and event for event
 * (breaker.model.test.ts compares the two), with two differences a model of a running system needs:
 * - time passes as an explicit event, `time.recoveryElapsed`, where the production machine has its
 *   `after: recoveryTimeout` (`createTestModel` refuses `after`; the test waits until the service's own
 *   `retryAt` has passed);
 * - the fleet's events (`breaker.synced`, `breaker.unshared`) are left out: one instance without Redis
 *   never hears them (the fleet's breaker is walked on Redis by test/fleet/breaker.fleet-graph.test.ts).
 * The count is kept in context, bounded by the threshold, so `closed` with 0 and with 1 failure are two
 * vertices of the graph; the streak's keys are not modelled (the service runs with a quorum of one key).
 */
import { assign, setup } from 'xstate';

/** BREAKER_FAILURE_THRESHOLD of the service under test: two counted failures open it. */
export const modelThreshold = 2;

export type BreakerModelEvent =
  | { type: 'breaker.admit' }
  | { type: 'call.succeeded' }
  | { type: 'call.failed' }
  | { type: 'call.ignored' }
  | { type: 'breaker.reset' }
  | { type: 'breaker.release' }
  | { type: 'breaker.forceOpen' }
  | { type: 'time.recoveryElapsed' };

export interface BreakerModelContext {
  /** `consecutiveFailures` as `GET /v1/providers` shows it. */
  readonly failures: number;
}

export const breakerModel = setup({
  types: { context: {} as BreakerModelContext, events: {} as BreakerModelEvent },
  guards: {
    /** This counted failure brings the count to the threshold (one key is the quorum here). */
    isThresholdReached: ({ context }) => context.failures + 1 >= modelThreshold,
  },
  actions: {
    countFailure: assign({ failures: ({ context }) => context.failures + 1 }),
    clearFailures: assign({ failures: 0 }),
  },
}).createMachine({
  id: 'breakerModel',
  context: { failures: 0 },
  initial: 'closed',
  on: {
    'breaker.reset': { target: '.closed', actions: 'clearFailures' },
    'breaker.release': { target: '.closed', actions: 'clearFailures' },
    // A forced open keeps the count it had (the production machine's markForcedOpen leaves it).
    'breaker.forceOpen': { target: '.forcedOpen' },
  },
  states: {
    closed: {
      on: {
        'call.succeeded': { actions: 'clearFailures' },
        'call.failed': [
          { guard: 'isThresholdReached', target: 'open', actions: 'countFailure' },
          { actions: 'countFailure' },
        ],
      },
    },
    open: {
      on: {
        'time.recoveryElapsed': { target: 'halfOpen' },
        // A call started once `retryAt` has passed is the probe, whether or not the timer fired first.
        'breaker.admit': { target: 'halfOpen.probing' },
      },
    },
    forcedOpen: {},
    halfOpen: {
      initial: 'awaitingProbe',
      states: {
        awaitingProbe: { on: { 'breaker.admit': { target: 'probing' } } },
        probing: {
          on: {
            'call.succeeded': { target: '#breakerModel.closed', actions: 'clearFailures' },
            // The count stays at the threshold that opened it.
            'call.failed': { target: '#breakerModel.open' },
            'call.ignored': { target: 'awaitingProbe' },
          },
        },
      },
    },
  },
});
