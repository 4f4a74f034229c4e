import { and, assign, setup } from 'xstate';
import { errorPolicy, keyVerdictInTable, type ErrorClass, type ErrorTable } from '../errors/index.js';

/**
 * The health of ONE caller key for one provider (docs/api.md "key health"): `healthy`, `quarantined` (auth,
 * permission, quota: the key is refused for KEY_QUARANTINE_MS) or `cooling` (rate limited: refused until
 * the upstream's `Retry-After`, else KEY_COOLING_MS). While refused, calls with the key are skipped
 * without an upstream call; once `until` has passed, ONE call is let through as the key's probe, whose
 * result alone decides. Which class does what is column K of the error table. Time lives in the data
 * (`until`, events carry `at`): no timer, so a record read back from the fleet store works as it is.
 * The bounded map of these per provider is `keyBookMachine` (key-book.machine.ts).
 */
export interface KeyHealthInput {
  /** The key's salted fingerprint (never the key). */
  readonly keyId: string;
  /** KEY_QUARANTINE_MS: how long an auth, permission or quota failure refuses the key. */
  readonly quarantineMs: number;
  /** KEY_COOLING_MS: how long a rate limit refuses the key when the upstream gave no `Retry-After`. */
  readonly coolingMs: number;
}

export interface KeyHealthContext extends KeyHealthInput {
  /** The class that made the key unhealthy; null while healthy. */
  readonly errorClass: ErrorClass | null;
  /** Epoch ms until which the key is refused; null while healthy. */
  readonly until: number | null;
  /** The call let through as the key's probe, whose result alone decides. */
  readonly probeCallId: string | null;
}

/** A key's health as the fleet store (Redis) holds it: what every instance adopts. */
export interface SharedKeyHealth {
  readonly state: 'healthy' | 'quarantined' | 'cooling';
  readonly errorClass: ErrorClass | null;
  readonly until: number | null;
}

/**
 * What the provider actor tells a key (through the key book). Every finished call arrives with its
 * class (`key.failed`), counted or not: column K of the table decides what it does to the key.
 */
export type KeyHealthEvent =
  | { type: 'key.called'; callId: string; at: number }
  | { type: 'key.answered'; callId: string; at: number }
  | { type: 'key.failed'; callId: string; errorClass: ErrorClass; retryAfterMs?: number; at: number }
  /**
   * A failure streak from this key alone (the provider's breaker quorum, issue 14 part 3): the key gets
   * its own open circuit, a quarantine of `periodMs` (default KEY_QUARANTINE_MS).
   */
  | { type: 'key.tripped'; errorClass: ErrorClass; periodMs?: number; at: number }
  /** Another instance changed the key's health: adopt it. */
  | { type: 'key.synced'; shared: SharedKeyHealth; at: number };

type FailedEvent = Extract<KeyHealthEvent, { type: 'key.failed' }>;

/** The key machine on `table` (the production table unless a test injects a flipped row). */
export function createKeyHealthMachine(table: ErrorTable) {
  const verdictOf = (event: KeyHealthEvent) =>
    event.type === 'key.failed' ? keyVerdictInTable(table, event.errorClass) : 'none';
  /** Rate limited: until the upstream's hint, never beyond a quarantine, else the default cooling. */
  const coolingUntil = (context: KeyHealthContext, event: FailedEvent): number =>
    event.at +
    Math.min(event.retryAfterMs ?? context.coolingMs, Math.max(context.quarantineMs, context.coolingMs));
  return setup({
    types: {
      input: {} as KeyHealthInput,
      context: {} as KeyHealthContext,
      events: {} as KeyHealthEvent,
    },
    guards: {
      /** Column K: the failure quarantines the key (auth, permission, quota_exhausted). */
      isQuarantineClass: ({ event }) => verdictOf(event) === 'quarantine',
      /** Column K: the failure cools the key (rate_limited). */
      isCoolingClass: ({ event }) => verdictOf(event) === 'cool',
      /** The result belongs to the call let through as this key's probe. */
      isProbeResult: ({ context, event }) => 'callId' in event && event.callId === context.probeCallId,
      /** Time lives in the data: the refusal has ended, so this call is the key's probe. */
      isUntilPassed: ({ context, event }) => context.until !== null && event.at >= context.until,
      /** The fleet's record differs from what this key holds (an echo of its own write changes nothing). */
      isSyncedChange: ({ context, event }) =>
        event.type === 'key.synced' &&
        (event.shared.until !== context.until || event.shared.errorClass !== context.errorClass),
      isSyncedHealthy: ({ event }) => event.type === 'key.synced' && event.shared.state === 'healthy',
      isSyncedQuarantined: ({ event }) => event.type === 'key.synced' && event.shared.state === 'quarantined',
      isSyncedCooling: ({ event }) => event.type === 'key.synced' && event.shared.state === 'cooling',
    },
    actions: {
      /** Quarantine from now; a later failure never shortens a quarantine already running. */
      quarantine: assign(({ context, event }) => {
        const period =
          event.type === 'key.tripped' ? (event.periodMs ?? context.quarantineMs) : context.quarantineMs;
        const errorClass =
          event.type === 'key.failed' || event.type === 'key.tripped' ? event.errorClass : null;
        return {
          errorClass,
          until: Math.max(context.until ?? 0, event.at + period),
          probeCallId: null,
        };
      }),
      /** Cool until the upstream's hint; another rate limit moves `until` to the later of the two. */
      cool: assign(({ context, event }) => {
        if (event.type !== 'key.failed') return {};
        const next = coolingUntil(context, event);
        return { errorClass: event.errorClass, until: Math.max(context.until ?? 0, next), probeCallId: null };
      }),
      /** Re-refused after a failed probe: a fresh period from now. */
      restartQuarantine: assign(({ context, event }) => ({
        errorClass: event.type === 'key.failed' ? event.errorClass : context.errorClass,
        until: event.at + context.quarantineMs,
        probeCallId: null,
      })),
      restartCooling: assign(({ context, event }) => {
        if (event.type !== 'key.failed') return {};
        return { errorClass: event.errorClass, until: coolingUntil(context, event), probeCallId: null };
      }),
      holdProbe: assign({ probeCallId: ({ event }) => ('callId' in event ? event.callId : null) }),
      /** The probe proved nothing of the key (a provider-side class, an abort): the next call probes. */
      freeProbe: assign({ probeCallId: null }),
      markHealthy: assign({ errorClass: null, until: null, probeCallId: null }),
      adoptShared: assign(({ event }) =>
        event.type === 'key.synced'
          ? { errorClass: event.shared.errorClass, until: event.shared.until, probeCallId: null }
          : {},
      ),
    },
  }).createMachine({
    id: 'keyHealth',
    context: ({ input }) => ({ ...input, errorClass: null, until: null, probeCallId: null }),
    initial: 'healthy',
    on: {
      /** The fleet's record of another state than this key's: the states below take only their own kind. */
      'key.synced': [
        { guard: 'isSyncedHealthy', target: '.healthy', actions: 'markHealthy' },
        { guard: 'isSyncedQuarantined', target: '.quarantined', actions: 'adoptShared' },
        { guard: 'isSyncedCooling', target: '.cooling', actions: 'adoptShared' },
      ],
    },
    states: {
      /** Calls with the key go out; a user-side failure of the key refuses it. */
      healthy: {
        tags: ['admitting'],
        on: {
          'key.failed': [
            { guard: 'isQuarantineClass', target: 'quarantined', actions: 'quarantine' },
            { guard: 'isCoolingClass', target: 'cooling', actions: 'cool' },
          ],
          'key.tripped': { target: 'quarantined', actions: 'quarantine' },
          'key.synced': { guard: 'isSyncedHealthy' },
        },
      },
      /** Auth, permission or quota: refused until `until`, then one probe. */
      quarantined: {
        initial: 'waiting',
        on: {
          'key.synced': { guard: 'isSyncedQuarantined' },
        },
        states: {
          /** Every call is skipped until `until`; the first call after it is the probe. */
          waiting: {
            on: {
              'key.called': { guard: 'isUntilPassed', target: 'probing', actions: 'holdProbe' },
              /** A call started before the quarantine failed too: never shortens it. */
              'key.failed': { guard: 'isQuarantineClass', actions: 'quarantine' },
              'key.tripped': { actions: 'quarantine' },
              'key.synced': {
                guard: and(['isSyncedQuarantined', 'isSyncedChange']),
                target: 'waiting',
                reenter: true,
                actions: 'adoptShared',
              },
            },
          },
          /** One probe is in flight; every other call is skipped until it ends. */
          probing: {
            on: {
              'key.answered': {
                guard: 'isProbeResult',
                target: '#keyHealth.healthy',
                actions: 'markHealthy',
              },
              'key.failed': [
                {
                  guard: and(['isProbeResult', 'isQuarantineClass']),
                  target: 'waiting',
                  actions: 'restartQuarantine',
                },
                {
                  guard: and(['isProbeResult', 'isCoolingClass']),
                  target: '#keyHealth.cooling',
                  actions: 'restartCooling',
                },
                { guard: 'isProbeResult', target: 'waiting', actions: 'freeProbe' },
              ],
              'key.tripped': { target: 'waiting', actions: 'quarantine' },
              'key.synced': {
                guard: and(['isSyncedQuarantined', 'isSyncedChange']),
                target: 'waiting',
                actions: 'adoptShared',
              },
            },
          },
        },
      },
      /** Rate limited: refused until the upstream's `Retry-After`, then one probe. */
      cooling: {
        initial: 'waiting',
        on: {
          'key.failed': { guard: 'isQuarantineClass', target: 'quarantined', actions: 'quarantine' },
          'key.tripped': { target: 'quarantined', actions: 'quarantine' },
          'key.synced': { guard: 'isSyncedCooling' },
        },
        states: {
          /** Every call is skipped until `until`; the first call after it is the probe. */
          waiting: {
            on: {
              'key.called': { guard: 'isUntilPassed', target: 'probing', actions: 'holdProbe' },
              /** Another rate limit: `until` moves to the later of the two, never earlier. */
              'key.failed': { guard: 'isCoolingClass', actions: 'cool' },
              'key.synced': {
                guard: and(['isSyncedCooling', 'isSyncedChange']),
                target: 'waiting',
                reenter: true,
                actions: 'adoptShared',
              },
            },
          },
          /** One probe is in flight; every other call is skipped until it ends. */
          probing: {
            on: {
              'key.answered': {
                guard: 'isProbeResult',
                target: '#keyHealth.healthy',
                actions: 'markHealthy',
              },
              'key.failed': [
                {
                  guard: and(['isProbeResult', 'isQuarantineClass']),
                  target: '#keyHealth.quarantined',
                  actions: 'restartQuarantine',
                },
                {
                  guard: and(['isProbeResult', 'isCoolingClass']),
                  target: 'waiting',
                  actions: 'restartCooling',
                },
                { guard: 'isProbeResult', target: 'waiting', actions: 'freeProbe' },
              ],
              'key.synced': {
                guard: and(['isSyncedCooling', 'isSyncedChange']),
                target: 'waiting',
                actions: 'adoptShared',
              },
            },
          },
        },
      },
    },
  });
}

/** The key machine on docs/errors.md's table. */
export const keyHealthMachine = createKeyHealthMachine(errorPolicy);

export type KeyHealthMachine = typeof keyHealthMachine;
