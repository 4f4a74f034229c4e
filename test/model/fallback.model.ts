/**
 * The retry-and-fallback run of one request as the service shows it from outside (the attempts of its
 * answer or error body, in order), the model of fallback.model.test.ts, for a chain of two providers,
 * RETRY_MAX 1 and a policy (FALLBACK_MODE). It mirrors src/machines/fallback.machine.ts state for state
 * and line for line (fallback.model.test.ts compares them): time passes as `time.backoffElapsed` where
 * the production machine has its `after: retryBackoff`, and the classes are the few the walk makes
 * happen, with docs/errors.md's retry and fallback columns written out for them.
 */
import { assign, setup } from 'xstate';

export type FallbackPolicy = 'retry-then-fallback' | 'fallback-first';

/** The classes a call of the walk ends in: a provider-side one (retried) and a user-side one (not). */
type ModelFailureClass = 'server_error' | 'rate_limited';

export type FallbackModelEvent =
  /** The provider answered: valid study material, or material that fails validation (`invalid_output`). */
  | { type: 'provider.succeeded'; valid: boolean }
  | { type: 'provider.failed'; errorClass: ModelFailureClass }
  /** The provider's breaker refused the call (`circuit_open`). */
  | { type: 'provider.rejected' }
  /** The caller's key for the provider is quarantined (`key_quarantined`, class auth). */
  | { type: 'provider.keySkipped' }
  | { type: 'request.aborted' }
  | { type: 'time.backoffElapsed' }
  /** The next call's worst case is priced (the production run's invoked `worstCase` is done). */
  | { type: 'xstate.done.actor.worstCase'; fits: boolean };

type LastClass = ModelFailureClass | 'invalid_output' | 'circuit_open' | 'auth';

export interface FallbackModelContext {
  readonly policy: FallbackPolicy;
  /** The provider being tried (0 or 1). */
  readonly index: number;
  /** Calls to it so far: the next attempt's `retry`. */
  readonly calls: number;
  readonly retries: number;
  readonly reasked: boolean;
  readonly last: LastClass | null;
}

/** Chain length and RETRY_MAX of the service under test. */
export const modelLinks = 2;
export const modelRetryMax = 1;

/** docs/errors.md, the retry column for the classes above: `yes`, `once` (the re-ask) or no. */
const retryColumn: Record<LastClass, 'yes' | 'once' | 'no'> = {
  server_error: 'yes',
  rate_limited: 'no',
  invalid_output: 'once',
  circuit_open: 'no',
  auth: 'no',
};

const hasNext = (context: FallbackModelContext): boolean => context.index + 1 < modelLinks;
/** fallback-first never retries a provider while another one remains. */
const maySameProvider = (context: FallbackModelContext): boolean =>
  context.policy === 'retry-then-fallback' || !hasNext(context);

export function createFallbackModel(policy: FallbackPolicy) {
  return setup({
    types: { context: {} as FallbackModelContext, events: {} as FallbackModelEvent },
    guards: {
      isAnswerValid: ({ event }) => event.type === 'provider.succeeded' && event.valid,
      // The service under test runs without a budget (options.maxCostUsd): every call goes out unpriced.
      hasBudget: () => false,
      isWithinBudget: ({ event }) => event.type === 'xstate.done.actor.worstCase' && event.fits,
      isReaskDue: ({ context }) =>
        context.last !== null && retryColumn[context.last] === 'once' && !context.reasked && maySameProvider(context),
      isRetryDue: ({ context }) =>
        context.last !== null && retryColumn[context.last] === 'yes' && context.retries < modelRetryMax && maySameProvider(context),
      // Every class of the walk may fall back.
      canFallBack: ({ context }) => context.last !== null && hasNext(context),
    },
    actions: {
      recordInvalid: assign({ last: 'invalid_output' as LastClass, calls: ({ context }) => context.calls + 1 }),
      recordFailure: assign(({ context, event }) =>
        event.type === 'provider.failed' ? { last: event.errorClass, calls: context.calls + 1 } : {},
      ),
      // A skip is no call: `retry` stays.
      recordSkip: assign({ last: 'circuit_open' as LastClass }),
      recordKeySkip: assign({ last: 'auth' as LastClass }),
      prepareReask: assign({ reasked: true }),
      countRetry: assign({ retries: ({ context }) => context.retries + 1 }),
      nextProvider: assign({ index: ({ context }) => context.index + 1, calls: 0, retries: 0, reasked: false }),
    },
  }).createMachine({
    id: 'fallbackModel',
    context: { policy, index: 0, calls: 0, retries: 0, reasked: false, last: null },
    initial: 'budgeting',
    states: {
      budgeting: { always: [{ guard: 'hasBudget', target: 'pricing' }, { target: 'calling' }] },
      pricing: {
        on: {
          'xstate.done.actor.worstCase': [{ guard: 'isWithinBudget', target: 'calling' }, { target: 'overBudget' }],
          'request.aborted': { target: 'aborted' },
        },
      },
      calling: {
        on: {
          'provider.succeeded': [
            { guard: 'isAnswerValid', target: 'succeeded' },
            { target: 'deciding', actions: 'recordInvalid' },
          ],
          'provider.failed': { target: 'deciding', actions: 'recordFailure' },
          'provider.rejected': { target: 'deciding', actions: 'recordSkip' },
          'provider.keySkipped': { target: 'deciding', actions: 'recordKeySkip' },
          'request.aborted': { target: 'aborted' },
        },
      },
      deciding: {
        always: [
          { guard: 'isReaskDue', target: 'resuming', actions: 'prepareReask' },
          { guard: 'isRetryDue', target: 'backingOff' },
          { guard: 'canFallBack', target: 'resuming', actions: 'nextProvider' },
          { target: 'failed' },
        ],
      },
      backingOff: {
        on: {
          'time.backoffElapsed': { target: 'resuming', actions: 'countRetry' },
          'request.aborted': { target: 'aborted' },
        },
      },
      /**
       * Continue the answer written so far or start it over: the walk's calls write nothing before they
       * fail (mid-stream failures are test/core/mid-stream.graph.test.ts's), so the next call just goes out.
       */
      resuming: { always: { target: 'budgeting' } },
      succeeded: { type: 'final' },
      failed: { type: 'final' },
      overBudget: { type: 'final' },
      aborted: { type: 'final' },
    },
  });
}
