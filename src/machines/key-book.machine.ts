import {
  and,
  enqueueActions,
  initialTransition,
  or,
  setup,
  transition,
  type ActorRefFrom,
  type StateValue,
} from 'xstate';
import { errorPolicy, keyVerdictInTable, type ErrorClass, type ErrorTable } from '../errors/index.js';
import {
  createKeyHealthMachine,
  type KeyHealthContext,
  type KeyHealthEvent,
  type SharedKeyHealth,
} from './key-health.machine.js';
import { embeddedKeyLink, type KeyLinkReply } from './key-link.js';
import type { ProviderId } from './types.js';

/** Per-key health settings (KEY_QUARANTINE_MS, KEY_COOLING_MS, KEY_HEALTH_MAX_KEYS). */
export interface KeyHealthSettings {
  /** 0 turns per-key health off: no quarantine, no cooling (API.md). */
  readonly quarantineMs: number;
  readonly coolingMs: number;
  /** The most keys one provider's book tracks; the least recently touched is forgotten first. */
  readonly maxKeys: number;
}

/** Per-key health off: what a provider gets when none is configured. */
export const keyHealthOff: KeyHealthSettings = { quarantineMs: 0, coolingMs: 0, maxKeys: 0 };

export interface KeyBookInput extends KeyHealthSettings {
  readonly providerId: ProviderId;
}

/** One key's machine state as the book keeps it: the key machine's state value and context. */
export interface KeyEntry {
  readonly value: StateValue;
  readonly context: KeyHealthContext;
}

export interface KeyBookContext extends KeyBookInput {
  /**
   * The keys that are not healthy, by salted fingerprint, least recently touched first. A healthy key
   * has no entry (nothing is kept of keys that work), so the book holds at most `maxKeys` refused keys.
   */
  readonly keys: Readonly<Record<string, KeyEntry>>;
  readonly keyLink: ActorRefFrom<typeof embeddedKeyLink>;
}

/** Every key event, addressed to one key by its salted fingerprint. */
export type KeyBookEvent = KeyHealthEvent & { keyId: string };

/** Why a call with a key is skipped without an upstream call (API.md Attempt `reason`). */
export type KeySkipReason = 'key_quarantined' | 'key_cooling';

export type KeyAdmission =
  | { readonly admit: true }
  | {
      readonly admit: false;
      readonly reason: KeySkipReason;
      readonly errorClass: ErrorClass;
      readonly until: number;
    };

/** What `GET /v1/keys/status` and the counts show of one key. */
export interface KeyHealthView {
  readonly state: SharedKeyHealth['state'];
  readonly errorClass?: ErrorClass;
  /** Epoch ms until which the key is refused. */
  readonly until?: number;
}

function stateNameOf(value: StateValue): SharedKeyHealth['state'] {
  if (typeof value === 'string') return 'healthy';
  if ('quarantined' in value) return 'quarantined';
  if ('cooling' in value) return 'cooling';
  return 'healthy';
}

/** Waiting (not probing) past `until`: the next call with the key goes out as its probe. */
function isProbeDue(entry: KeyEntry, at: number): boolean {
  const value = entry.value;
  const waiting =
    typeof value === 'object' && (value['quarantined'] === 'waiting' || value['cooling'] === 'waiting');
  return waiting && entry.context.until !== null && at >= entry.context.until;
}

/** The book's answer for a call with `keyId` at `at`: go out, or be skipped (and why). */
export function keyAdmission(keys: KeyBookContext['keys'], keyId: string, at: number): KeyAdmission {
  const entry = Object.hasOwn(keys, keyId) ? keys[keyId] : undefined;
  if (entry === undefined || isProbeDue(entry, at)) return { admit: true };
  const state = stateNameOf(entry.value);
  if (state === 'healthy' || entry.context.errorClass === null || entry.context.until === null)
    return { admit: true };
  return {
    admit: false,
    reason: state === 'quarantined' ? 'key_quarantined' : 'key_cooling',
    errorClass: entry.context.errorClass,
    until: entry.context.until,
  };
}

/** A key's health at `now`: a refusal whose `until` has passed shows `healthy` (the next call goes out). */
export function keyHealthView(keys: KeyBookContext['keys'], keyId: string, now: number): KeyHealthView {
  const admission = keyAdmission(keys, keyId, now);
  if (admission.admit) return { state: 'healthy' };
  return {
    state: admission.reason === 'key_quarantined' ? 'quarantined' : 'cooling',
    errorClass: admission.errorClass,
    until: admission.until,
  };
}

/** How many keys are refused now, by state (counts only: never which keys). */
export function refusedKeyCounts(
  keys: KeyBookContext['keys'],
  now: number,
): { quarantined: number; cooling: number } {
  const counts = { quarantined: 0, cooling: 0 };
  for (const keyId of Object.keys(keys)) {
    const view = keyHealthView(keys, keyId, now);
    if (view.state !== 'healthy') counts[view.state] += 1;
  }
  return counts;
}

function sharedOf(entry: KeyEntry): SharedKeyHealth {
  return {
    state: stateNameOf(entry.value),
    errorClass: entry.context.errorClass,
    until: entry.context.until,
  };
}

/**
 * The bounded map of one provider's key health: each refused key's own machine (key-health.machine.ts)
 * is stepped with the pure `transition()`, so the book holds plain data (state value and context),
 * drops a key as soon as it is healthy, forgets the least recently touched key beyond `maxKeys`, and
 * forgets a refusal long past (`until` plus a quarantine ago) that no call came to probe. Every change
 * made here is reported to the key link (the fleet store, when configured); a change heard from the
 * fleet (`key.synced`) is adopted, never echoed back.
 */
export function createKeyBookMachine(table: ErrorTable) {
  const keyMachine = createKeyHealthMachine(table);
  const step = (context: KeyBookContext, entry: KeyEntry | undefined, event: KeyBookEvent): KeyEntry => {
    const [snapshot] =
      entry === undefined
        ? initialTransition(keyMachine, {
            keyId: event.keyId,
            quarantineMs: context.quarantineMs,
            coolingMs: context.coolingMs,
          })
        : [keyMachine.resolveState({ value: entry.value, context: entry.context })];
    const { keyId: _keyId, ...keyEvent } = event;
    const [next] = transition(keyMachine, snapshot, keyEvent as KeyHealthEvent);
    return { value: next.value, context: next.context };
  };
  /** Long past and never probed: nothing left to remember. */
  const isStale = (context: KeyBookContext, entry: KeyEntry, at: number): boolean =>
    entry.context.until !== null && entry.context.until + context.quarantineMs < at;

  return setup({
    types: {
      input: {} as KeyBookInput,
      context: {} as KeyBookContext,
      events: {} as KeyBookEvent | KeyLinkReply,
      children: {} as { keyLink: 'keyLink' },
    },
    actors: {
      /** Replaced (`.provide`) by `createKeyLink` when a fleet store is configured. */
      keyLink: embeddedKeyLink,
    },
    guards: {
      /** KEY_QUARANTINE_MS=0 turns per-key health off. */
      isEnabled: ({ context }) => context.quarantineMs > 0 && context.maxKeys > 0,
      /** The key already has an entry (it is refused, or its probe is due or in flight). */
      isTracked: ({ context, event }) => Object.hasOwn(context.keys, event.keyId),
      /** The event refuses a healthy key: a failure whose class column K names, a trip, a fleet refusal. */
      isRefusal: ({ event }) =>
        (event.type === 'key.failed' && keyVerdictInTable(table, event.errorClass) !== 'none') ||
        event.type === 'key.tripped' ||
        (event.type === 'key.synced' && event.shared.state !== 'healthy'),
    },
    actions: {
      /** Step the key's machine; keep it (most recent last) unless healthy; bound the book; tell the fleet. */
      stepKey: enqueueActions(({ context, event, enqueue }) => {
        const { [event.keyId]: entry, ...others } = context.keys;
        const next = step(context, entry, event);
        const before = entry === undefined ? undefined : sharedOf(entry);
        const after = sharedOf(next);
        // A new key may push old ones out: first what is long past, then the least recently touched.
        const ids = Object.keys(others).filter(
          (id) => entry !== undefined || !isStale(context, others[id] as KeyEntry, event.at),
        );
        const room = context.maxKeys - (after.state === 'healthy' ? 0 : 1);
        const keep: Record<string, KeyEntry> = {};
        for (const id of ids.slice(Math.max(0, ids.length - room))) keep[id] = others[id] as KeyEntry;
        if (after.state !== 'healthy') keep[event.keyId] = next;
        enqueue.assign({ keys: keep });
        const changed =
          before === undefined
            ? after.state !== 'healthy'
            : before.state !== after.state ||
              before.until !== after.until ||
              before.errorClass !== after.errorClass;
        if (changed && event.type !== 'key.synced') {
          enqueue.sendTo(context.keyLink, {
            type: 'key.report',
            keyId: event.keyId,
            shared: after,
            at: event.at,
          });
        }
      }),
    },
  }).createMachine({
    id: 'keyBook',
    context: ({ input, spawn }) => ({
      ...input,
      keys: {},
      keyLink: spawn('keyLink', { id: 'keyLink', input: { providerId: input.providerId } }),
    }),
    initial: 'tracking',
    states: {
      /** Always tracking: only events about a refused key, or ones that refuse a key, touch the book. */
      tracking: {
        on: {
          'key.called': { guard: and(['isEnabled', 'isTracked']), actions: 'stepKey' },
          'key.answered': { guard: and(['isEnabled', 'isTracked']), actions: 'stepKey' },
          'key.failed': { guard: and(['isEnabled', or(['isTracked', 'isRefusal'])]), actions: 'stepKey' },
          'key.tripped': { guard: 'isEnabled', actions: 'stepKey' },
          'key.synced': { guard: and(['isEnabled', or(['isTracked', 'isRefusal'])]), actions: 'stepKey' },
        },
      },
    },
  });
}

/** The key book on ERRORS.md's table. */
export const keyBookMachine = createKeyBookMachine(errorPolicy);

export type KeyBookMachine = typeof keyBookMachine;
