import { Redis } from 'ioredis';
import { errorClasses, type ErrorClass } from '../errors/index.js';
import type { SharedKeyHealth } from '../machines/key-health.machine.js';
import { randomKeySalt } from '../security/key-id.js';

/**
 * Per-key health shared by the fleet (docs/fleet.md): one record per refused key,
 * `<prefix>keys:health:<provider>:<keyId>` = `state,errorClass,until`, expiring (PX) when the refusal
 * ends, and every change published on `<prefix>keys:health`. A key is known only by its salted
 * fingerprint; the salt is the fleet's (`<prefix>keys:salt`, created once with SET NX).
 */
export interface SharedKeyStore {
  /** Writes (or, when healthy, deletes) a key's record and tells every instance. Rejects when unreachable. */
  write(providerId: string, keyId: string, shared: SharedKeyHealth, now: number): Promise<void>;
  /** Every key change any instance makes for this provider (pub/sub). */
  subscribe(providerId: string, listener: (keyId: string, shared: SharedKeyHealth) => void): () => void;
  /** The refused keys the fleet holds for this provider now, at most `limit` of them. */
  load(providerId: string, limit: number): Promise<readonly (readonly [string, SharedKeyHealth])[]>;
  /**
   * Called each time the store starts hearing the fleet's changes: its subscription confirmed by Redis
   * while commands are answered (at start, and after either connection came back). A change published
   * before that moment was not heard, so the link reads the refused keys back then (`load`).
   */
  onListening(listener: () => void): () => void;
  isListening(): boolean;
  /** Commands are answered (writes go through). */
  isUp(): boolean;
}

export interface KeyHealthStoreOptions {
  readonly url: string;
  readonly prefix: string;
  /** The command connection (short timeouts, no offline queue), shared with the other stores. */
  readonly client: Redis;
  readonly isUp: () => boolean;
  readonly onAvailability: (listener: (up: boolean) => void) => () => void;
}

const states = ['healthy', 'quarantined', 'cooling'] as const;

/** A salted fingerprint as the gateway makes it (hex); anything else read back is ignored. */
const keyIdPattern = /^[0-9a-f]{8,64}$/;

function encode(shared: SharedKeyHealth): string {
  return `${shared.state},${shared.errorClass ?? ''},${shared.until ?? -1}`;
}

function decode(text: string | null): SharedKeyHealth | undefined {
  if (text === null || text.length > 64) return undefined;
  const [state, errorClass, until] = text.split(',');
  const name = states.find((candidate) => candidate === state);
  const errorClassName = errorClasses.find((candidate) => candidate === errorClass);
  const time = Number(until);
  if (name === undefined || !Number.isFinite(time)) return undefined;
  return {
    state: name,
    errorClass: (errorClassName ?? null) as ErrorClass | null,
    until: time < 0 ? null : time,
  };
}

export function createKeyHealthStore(options: KeyHealthStoreOptions): SharedKeyStore & { close(): void } {
  const { client, prefix } = options;
  const channel = `${prefix}keys:health`;
  const recordKey = (providerId: string, keyId: string) => `${prefix}keys:health:${providerId}:${keyId}`;
  const listeners = new Map<string, Set<(keyId: string, shared: SharedKeyHealth) => void>>();
  const listening = new Set<() => void>();
  // Its own subscriber connection, subscribed again on every (re)connection; the store is listening
  // once Redis confirmed the subscription and the command connection is up.
  const subscriber = new Redis(options.url, {
    connectTimeout: 1000,
    autoResubscribe: false,
    retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
  });
  let subscribed = false;
  let heard = false;
  const report = (): void => {
    const next = subscribed && options.isUp();
    if (next === heard) return;
    heard = next;
    if (next) listening.forEach((listener) => listener());
  };
  subscriber.on('error', () => undefined);
  subscriber.on('ready', () => {
    subscriber.subscribe(channel).then(() => {
      subscribed = true;
      report();
    }, () => undefined);
  });
  subscriber.on('close', () => {
    subscribed = false;
    report();
  });
  const unwatch = options.onAvailability(report);
  subscriber.on('message', (_channel: string, message: string) => {
    if (message.length > 256) return;
    const [providerId, keyId, ...rest] = message.split('|');
    if (providerId === undefined || keyId === undefined || !keyIdPattern.test(keyId)) return;
    const shared = decode(rest.join('|'));
    if (shared === undefined) return;
    listeners.get(providerId)?.forEach((listener) => listener(keyId, shared));
  });

  return {
    async write(providerId, keyId, shared, now) {
      const key = recordKey(providerId, keyId);
      const text = encode(shared);
      const ttlMs = shared.until === null ? 0 : Math.ceil(shared.until - now);
      const transaction = client.multi();
      if (shared.state === 'healthy' || ttlMs <= 0) transaction.del(key);
      else transaction.set(key, text, 'PX', ttlMs);
      transaction.publish(channel, `${providerId}|${keyId}|${text}`);
      await transaction.exec();
    },
    subscribe(providerId, listener) {
      let set = listeners.get(providerId);
      if (set === undefined) {
        set = new Set();
        listeners.set(providerId, set);
      }
      set.add(listener);
      return () => set.delete(listener);
    },
    async load(providerId, limit) {
      const found: string[] = [];
      const pattern = `${prefix}keys:health:${providerId}:*`;
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 200);
        cursor = next;
        found.push(...keys.slice(0, limit - found.length));
      } while (cursor !== '0' && found.length < limit);
      if (found.length === 0) return [];
      const values = await client.mget(...found);
      const records: (readonly [string, SharedKeyHealth])[] = [];
      found.forEach((key, index) => {
        const keyId = key.slice(pattern.length - 1);
        const shared = decode(values[index] ?? null);
        if (shared !== undefined && keyIdPattern.test(keyId)) records.push([keyId, shared]);
      });
      return records;
    },
    onListening(listener) {
      listening.add(listener);
      return () => listening.delete(listener);
    },
    isListening: () => heard,
    isUp: options.isUp,
    close() {
      unwatch();
      listeners.clear();
      listening.clear();
      subscriber.disconnect();
    },
  };
}

/**
 * The fleet's fingerprint salt: the first instance to ask creates it (SET NX), every other reads the
 * same, so one key has one fingerprint fleet-wide. Unreachable Redis: undefined (the caller uses its own).
 * Once created, the instances using it keep it there (`assertKeySalt`), so a Redis that lost its data does
 * not make the next instance to start create another.
 */
export async function fleetKeySalt(client: Redis, prefix: string): Promise<string | undefined> {
  const key = `${prefix}keys:salt`;
  try {
    await client.set(key, randomKeySalt(), 'NX');
    return (await client.get(key)) ?? undefined;
  } catch {
    return undefined;
  }
}

/** The salt in Redis is not the one this instance uses: one key has two fingerprints in the fleet. */
class KeySaltSplitError extends Error {
  constructor() {
    super(
      'The fleet\'s key fingerprint salt in Redis is not the one this instance uses (Redis lost it and an instance ' +
        'started since created another): restart this instance, or set KEY_FINGERPRINT_SALT on every instance.',
    );
    this.name = 'KeySaltSplitError';
  }
}

/**
 * Puts `salt`, the salt this instance uses, back in Redis if Redis lost it (SET NX: never over another).
 * Rejects with `KeySaltSplitError` when Redis holds another, and with Redis's error when unreachable.
 */
export async function assertKeySalt(client: Redis, prefix: string, salt: string): Promise<void> {
  const key = `${prefix}keys:salt`;
  await client.set(key, salt, 'NX');
  if ((await client.get(key)) !== salt) throw new KeySaltSplitError();
}
