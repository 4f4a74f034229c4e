import {
  and,
  assign,
  enqueueActions,
  not,
  sendParent,
  sendTo,
  setup,
  stopChild,
  transition,
  type ActorRefFrom,
  type StateValue,
} from 'xstate';
import { EmptyBTree } from 'sorted-btree';
import type * as sortedBtree from 'sorted-btree';
import { errorPolicy, keyVerdictInTable, type ErrorClass, type ErrorTable } from '../errors/index.js';
import { askingCall } from './asking-call.js';
import {
  createKeyHealthMachine,
  keyChanged,
  keyHealthMachine,
  type KeyAnswer,
  type KeyChangedEvent,
  type KeyHealthContext,
  type KeyHealthEvent,
  type KeyHealthInput,
  type SharedKeyHealth,
} from './key-health.machine.js';
import { embeddedKeyLink, type KeyLinkReply } from './key-link.js';
import type { ProviderId } from './types.js';

/** Per-key health settings (KEY_QUARANTINE_MS, KEY_COOLING_MS; at most 10 000 keys: docs/configuration.md "Derived limits"). */
export interface KeyHealthSettings {
  /** 0 turns per-key health off: no quarantine, no cooling (docs/api.md). */
  readonly quarantineMs: number;
  readonly coolingMs: number;
  /** The most keys one provider's book tracks; the least recently touched is forgotten first. */
  readonly maxKeys: number;
}

/** Per-key health off: what a provider gets when none is configured. */
export const keyHealthOff: KeyHealthSettings = { quarantineMs: 0, coolingMs: 0, maxKeys: 0 };

interface KeyBookInput extends KeyHealthSettings {
  readonly providerId: ProviderId;
}

/** Every key event, addressed to one key by its salted fingerprint. */
export type KeyBookEvent = KeyHealthEvent & { keyId: string };

/**
 * What a shelf is told by its book: hold a key's actor (`key.hold`), let it go (`key.release`), or pass
 * a key event on to it; and what its keys tell it (`key.changed`, passed up to the book).
 */
type KeyShelfEvent =
  | { type: 'key.hold'; keyId: string; input: KeyHealthInput }
  | { type: 'key.release'; keyId: string }
  | KeyBookEvent
  | KeyChangedEvent;

/** A key's actor id among its shelf's children. */
export const keyActorId = (keyId: string): string => `key.${keyId}`;

/**
 * The key machine as a shelf runs it: each change of a key's health goes to its parent (the shelf,
 * which passes it up to the book) instead of being emitted.
 */
function createHeldKeyMachine(table: ErrorTable) {
  return createKeyHealthMachine(table).provide({
    actions: { tellChange: sendParent(keyChanged) },
  });
}

/**
 * A shelf of key actors, a child of the key book: it spawns and stops the keys its book assigns it
 * (`key.hold`, `key.release`), passes each key event on to its key, and each key's `key.changed` up to
 * the book. The book keeps its refused keys on shelves of ~16 (`shelfCount`) rather than as direct
 * children because XState copies an actor's `children` on every spawn and stop: with 10 000 keys as the
 * book's own children each refusal would cost in proportion to them (docs/performance.md). The shelf
 * decides nothing.
 */
function createKeyShelfMachine(table: ErrorTable) {
  return setup({
    types: {
      events: {} as KeyShelfEvent,
    },
    actors: {
      key: createHeldKeyMachine(table),
    },
    actions: {
      holdKey: enqueueActions(({ event, enqueue }) => {
        if (event.type !== 'key.hold') return;
        enqueue.spawnChild('key', { id: keyActorId(event.keyId), input: event.input });
      }),
      releaseKey: stopChild(({ event }) => keyActorId(event.keyId)),
      passToKey: sendTo(
        ({ event }) => keyActorId(event.keyId),
        ({ event }) => event,
      ),
      passToBook: sendParent(({ event }) => event),
    },
  }).createMachine({
    id: 'keyShelf',
    initial: 'holding',
    states: {
      holding: {
        on: {
          'key.hold': { actions: 'holdKey' },
          'key.release': { actions: 'releaseKey' },
          'key.admit': { actions: 'passToKey' },
          'key.called': { actions: 'passToKey' },
          'key.answered': { actions: 'passToKey' },
          'key.failed': { actions: 'passToKey' },
          'key.tripped': { actions: 'passToKey' },
          'key.synced': { actions: 'passToKey' },
          'key.changed': { actions: 'passToBook' },
        },
      },
    },
  });
}

/** @public The shelf on docs/errors.md's table, for the generated machine docs (scripts/generate-machine-docs.ts reads it by name). */
export const keyShelfMachine = createKeyShelfMachine(errorPolicy);

type ShelfRef = ActorRefFrom<ReturnType<typeof createKeyShelfMachine>>;

/** Keys per shelf, on average, once the book is full. */
const keysPerShelf = 16;
/** The most shelves a book spawns (each spawned once, when its first key comes). */
const maxShelves = 1024;

/**
 * How many shelves a book of `maxKeys` spreads its keys over: a key's spawn and stop copy its shelf's
 * children (~16), a shelf's first spawn copies the book's (at most 1 024, once per shelf).
 */
function shelfCount(maxKeys: number): number {
  return Math.min(maxShelves, Math.max(1, Math.ceil(maxKeys / keysPerShelf)));
}

/** One tracked key: its health as its actor last told, its last touch, and when it is forgotten (epoch ms). */
interface TrackedKey {
  readonly shared: SharedKeyHealth;
  readonly touch: number;
  readonly forgetAt: number;
}

/**
 * The book's record of its tracked keys, an immutable value (every change is a new one sharing the rest):
 * by id, by last touch (the first is the least recently touched) and by time to be forgotten (the first
 * is the next), with the counts by state kept as keys come and go, so each event and each read of the
 * counts (`/v1/providers`, `/metrics` and the page, every second) costs O(log keys) or less however many
 * keys are refused. Ordered persistent B+ trees (sorted-btree) rather than a Map and a hand-written heap:
 * `with`/`without` return a new tree and leave the old one as it was.
 */
interface KeyIndex {
  readonly byId: BTree<string, TrackedKey>;
  readonly byTouch: BTree<Stamp, undefined>;
  readonly byForgetAt: BTree<Stamp, undefined>;
  readonly counts: { readonly quarantined: number; readonly cooling: number };
  /** Touches so far: the number of the next one. */
  readonly touches: number;
}

/** sorted-btree's B+ tree (its default export, a CommonJS one: named here for the types). */
type BTree<K, V> = sortedBtree.default<K, V>;
/** A time (or touch) and a key id: ordered by time, then by id. */
type Stamp = readonly [number, string];

/**
 * sorted-btree's class, reached through its frozen empty tree: its default export is a CommonJS one,
 * which Node and Vite hand out differently. Its own comparator orders arrays as strings ("10" < "9").
 */
const Tree = EmptyBTree.constructor as new <K, V>(entries: undefined, compare: (a: K, b: K) => number) => BTree<K, V>;
const byStamp = (a: Stamp, b: Stamp): number => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);

const emptyIndex: KeyIndex = {
  byId: EmptyBTree,
  byTouch: new Tree(undefined, byStamp),
  byForgetAt: new Tree(undefined, byStamp),
  counts: { quarantined: 0, cooling: 0 },
  touches: 0,
};

/**
 * A key not tracked yet: healthy until its actor tells otherwise, never touched, not due to be forgotten
 * (it enters `byForgetAt` when its actor first tells its health).
 */
const untrackedKey: TrackedKey = {
  shared: { state: 'healthy', errorClass: null, until: null },
  touch: -1,
  forgetAt: Number.POSITIVE_INFINITY,
};

function counted(counts: KeyIndex['counts'], shared: SharedKeyHealth, delta: number): KeyIndex['counts'] {
  return shared.state === 'healthy' ? counts : { ...counts, [shared.state]: counts[shared.state] + delta };
}

/** The index with `keyId` tracked (if new) and now the most recently touched. */
function touched(index: KeyIndex, keyId: string): KeyIndex {
  const key = index.byId.get(keyId) ?? untrackedKey;
  return {
    ...index,
    byId: index.byId.with(keyId, { ...key, touch: index.touches }, true),
    byTouch: index.byTouch.without([key.touch, keyId]).with([index.touches, keyId]),
    touches: index.touches + 1,
  };
}

/** The index with what tracked `keyId`'s actor told: its health now, kept until `forgetAt` (recency unchanged). */
function recorded(index: KeyIndex, keyId: string, shared: SharedKeyHealth, forgetAt: number): KeyIndex {
  const key = index.byId.get(keyId) ?? untrackedKey;
  return {
    ...index,
    byId: index.byId.with(keyId, { ...key, shared, forgetAt }, true),
    byForgetAt: index.byForgetAt.without([key.forgetAt, keyId]).with([forgetAt, keyId]),
    counts: counted(counted(index.counts, key.shared, -1), shared, 1),
  };
}

/** The index without `keyId`. */
function untracked(index: KeyIndex, keyId: string): KeyIndex {
  const key = index.byId.get(keyId) ?? untrackedKey;
  return {
    ...index,
    byId: index.byId.without(keyId),
    byTouch: index.byTouch.without([key.touch, keyId]),
    byForgetAt: index.byForgetAt.without([key.forgetAt, keyId]),
    counts: counted(index.counts, key.shared, -1),
  };
}

/** The key id of a tree's first stamp (the least recently touched, the next forgotten; asked only when there is one). */
const firstKeyOf = (tree: BTree<Stamp, undefined>): string => tree.minKey()?.[1] ?? '';

export interface KeyBookContext extends KeyBookInput {
  /**
   * The book's tracked keys (one per key that is not healthy, by salted fingerprint, each with an actor
   * on a shelf): at most `maxKeys`. A healthy key has no actor and no entry (nothing is kept of keys that work).
   */
  readonly keys: KeyIndex;
  /** The shelves by index, each spawned when its first key comes. */
  readonly shelves: readonly (ShelfRef | undefined)[];
  /** When the book's pending `key.expired` is due (book time, epoch ms), if one is pending. */
  readonly expiryDueAt: number | null;
  readonly keyLink: ActorRefFrom<typeof embeddedKeyLink>;
}

/** The shelf a key's actor lives on: fixed by its id. */
function shelfIndexOf(context: KeyBookContext, keyId: string): number {
  let hash = 0;
  for (let index = 0; index < keyId.length; index += 1) hash = (hash * 31 + keyId.charCodeAt(index)) >>> 0;
  return hash % context.shelves.length;
}

/**
 * The book's own delayed event: the earliest tracked key's time to be forgotten has come (`at`, epoch
 * ms, is the time it was due). One is pending while any key is tracked: raised with a delay for the
 * earliest `forgetAt`, raised again (earlier) when a change brings an earlier one.
 */
type KeyExpiredEvent = { type: 'key.expired'; at: number };

/** Every event the book takes. */
type KeyBookMachineEvent = KeyBookEvent | KeyLinkReply | KeyExpiredEvent | KeyChangedEvent;

/** Node's timers hold at most 2^31 − 1 ms (~24.8 days); a longer wait is raised again for the rest. */
const maxTimerMs = 2_147_483_647;

/** The id of the book's one pending `key.expired`. */
const expiryId = 'expiry';

/** What `GET /v1/keys/status` and the counts show of one key. */
export interface KeyHealthView {
  readonly state: SharedKeyHealth['state'];
  readonly errorClass?: ErrorClass;
  /** Epoch ms until which the key is refused. */
  readonly until?: number;
}

/** The key's actor's state, read from its snapshot (views only). */
function peek(book: KeyBookContext, keyId: string): { value: StateValue; context: KeyHealthContext } | undefined {
  const shelf = book.shelves[shelfIndexOf(book, keyId)];
  const key = shelf?.getSnapshot().children[keyActorId(keyId)] as
    | { getSnapshot(): { value: StateValue; context: KeyHealthContext } }
    | undefined;
  return key?.getSnapshot();
}

/**
 * A key's health at `now`, as a view (`GET /v1/keys/status`): the key's machine is asked what it would
 * answer a call now (`key.admit` through the pure `transition`, key-health.machine.ts: its one action
 * sends the answer), so the view follows its admission rule instead of restating it: healthy when
 * untracked or when the key would let the call out (its probe, past `until`), else refused with the
 * class and `until` the refusal carries.
 */
export function keyHealthView(book: KeyBookContext, keyId: string, now: number): KeyHealthView {
  const entry = peek(book, keyId);
  if (entry === undefined) return { state: 'healthy' };
  const call = askingCall('key-status', now);
  const [, [sendAnswer]] = transition(keyHealthMachine, keyHealthMachine.resolveState(entry), {
    type: 'key.admit',
    call,
    replyTo: call.replyTo,
    at: now,
  });
  const answer = (sendAnswer as { params: { event: KeyAnswer } }).params.event;
  if (answer.type === 'key.admitted') return { state: 'healthy' };
  return {
    state: answer.reason === 'key_cooling' ? 'cooling' : 'quarantined',
    errorClass: answer.errorClass,
    until: answer.until,
  };
}

/**
 * How many keys are refused, by state (counts only: never which keys). A key whose `until` has passed
 * counts until its probe answers (or it is forgotten): it is not known to work yet.
 */
export function refusedKeyCounts(book: KeyBookContext): { quarantined: number; cooling: number } {
  return { ...book.keys.counts };
}

/**
 * The key book of one provider: each key that is not healthy is a key-health actor of its own
 * (key-health.machine.ts), spawned when an event refuses an untracked key, on one of the book's shelves.
 * The book routes every event about a tracked key to its actor, answers `key.admit` for an untracked key
 * at once (`key.admitted`; a tracked key's actor answers itself), and hears each change from the key
 * (`key.changed`): it keeps the counts, tells the key link (the fleet store, when configured) of a change
 * made here — a change heard from the fleet (`key.synced`) is adopted, never echoed back — and stops the
 * key's actor once it is healthy. At most `maxKeys` keys: the least recently touched is stopped first. A
 * refusal long past (a quarantine after its `until`) that no call came to probe is forgotten by the
 * book's own delayed `key.expired`. KEY_QUARANTINE_MS=0 turns it all off: every call is admitted.
 */
export function createKeyBookMachine(table: ErrorTable) {
  const shelfMachine = createKeyShelfMachine(table);
  /**
   * Kept until a quarantine after its `until`: then long past and never probed. A refusal already that
   * old (a fleet record) is forgotten at the next tick: its `key.expired` waits no time.
   */
  const forgetAtOf = (context: KeyBookContext, shared: SharedKeyHealth, at: number): number =>
    (shared.until ?? at) + context.quarantineMs;
  /** `key.expired` when `forgetAt` comes, from `at` (book time, epoch ms): at once (the next tick) when past. */
  const expiry = (forgetAt: number, at: number) => {
    const delay = Math.min(Math.max(0, forgetAt - at), maxTimerMs);
    return { event: { type: 'key.expired', at: at + delay } satisfies KeyExpiredEvent, delay };
  };
  const shelfOf = (context: KeyBookContext, keyId: string): ShelfRef => {
    const shelf = context.shelves[shelfIndexOf(context, keyId)];
    if (shelf === undefined) throw new Error('A tracked key without its shelf');
    return shelf;
  };
  /** Stop the key's actor and drop it from the index (from an action of the book). */
  const forget = (
    enqueue: { sendTo: (to: ShelfRef, event: KeyShelfEvent) => void; assign: (values: Partial<KeyBookContext>) => void },
    context: KeyBookContext,
    keyId: string,
  ): void => {
    enqueue.sendTo(shelfOf(context, keyId), { type: 'key.release', keyId });
    enqueue.assign({ keys: untracked(context.keys, keyId) });
  };

  return setup({
    types: {
      input: {} as KeyBookInput,
      context: {} as KeyBookContext,
      events: {} as KeyBookMachineEvent,
    },
    actors: {
      /** Replaced (`.provide`) by `createKeyLink` when a fleet store is configured. */
      keyLink: embeddedKeyLink,
      shelf: shelfMachine,
    },
    guards: {
      /** KEY_QUARANTINE_MS=0 turns per-key health off. */
      isEnabled: ({ context }) => context.quarantineMs > 0 && context.maxKeys > 0,
      /** The key has an actor (it is refused, or its probe is due or in flight). */
      isTracked: ({ context, event }) => 'keyId' in event && context.keys.byId.has(event.keyId),
      /** The event refuses a healthy key: a failure whose class column K names, a trip, a fleet refusal. */
      isRefusal: ({ event }) =>
        (event.type === 'key.failed' && keyVerdictInTable(table, event.errorClass) !== 'none') ||
        event.type === 'key.tripped' ||
        (event.type === 'key.synced' && event.shared.state !== 'healthy'),
      /** The book holds `maxKeys` keys: one must go before another comes. */
      isFull: ({ context }) => context.keys.byId.size >= context.maxKeys,
      /** The key told it is healthy again: its actor is stopped. */
      isHealthyAgain: ({ event }) => event.type === 'key.changed' && event.shared.state === 'healthy',
      /** A change made here (not heard from the fleet) that the book did not know: the fleet is told. */
      isOwnNews: ({ context, event }) => {
        const { keyId, shared, fromFleet } = eventAs(event, 'key.changed');
        const known = (context.keys.byId.get(keyId) ?? untrackedKey).shared;
        return (
          !fromFleet &&
          (known.state !== shared.state || known.until !== shared.until || known.errorClass !== shared.errorClass)
        );
      },
      /** The earliest key's time to be forgotten has come (a wait longer than a timer holds has not). */
      isForgetDue: ({ context, event }) => {
        const next = context.keys.byForgetAt.minKey();
        return event.type === 'key.expired' && next !== undefined && next[0] <= event.at;
      },
    },
    actions: {
      /** An untracked key (or per-key health off): the call may go out, answered at once. */
      admitUntracked: sendTo(
        ({ event }) => eventAs(event, 'key.admit').replyTo,
        ({ event }): KeyAnswer => ({ type: 'key.admitted', call: eventAs(event, 'key.admit').call }),
      ),
      /** A tracked key's actor answers the admission itself (its recency is not touched). */
      askKey: sendTo(
        ({ context, event }) => shelfOf(context, keyIdOf(event)),
        ({ event }) => event as KeyShelfEvent,
      ),
      /** The event goes to the key's actor; the key (indexed if new) is now the most recently touched. */
      tellKey: enqueueActions(({ context, event, enqueue }) => {
        enqueue.assign({ keys: touched(context.keys, keyIdOf(event)) });
        enqueue.sendTo(shelfOf(context, keyIdOf(event)), event as KeyShelfEvent);
      }),
      /** The key's shelf, spawned the first time a key lands on it. */
      openShelf: assign(({ context, event, spawn }) => {
        const index = shelfIndexOf(context, keyIdOf(event));
        if (context.shelves[index] !== undefined) return {};
        return { shelves: context.shelves.with(index, spawn('shelf', { id: `shelf.${index}` })) };
      }),
      /** A new key actor, healthy, on its shelf; the event that refuses it follows (`tellKey`, which indexes the key). */
      trackKey: sendTo(
        ({ context, event }) => shelfOf(context, keyIdOf(event)),
        ({ context, event }): KeyShelfEvent => ({
          type: 'key.hold',
          keyId: keyIdOf(event),
          input: { keyId: keyIdOf(event), quarantineMs: context.quarantineMs, coolingMs: context.coolingMs },
        }),
      ),
      /** Stop the least recently touched key's actor to make room (the fleet is not told). */
      forgetLeastRecent: enqueueActions(({ context, enqueue }) =>
        forget(enqueue, context, firstKeyOf(context.keys.byTouch)),
      ),
      /** Stop the key's actor: healthy again. */
      releaseKey: enqueueActions(({ context, event, enqueue }) => forget(enqueue, context, keyIdOf(event))),
      /** Stop the actor of the key whose time to be forgotten has come (the fleet is not told). */
      forgetDueKey: enqueueActions(({ context, enqueue }) =>
        forget(enqueue, context, firstKeyOf(context.keys.byForgetAt)),
      ),
      /** Keep what the key told, until its `forgetAt`; an earlier `forgetAt` than the pending one is awaited instead. */
      recordChange: enqueueActions(({ context, event, enqueue }) => {
        const { keyId, shared, at } = eventAs(event, 'key.changed');
        const forgetAt = forgetAtOf(context, shared, at);
        enqueue.assign({ keys: recorded(context.keys, keyId, shared, forgetAt) });
        if (context.expiryDueAt !== null && context.expiryDueAt <= forgetAt) return;
        const { event: expired, delay } = expiry(forgetAt, at);
        enqueue.cancel(expiryId);
        enqueue.raise(expired, { id: expiryId, delay });
        enqueue.assign({ expiryDueAt: expired.at });
      }),
      /** Tell the fleet what changed here (through the key link; a no-op without `REDIS_URL`). */
      reportChange: sendTo(
        ({ context }) => context.keyLink,
        ({ event }) => {
          const { keyId, shared, at } = eventAs(event, 'key.changed');
          return { type: 'key.report' as const, keyId, shared, at };
        },
      ),
      /**
       * Await the next key's time to be forgotten: at once when it has come too, else with a delay (a
       * time longer than a timer holds is awaited again for the rest); none while no key is tracked.
       */
      awaitNextExpiry: enqueueActions(({ context, event, enqueue }) => {
        const { at } = eventAs(event, 'key.expired');
        const next = context.keys.byForgetAt.minKey()?.[0];
        enqueue.assign({ expiryDueAt: null });
        if (next === undefined) return;
        if (next <= at) {
          enqueue.raise({ type: 'key.expired', at } satisfies KeyExpiredEvent);
          return;
        }
        const { event: expired, delay } = expiry(next, at);
        enqueue.raise(expired, { id: expiryId, delay });
        enqueue.assign({ expiryDueAt: expired.at });
      }),
    },
  }).createMachine({
    id: 'keyBook',
    context: ({ input, spawn }) => ({
      ...input,
      keys: emptyIndex,
      shelves: Array.from({ length: shelfCount(input.maxKeys) }, () => undefined),
      expiryDueAt: null,
      keyLink: spawn('keyLink', { id: 'keyLink', input: { providerId: input.providerId } }),
    }),
    initial: 'tracking',
    states: {
      /** Always tracking: only events about a refused key, or ones that refuse a key, reach a key actor. */
      tracking: {
        on: {
          /** A tracked key's actor answers; any other key (or per-key health off) is admitted at once. */
          'key.admit': [
            { guard: and(['isEnabled', 'isTracked']), actions: 'askKey' },
            { actions: 'admitUntracked' },
          ],
          'key.called': { guard: and(['isEnabled', 'isTracked']), actions: 'tellKey' },
          'key.answered': { guard: and(['isEnabled', 'isTracked']), actions: 'tellKey' },
          'key.failed': [
            { guard: and(['isEnabled', 'isTracked']), actions: 'tellKey' },
            {
              guard: and(['isEnabled', 'isRefusal', 'isFull']),
              actions: ['forgetLeastRecent', 'openShelf', 'trackKey', 'tellKey'],
            },
            { guard: and(['isEnabled', 'isRefusal']), actions: ['openShelf', 'trackKey', 'tellKey'] },
          ],
          'key.tripped': [
            { guard: and(['isEnabled', 'isTracked']), actions: 'tellKey' },
            {
              guard: and(['isEnabled', 'isFull']),
              actions: ['forgetLeastRecent', 'openShelf', 'trackKey', 'tellKey'],
            },
            { guard: 'isEnabled', actions: ['openShelf', 'trackKey', 'tellKey'] },
          ],
          'key.synced': [
            { guard: and(['isEnabled', 'isTracked']), actions: 'tellKey' },
            {
              guard: and(['isEnabled', 'isRefusal', 'isFull']),
              actions: ['forgetLeastRecent', 'openShelf', 'trackKey', 'tellKey'],
            },
            { guard: and(['isEnabled', 'isRefusal']), actions: ['openShelf', 'trackKey', 'tellKey'] },
          ],
          /** A key's health changed: counted, told to the fleet when made here, its actor stopped once healthy. */
          'key.changed': [
            /** From a key already let go (a change in flight as it was stopped): nothing to keep. */
            { guard: not('isTracked') },
            { guard: and(['isHealthyAgain', 'isOwnNews']), actions: ['reportChange', 'releaseKey'] },
            { guard: 'isHealthyAgain', actions: 'releaseKey' },
            { guard: 'isOwnNews', actions: ['reportChange', 'recordChange'] },
            { actions: 'recordChange' },
          ],
          /** A refusal long past that no call came to probe: its actor is stopped. */
          'key.expired': [
            { guard: 'isForgetDue', actions: ['forgetDueKey', 'awaitNextExpiry'] },
            { actions: 'awaitNextExpiry' },
          ],
        },
      },
    },
  });
}

function keyIdOf(event: KeyBookMachineEvent): string {
  if (!('keyId' in event)) throw new Error(`No key in ${event.type}`);
  return event.keyId;
}

/** The event as the one type an action is reached by (its transitions take no other). */
function eventAs<T extends KeyBookMachineEvent['type']>(
  event: KeyBookMachineEvent,
  type: T,
): Extract<KeyBookMachineEvent, { type: T }> {
  if (event.type !== type) throw new Error(`${event.type} where ${type} was expected`);
  return event as Extract<KeyBookMachineEvent, { type: T }>;
}

/** The key book on docs/errors.md's table. */
export const keyBookMachine = createKeyBookMachine(errorPolicy);

