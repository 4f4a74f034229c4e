import { and, assign, emit, or, sendTo, setup, type AnyActorRef } from 'xstate';
import { errorPolicy, keyVerdictInTable, type ErrorClass, type ErrorTable } from '../errors/index.js';
import type { CallRequest } from './call-request.js';
import { recoveryRule } from './recovery-rule.js';

/**
 * The health of ONE caller key for one provider (docs/api.md "key health"): `healthy`, `quarantined` (auth,
 * permission, quota: the key is refused for KEY_QUARANTINE_MS) or `cooling` (rate limited: refused until
 * the upstream's `Retry-After`, else KEY_COOLING_MS). While refused, calls with the key are skipped
 * without an upstream call; once `until` has passed, ONE call is let through as the key's probe, whose
 * result alone decides. Which class does what is column K of the error table. Time lives in the data
 * (`until`, events carry `at`): no timer, so a record read back from the fleet store works as it is.
 * Each refused key runs as an actor of its own, a child of its provider's key book (key-book.machine.ts):
 * it answers `key.admit` itself (`key.admitted` / `key.refused`, to the asker) and emits `key.changed`
 * after each change of its health, for the book to count, share with the fleet, and stop once healthy.
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

/** Why a call with a key is skipped without an upstream call (docs/api.md Attempt `reason`). */
export type KeySkipReason = 'key_quarantined' | 'key_cooling';

/**
 * What a call's attempt tells a key (through the key book). Every finished call arrives with its
 * class (`key.failed`), counted or not: column K of the table decides what it does to the key.
 */
export type KeyHealthEvent =
  /**
   * May this call go out with the key? The key answers `replyTo` (`KeyAnswer`) and changes nothing: the
   * probe is taken on `key.called`, once the breaker admitted the call too.
   */
  | { type: 'key.admit'; call: CallRequest; replyTo: AnyActorRef; at: number }
  | { type: 'key.called'; callId: string; at: number }
  | { type: 'key.answered'; callId: string; at: number }
  | { type: 'key.failed'; callId: string; errorClass: ErrorClass; retryAfterMs?: number; at: number }
  /**
   * A failure streak from this key alone (too few voters for the provider's breaker quorum, so one bad
   * key cannot open the provider for everyone): the key gets its own open circuit, a quarantine of
   * `periodMs` (default KEY_QUARANTINE_MS).
   */
  | { type: 'key.tripped'; errorClass: ErrorClass; periodMs?: number; at: number }
  /** Another instance changed the key's health: adopt it. */
  | { type: 'key.synced'; shared: SharedKeyHealth; at: number };

/** The key's answer to `key.admit`, sent to its `replyTo` (the call's attempt). */
export type KeyAnswer =
  | { type: 'key.admitted'; call: CallRequest }
  | {
      type: 'key.refused';
      call: CallRequest;
      reason: KeySkipReason;
      /** The class that made the key unhealthy. */
      errorClass: ErrorClass;
      /** Epoch ms until which the key is refused. */
      until: number;
    };

/**
 * What a key emits after each change of its health (its holder, the key book, listens): the health as
 * the fleet holds it, and whether it came from the fleet (`key.synced`: adopted, never echoed back).
 */
export type KeyChangedEvent = {
  type: 'key.changed';
  keyId: string;
  shared: SharedKeyHealth;
  fromFleet: boolean;
  at: number;
};

type FailedEvent = Extract<KeyHealthEvent, { type: 'key.failed' }>;
type AdmitEvent = Extract<KeyHealthEvent, { type: 'key.admit' }>;

/** What `tellChange` says: the key's health now, in `state` (the state its transition entered). */
export function keyChanged(
  { context, event }: { context: KeyHealthContext; event: KeyHealthEvent },
  params: { state: SharedKeyHealth['state'] },
): KeyChangedEvent {
  return {
    type: 'key.changed',
    keyId: context.keyId,
    shared: { state: params.state, errorClass: context.errorClass, until: context.until },
    fromFleet: event.type === 'key.synced',
    at: event.at,
  };
}

/** The emitted `key.changed` after an action that may change the key's health, into `state`. */
const changedTo = (state: SharedKeyHealth['state']) => ({ type: 'tellChange' as const, params: { state } });
const refuseAs = (reason: KeySkipReason) => ({ type: 'refuseCall' as const, params: { reason } });

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
      emitted: {} as KeyChangedEvent,
    },
    guards: {
      /** Column K: the failure quarantines the key (auth, permission, quota_exhausted). */
      isQuarantineClass: ({ event }) => verdictOf(event) === 'quarantine',
      /** Column K: the failure cools the key (rate_limited). */
      isCoolingClass: ({ event }) => verdictOf(event) === 'cool',
      /** The result belongs to the call let through as this key's probe. */
      isProbeResult: ({ context, event }) =>
        recoveryRule.isProbeResult(context.probeCallId, 'callId' in event ? event.callId : undefined),
      /** Time lives in the data: the refusal has ended, so this call is the key's probe. */
      isUntilPassed: ({ context, event }) => recoveryRule.isDue(context.until, event.at),
      /** A refusal it cannot date or name (a fleet record without `until` or class): it refuses no call. */
      isUndated: ({ context }) => context.until === null || context.errorClass === null,
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
      /**
       * Tell the key's holder its health now (after the action that changed it): emitted here; a key
       * held by a key book tells its parent instead (key-book.machine.ts provides `tellChange`).
       */
      tellChange: emit(keyChanged),
      /** This call may go out with the key. */
      admitCall: sendTo(
        ({ event }) => admitEvent(event).replyTo,
        ({ event }): KeyAnswer => ({ type: 'key.admitted', call: admitEvent(event).call }),
      ),
      /** This call is skipped: the key is refused, for `reason`, by its class, until `until`. */
      refuseCall: sendTo(
        ({ event }) => admitEvent(event).replyTo,
        ({ context, event }, params: { reason: KeySkipReason }): KeyAnswer => ({
          type: 'key.refused',
          call: admitEvent(event).call,
          reason: params.reason,
          // Dated and named: an undated refusal admits (`isUndated` is asked first).
          errorClass: context.errorClass as ErrorClass,
          until: context.until ?? event.at,
        }),
      ),
    },
  }).createMachine({
    id: 'keyHealth',
    context: ({ input }) => ({ ...input, errorClass: null, until: null, probeCallId: null }),
    initial: 'healthy',
    on: {
      /** The fleet's record of another state than this key's: the states below take only their own kind. */
      'key.synced': [
        { guard: 'isSyncedHealthy', target: '.healthy', actions: ['markHealthy', changedTo('healthy')] },
        {
          guard: 'isSyncedQuarantined',
          target: '.quarantined',
          actions: ['adoptShared', changedTo('quarantined')],
        },
        { guard: 'isSyncedCooling', target: '.cooling', actions: ['adoptShared', changedTo('cooling')] },
      ],
    },
    states: {
      /** Calls with the key go out; a user-side failure of the key refuses it. */
      healthy: {
        tags: ['admitting'],
        on: {
          'key.admit': { actions: 'admitCall' },
          'key.failed': [
            { guard: 'isQuarantineClass', target: 'quarantined', actions: ['quarantine', changedTo('quarantined')] },
            { guard: 'isCoolingClass', target: 'cooling', actions: ['cool', changedTo('cooling')] },
          ],
          'key.tripped': { target: 'quarantined', actions: ['quarantine', changedTo('quarantined')] },
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
              /** Past `until`, a call may go out as the probe (taken on `key.called`); before, skipped. */
              'key.admit': [
                { guard: or(['isUntilPassed', 'isUndated']), actions: 'admitCall' },
                { actions: refuseAs('key_quarantined') },
              ],
              'key.called': { guard: 'isUntilPassed', target: 'probing', actions: 'holdProbe' },
              /** A call started before the quarantine failed too: never shortens it. */
              'key.failed': { guard: 'isQuarantineClass', actions: ['quarantine', changedTo('quarantined')] },
              'key.tripped': { actions: ['quarantine', changedTo('quarantined')] },
              'key.synced': {
                guard: and(['isSyncedQuarantined', 'isSyncedChange']),
                target: 'waiting',
                reenter: true,
                actions: ['adoptShared', changedTo('quarantined')],
              },
            },
          },
          /** One probe is in flight; every other call is skipped until it ends. */
          probing: {
            on: {
              'key.admit': [
                { guard: 'isUndated', actions: 'admitCall' },
                { actions: refuseAs('key_quarantined') },
              ],
              'key.answered': {
                guard: 'isProbeResult',
                target: '#keyHealth.healthy',
                actions: ['markHealthy', changedTo('healthy')],
              },
              'key.failed': [
                {
                  guard: and(['isProbeResult', 'isQuarantineClass']),
                  target: 'waiting',
                  actions: ['restartQuarantine', changedTo('quarantined')],
                },
                {
                  guard: and(['isProbeResult', 'isCoolingClass']),
                  target: '#keyHealth.cooling',
                  actions: ['restartCooling', changedTo('cooling')],
                },
                { guard: 'isProbeResult', target: 'waiting', actions: 'freeProbe' },
              ],
              'key.tripped': { target: 'waiting', actions: ['quarantine', changedTo('quarantined')] },
              'key.synced': {
                guard: and(['isSyncedQuarantined', 'isSyncedChange']),
                target: 'waiting',
                actions: ['adoptShared', changedTo('quarantined')],
              },
            },
          },
        },
      },
      /** Rate limited: refused until the upstream's `Retry-After`, then one probe. */
      cooling: {
        initial: 'waiting',
        on: {
          'key.failed': {
            guard: 'isQuarantineClass',
            target: 'quarantined',
            actions: ['quarantine', changedTo('quarantined')],
          },
          'key.tripped': { target: 'quarantined', actions: ['quarantine', changedTo('quarantined')] },
          'key.synced': { guard: 'isSyncedCooling' },
        },
        states: {
          /** Every call is skipped until `until`; the first call after it is the probe. */
          waiting: {
            on: {
              /** Past `until`, a call may go out as the probe (taken on `key.called`); before, skipped. */
              'key.admit': [
                { guard: or(['isUntilPassed', 'isUndated']), actions: 'admitCall' },
                { actions: refuseAs('key_cooling') },
              ],
              'key.called': { guard: 'isUntilPassed', target: 'probing', actions: 'holdProbe' },
              /** Another rate limit: `until` moves to the later of the two, never earlier. */
              'key.failed': { guard: 'isCoolingClass', actions: ['cool', changedTo('cooling')] },
              'key.synced': {
                guard: and(['isSyncedCooling', 'isSyncedChange']),
                target: 'waiting',
                reenter: true,
                actions: ['adoptShared', changedTo('cooling')],
              },
            },
          },
          /** One probe is in flight; every other call is skipped until it ends. */
          probing: {
            on: {
              'key.admit': [
                { guard: 'isUndated', actions: 'admitCall' },
                { actions: refuseAs('key_cooling') },
              ],
              'key.answered': {
                guard: 'isProbeResult',
                target: '#keyHealth.healthy',
                actions: ['markHealthy', changedTo('healthy')],
              },
              'key.failed': [
                {
                  guard: and(['isProbeResult', 'isQuarantineClass']),
                  target: '#keyHealth.quarantined',
                  actions: ['restartQuarantine', changedTo('quarantined')],
                },
                {
                  guard: and(['isProbeResult', 'isCoolingClass']),
                  target: 'waiting',
                  actions: ['restartCooling', changedTo('cooling')],
                },
                { guard: 'isProbeResult', target: 'waiting', actions: 'freeProbe' },
              ],
              'key.synced': {
                guard: and(['isSyncedCooling', 'isSyncedChange']),
                target: 'waiting',
                actions: ['adoptShared', changedTo('cooling')],
              },
            },
          },
        },
      },
    },
  });
}

function admitEvent(event: KeyHealthEvent): AdmitEvent {
  if (event.type !== 'key.admit') throw new Error(`An admission answered ${event.type}`);
  return event;
}

/** The key machine on docs/errors.md's table. */
export const keyHealthMachine = createKeyHealthMachine(errorPolicy);

