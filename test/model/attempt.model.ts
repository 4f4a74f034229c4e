/**
 * One call's path as the service lives it, the model of attempt.model.test.ts. It mirrors
 * src/machines/attempt.machine.ts state for state (attempt.model.test.ts compares the two), with what
 * `createTestModel` cannot walk made explicit: the invoked `upstream` actor's end is `upstream.answered`
 * or `upstream.failed`, and each clock is a time event (`time.firstTokenElapsed`, `time.streamIdleElapsed`,
 * `time.deadlineElapsed`). Left out, each with its reason in the comparison test: the fleet's probe
 * lease (`awaitingProbeLease`: a single instance without Redis never needs one) and a cancel before the
 * call goes out (`withdrawn`: the key book and the breaker answer within the turn that asked them, so no
 * caller can cancel in between).
 */
import { setup } from 'xstate';

export type AttemptModelEvent =
  | { type: 'key.admitted' }
  | { type: 'key.refused' }
  | { type: 'breaker.admitted' }
  | { type: 'breaker.rejected' }
  | { type: 'upstream.delta' }
  | { type: 'upstream.answered' }
  | { type: 'upstream.failed' }
  | { type: 'time.firstTokenElapsed' }
  | { type: 'time.streamIdleElapsed' }
  | { type: 'time.deadlineElapsed' }
  | { type: 'call.cancelled' }
  | { type: 'breaker.admitting' }
  | { type: 'breaker.refusing' };

export const attemptModel = setup({
  types: { events: {} as AttemptModelEvent },
}).createMachine({
  id: 'attemptModel',
  initial: 'checkingKey',
  states: {
    checkingKey: { on: { 'key.admitted': 'admitting', 'key.refused': 'skipped' } },
    admitting: { on: { 'breaker.admitted': 'calling', 'breaker.rejected': 'rejected' } },
    calling: {
      initial: 'awaitingFirstToken',
      on: {
        'upstream.answered': 'done',
        'upstream.failed': 'reporting',
        'time.deadlineElapsed': 'reporting',
        'call.cancelled': 'aborted',
      },
      states: {
        awaitingFirstToken: {
          on: { 'upstream.delta': 'streaming', 'time.firstTokenElapsed': '#attemptModel.reporting' },
        },
        streaming: {
          on: { 'upstream.delta': { target: 'streaming', reenter: true }, 'time.streamIdleElapsed': '#attemptModel.reporting' },
        },
      },
    },
    reporting: { on: { 'breaker.admitting': 'failed', 'breaker.refusing': 'failed' } },
    done: {},
    failed: {},
    rejected: {},
    skipped: {},
    aborted: {},
  },
});
