/**
 * One caller key's health as the service shows it from outside (`GET /v1/keys/status`, the attempts'
 * `key_quarantined` / `key_cooling` skips), the model of key-health.model.test.ts. It mirrors
 * src/machines/key-health.machine.ts state for state (key-health.model.test.ts compares the two). The
 * production machine has no timer (time is in its data: a call after `until` is the probe), so time
 * passes in `key.called`: the test waits until the `until` the service shows has passed, then calls.
 * Left out, each with its reason in the comparison test: the fleet's `key.synced`, the failures and
 * trips that can only reach a key while it is refused (from calls already in flight when it was refused:
 * the service makes no call with a refused key), and the key's answers to `key.admit`, which change no
 * state (each step observes them: a call served, or skipped without an upstream call).
 */
import { setup } from 'xstate';

/** The classes the walk makes the service see, by what column K of docs/errors.md does with them. */
export const quarantineClasses = ['auth', 'quota_exhausted'] as const;
export const coolingClasses = ['rate_limited'] as const;
/** A provider-side class: nothing for the key (and a FAILURE for the breaker). */
const neutralClasses = ['server_error'] as const;

export type ModelErrorClass =
  | (typeof quarantineClasses)[number]
  | (typeof coolingClasses)[number]
  | (typeof neutralClasses)[number];

export const modelErrorClasses: readonly ModelErrorClass[] = [...quarantineClasses, ...coolingClasses, ...neutralClasses];

export type KeyHealthModelEvent =
  | { type: 'key.called' }
  | { type: 'key.answered' }
  | { type: 'key.failed'; errorClass: ModelErrorClass }
  /** A streak of counted failures from this key alone (the breaker's quorum not met). */
  | { type: 'key.tripped' };

const classOf = (event: KeyHealthModelEvent): string | undefined =>
  event.type === 'key.failed' ? event.errorClass : undefined;

export const keyHealthModel = setup({
  types: { events: {} as KeyHealthModelEvent },
  guards: {
    isQuarantineClass: ({ event }) => (quarantineClasses as readonly (string | undefined)[]).includes(classOf(event)),
    isCoolingClass: ({ event }) => (coolingClasses as readonly (string | undefined)[]).includes(classOf(event)),
  },
}).createMachine({
  id: 'keyHealthModel',
  initial: 'healthy',
  states: {
    healthy: {
      on: {
        'key.failed': [
          { guard: 'isQuarantineClass', target: 'quarantined' },
          { guard: 'isCoolingClass', target: 'cooling' },
        ],
        'key.tripped': { target: 'quarantined' },
      },
    },
    quarantined: {
      initial: 'waiting',
      states: {
        waiting: { on: { 'key.called': { target: 'probing' } } },
        probing: {
          on: {
            'key.answered': { target: '#keyHealthModel.healthy' },
            'key.failed': [
              { guard: 'isQuarantineClass', target: 'waiting' },
              { guard: 'isCoolingClass', target: '#keyHealthModel.cooling' },
              // Proves nothing of the key: the next call probes again.
              { target: 'waiting' },
            ],
          },
        },
      },
    },
    cooling: {
      initial: 'waiting',
      states: {
        waiting: { on: { 'key.called': { target: 'probing' } } },
        probing: {
          on: {
            'key.answered': { target: '#keyHealthModel.healthy' },
            'key.failed': [
              { guard: 'isQuarantineClass', target: '#keyHealthModel.quarantined' },
              { guard: 'isCoolingClass', target: 'waiting' },
              { target: 'waiting' },
            ],
          },
        },
      },
    },
  },
});
