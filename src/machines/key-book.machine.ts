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
import { LRUCache } from 'lru-cache';
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
  /** 0 turns per-key health off: no quarantine, no cooling (docs/api.md). */
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

/** The refused keys as the guards and views read them: without touching their recency. */
export interface KeyEntries {
  peek(keyId: string): KeyEntry | undefined;
  /** Tracked keys by state: refused, or awaiting their probe (O(1): kept as entries come and go). */
  readonly counts: { readonly quarantined: number; readonly cooling: number };
}

/** One tracked key: its machine state, and the time (epoch ms, the book's event time) it is forgotten at. */
interface TrackedKey {
  readonly entry: KeyEntry;
  readonly forgetAt: number;
}

/**
 * The refused keys of one provider: an LRU map (lru-cache) of at most `maxKeys`, each entry kept until
 * its `forgetAt` (a quarantine after its `until`: a refusal long past that no call came to probe; the
 * book's `key.expired` event forgets it), counting its entries by state as they come and go, so every
 * read is O(1) however many keys are refused (walking 10 000 of them took 47 ms, and `/v1/providers`,
 * `/metrics` and the page's stream read the counts every second). It reads no clock: the times it
 * holds and compares are the book's events' `at`.
 */
export class RefusedKeys implements KeyEntries {
  readonly counts = { quarantined: 0, cooling: 0 };
  readonly #cache: LRUCache<string, TrackedKey>;

  constructor(maxKeys: number) {
    this.#cache = new LRUCache<string, TrackedKey>({
      max: Math.max(1, maxKeys),
      dispose: (tracked) => this.#count(tracked.entry, -1),
    });
  }

  #count(entry: KeyEntry, delta: number): void {
    const state = stateNameOf(entry.value);
    if (state !== 'healthy') this.counts[state] += delta;
  }

  peek(keyId: string): KeyEntry | undefined {
    return this.#cache.peek(keyId)?.entry;
  }

  /** When the key is forgotten (epoch ms), if it is tracked. */
  forgetAt(keyId: string): number | undefined {
    return this.#cache.peek(keyId)?.forgetAt;
  }

  has(keyId: string): boolean {
    return this.#cache.has(keyId);
  }

  /** The entry, now the most recently touched. */
  touch(keyId: string): KeyEntry | undefined {
    return this.#cache.get(keyId)?.entry;
  }

  /** Keeps `entry` until `forgetAt` (a replaced or evicted entry leaves the counts through `dispose`). */
  set(keyId: string, entry: KeyEntry, forgetAt: number): void {
    this.#cache.set(keyId, { entry, forgetAt });
    this.#count(entry, 1);
  }

  delete(keyId: string): void {
    this.#cache.delete(keyId);
  }

  get size(): number {
    return this.#cache.size;
  }

  /** The tracked key ids, most recently touched first (tests). */
  ids(): string[] {
    return [...this.#cache.keys()];
  }
}

export interface KeyBookContext extends KeyBookInput {
  /**
   * The keys that are not healthy, by salted fingerprint: an LRU map (lru-cache) of at most `maxKeys`,
   * each entry expiring a quarantine after its `until`. A healthy key has no entry (nothing is kept of
   * keys that work). It is the one store the book updates in place: O(1) per event however many keys
   * are refused (a copied record cost 40 ms per event at 10 000 keys), and `version` counts the updates.
   */
  readonly keys: RefusedKeys;
  readonly version: number;
  readonly keyLink: ActorRefFrom<typeof embeddedKeyLink>;
}

/** Every key event, addressed to one key by its salted fingerprint. */
export type KeyBookEvent = KeyHealthEvent & { keyId: string };

/**
 * The book's own delayed event: a tracked key's time to be forgotten has come (`at`, epoch ms, is the
 * time it was due). Raised with a delay when the key is kept, cancelled when it changes or leaves.
 */
export type KeyExpiredEvent = { type: 'key.expired'; keyId: string; at: number };

/** Node's timers hold at most 2^31 − 1 ms (~24.8 days); a longer wait is raised again for the rest. */
const maxTimerMs = 2_147_483_647;

/** The id of a key's scheduled `key.expired` (one per key: a newer one cancels the last). */
const expiryId = (keyId: string): string => `expiry.${keyId}`;

/** Why a call with a key is skipped without an upstream call (docs/api.md Attempt `reason`). */
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
export function keyAdmission(keys: KeyEntries, keyId: string, at: number): KeyAdmission {
  return entryAdmission(keys.peek(keyId), at);
}

function entryAdmission(entry: KeyEntry | undefined, at: number): KeyAdmission {
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
export function keyHealthView(keys: KeyEntries, keyId: string, now: number): KeyHealthView {
  return viewOf(keyAdmission(keys, keyId, now));
}

function viewOf(admission: KeyAdmission): KeyHealthView {
  if (admission.admit) return { state: 'healthy' };
  return {
    state: admission.reason === 'key_quarantined' ? 'quarantined' : 'cooling',
    errorClass: admission.errorClass,
    until: admission.until,
  };
}

/**
 * How many keys are refused, by state (counts only: never which keys). A key whose `until` has passed
 * counts until its probe answers (or its entry is dropped): it is not known to work yet.
 */
export function refusedKeyCounts(keys: KeyEntries): { quarantined: number; cooling: number } {
  return { ...keys.counts };
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
 * forgets a refusal long past (a quarantine after its `until`) that no call came to probe. Every change
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
  /**
   * Kept until a quarantine after its `until`: then long past and never probed. A refusal already that
   * old (a fleet record) is forgotten at the next tick: its `key.expired` waits no time.
   */
  const forgetAtOf = (context: KeyBookContext, entry: KeyEntry, at: number): number =>
    (entry.context.until ?? at) + context.quarantineMs;
  /** `key.expired` for `keyId` when `forgetAt` comes, from `at` (the time of the event that kept it). */
  const expiry = (keyId: string, forgetAt: number, at: number) => {
    const delay = Math.min(forgetAt - at, maxTimerMs);
    return { event: { type: 'key.expired', keyId, at: at + delay } satisfies KeyExpiredEvent, delay };
  };

  return setup({
    types: {
      input: {} as KeyBookInput,
      context: {} as KeyBookContext,
      events: {} as KeyBookEvent | KeyLinkReply | KeyExpiredEvent,
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
      isTracked: ({ context, event }) => context.keys.has(event.keyId),
      /** The event refuses a healthy key: a failure whose class column K names, a trip, a fleet refusal. */
      isRefusal: ({ event }) =>
        (event.type === 'key.failed' && keyVerdictInTable(table, event.errorClass) !== 'none') ||
        event.type === 'key.tripped' ||
        (event.type === 'key.synced' && event.shared.state !== 'healthy'),
    },
    actions: {
      /**
       * Step the key's machine; keep it (most recently touched) unless healthy, the least recently touched
       * key beyond `maxKeys` forgotten by the LRU map; tell the fleet what changed.
       */
      stepKey: enqueueActions(({ context, event, enqueue }) => {
        if (event.type === 'key.expired') return;
        const entry = context.keys.touch(event.keyId);
        const next = step(context, entry, event);
        const before = entry === undefined ? undefined : sharedOf(entry);
        const after = sharedOf(next);
        enqueue.cancel(expiryId(event.keyId));
        if (after.state === 'healthy') context.keys.delete(event.keyId);
        else {
          const forgetAt = forgetAtOf(context, next, event.at);
          context.keys.set(event.keyId, next, forgetAt);
          const { event: expired, delay } = expiry(event.keyId, forgetAt, event.at);
          enqueue.raise(expired, { id: expiryId(event.keyId), delay });
        }
        enqueue.assign({ version: context.version + 1 });
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
      /**
       * Forget a key whose `forgetAt` has come (it leaves the counts); one not yet due (a wait longer
       * than a timer holds) waits again for the rest. The fleet is not told: nothing about the key changed.
       */
      forgetKey: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'key.expired') return;
        const forgetAt = context.keys.forgetAt(event.keyId);
        if (forgetAt === undefined) return;
        if (forgetAt <= event.at) {
          context.keys.delete(event.keyId);
          enqueue.assign({ version: context.version + 1 });
          return;
        }
        const { event: expired, delay } = expiry(event.keyId, forgetAt, event.at);
        enqueue.raise(expired, { id: expiryId(event.keyId), delay });
      }),
    },
  }).createMachine({
    id: 'keyBook',
    context: ({ input, spawn }) => ({
      ...input,
      keys: new RefusedKeys(input.maxKeys),
      version: 0,
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
          /** A refusal long past that no call came to probe: forgotten (`forgetKey`). */
          'key.expired': { actions: 'forgetKey' },
        },
      },
    },
  });
}

/** The key book on docs/errors.md's table. */
export const keyBookMachine = createKeyBookMachine(errorPolicy);

export type KeyBookMachine = typeof keyBookMachine;
