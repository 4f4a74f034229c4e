import { setup } from 'xstate';
import type { ProviderAnswer } from './types.js';

/** PROVIDER_TIMEOUT_MS's default; the runtime provides the configured value (`.provide({ delays })`). */
export const defaultDeadlineMs = 60_000;

/**
 * What happens to a call in flight, each stamped with its time (`at`, epoch ms): the SDK call resolved
 * or rejected, or the caller went away. The deadline is the machine's own named delay.
 */
export type CallEvent =
  | { type: 'upstream.answered'; answer: ProviderAnswer; at: number }
  | { type: 'upstream.threw'; error: unknown; at: number }
  | { type: 'call.cancelled'; at: number };

/**
 * The life of one upstream call, from the moment its provider actor admits it: in flight until the
 * first of its answer, its failure, its deadline or its caller's cancel; that first one alone is
 * reported (exactly once), and whatever comes after (an SDK call rejecting because we aborted it,
 * a late answer) meets a final state and is dropped. A timeout is the provider's failure (it counts,
 * docs/errors.md), a cancel is nobody's (`aborted`): which of the two fired is the state reached, not a flag.
 *
 * The runtime (src/actors/call-upstream.ts) steps one such machine per call without an actor of its
 * own (an actor per call cost ~10 `send()`s of bookkeeping, docs/performance.md); the actions are its
 * side of the call: abort the SDK call, report the outcome to the provider actor. The machine keeps no
 * data and no guards: what the call is (its request, key, start time, whom to answer) is the runtime's,
 * and what it does next depends on its state and the event's type alone, which lets the runtime take
 * each transition from XState once and reuse it (call-upstream.ts).
 */
export const callMachine = setup({
  types: {
    events: {} as CallEvent,
  },
  actions: {
    /** The provider answered (the event's `answer`): the runtime judges it and reports `upstream.succeeded`. */
    reportAnswer: () => undefined,
    /** The SDK call failed (the event's `error`): the runtime classifies it and reports `upstream.failed`. */
    reportFailure: () => undefined,
    /** The deadline passed: reported as a `timeout` failure (a provider-side class), at start + deadline. */
    reportTimeout: () => undefined,
    /** The caller went away: reported as `upstream.cancelled` (class `aborted`, counted nowhere). */
    reportCancelled: () => undefined,
    /** Abort the SDK call (its rejection then meets a final state and is dropped). */
    abortRequest: () => undefined,
  },
  delays: {
    /** PROVIDER_TIMEOUT_MS from the call's start. */
    deadline: defaultDeadlineMs,
  },
}).createMachine({
  id: 'call',
  initial: 'inFlight',
  states: {
    /** The SDK call runs; the first of its answer, its failure, the deadline or a cancel ends it. */
    inFlight: {
      after: {
        deadline: {
          target: 'timedOut',
          actions: ['abortRequest', 'reportTimeout'],
        },
      },
      on: {
        'upstream.answered': { target: 'settled', actions: 'reportAnswer' },
        'upstream.threw': { target: 'settled', actions: 'reportFailure' },
        'call.cancelled': { target: 'cancelled', actions: ['abortRequest', 'reportCancelled'] },
      },
    },
    /** The SDK call answered or failed before the deadline and before any cancel. */
    settled: { type: 'final' },
    /** The deadline passed first: the SDK call was aborted and the call reported as `timeout`. */
    timedOut: { type: 'final' },
    /** The caller went away first: the SDK call was aborted and the call reported as `aborted`. */
    cancelled: { type: 'final' },
  },
});

export type CallMachine = typeof callMachine;
