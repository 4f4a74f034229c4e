import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { BreakerEvent, SharedBreakerState } from '../machines/breaker.machine.js';
import type { OpenStrategyName } from '../machines/breaker-strategy.js';
import { createFleetBreakers, publishedState, type BreakerCells, type StoredBreaker } from './fleet-breaker.js';

/** One operation on a provider's fleet breaker, applied by the breaker machine (fleet-breaker.ts). */
export type FleetBreakerOperation =
  /** A call's result or an operator's action, as the local breaker heard it. */
  | { readonly op: 'event'; readonly event: BreakerEvent }
  /** A call would be the half-open probe: the machine decides, the probe lease (SET NX PX) makes it one per window. */
  | { readonly op: 'acquire'; readonly callId: string }
  | { readonly op: 'read' }
  /** After an outage: the local breaker's state, with when it last changed. */
  | { readonly op: 'merge'; readonly local: Omit<SharedBreakerState, 'version'> };

export interface FleetBreakerResult {
  readonly shared: SharedBreakerState;
  /** `acquire` only: the probe lease is this call's (or the fleet is closed, so no lease is needed). */
  readonly granted: boolean;
  /**
   * A refused `acquire` only: when the probe holding this window's lease (another call's, in flight)
   * started, epoch ms; null when no probe holds it or its start is unknown.
   */
  readonly probeStartedAt: number | null;
}

export interface BreakerSettings {
  readonly threshold: number;
  readonly recoveryMs: number;
  /** The cap of the open period, which doubles on each failed probe (default 600 000). */
  readonly maxRecoveryMs?: number;
  /** BREAKER_MIN_DISTINCT_KEYS: distinct keys a streak needs to open the breaker (default 1 here). */
  readonly minDistinctKeys?: number;
  /** The breakers' open strategy (default consecutive failures). */
  readonly strategy?: OpenStrategyName;
}

/** The breakers' shared memory, as the fleet links use it. */
export interface SharedBreakerStore {
  /** Rejects (fast: `commandTimeoutMs`) when the store is unreachable. */
  apply(providerId: string, operation: FleetBreakerOperation, now: number): Promise<FleetBreakerResult>;
  /** The prober extends its own probe lease while its call runs; false: the lease is no longer its. */
  renew(providerId: string, callId: string): Promise<boolean>;
  /** Every change any instance makes to this provider's fleet breaker (pub/sub). */
  subscribe(providerId: string, listener: (shared: SharedBreakerState) => void): () => void;
  /** Called with true when the store (re)connects, false when it is lost. */
  onAvailability(listener: (up: boolean) => void): () => void;
  isUp(): boolean;
}

export interface RedisStateStoreOptions {
  readonly url: string;
  /** REDIS_PREFIX: every key and channel starts with it. */
  readonly prefix: string;
  readonly breaker: BreakerSettings;
  /**
   * How long the half-open probe lease lives without renewal: the prober renews it while its call runs,
   * so a crashed prober frees the window after at most this.
   */
  readonly probeLeaseMs: number;
  /** Redis commands fail after this long, so a hung Redis never holds a request (default 250). */
  readonly commandTimeoutMs?: number;
  /** Longest wait between reconnection attempts (default 2000). */
  readonly maxReconnectDelayMs?: number;
}

/** The Redis connection of one process: breakers' shared state, and a client for other stores. */
export interface RedisStateStore {
  readonly breakers: SharedBreakerStore;
  /** The command connection (documents, jobs): commands fail fast while Redis is down. */
  readonly client: Redis;
  readonly prefix: string;
  isUp(): boolean;
  /** Resolves once the first connection attempt ended, true when it succeeded. */
  ready(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * The compare-and-set of a fleet breaker, and all that Redis does for it: it writes the record an
 * instance computed only if the version and the probe lease are still those it read, takes or drops the
 * lease with it (the lease: SET NX PX, one probe per window), and publishes the record. It holds no rule.
 *
 * KEYS[1] the breaker's hash (version, record), KEYS[2] its probe lease (`callId|startedAt`)
 * ARGV    version read, lease read ('' none), record ('' unchanged), keep|drop|take, lease to take,
 *         lease ms, channel. Returns {1, version} when written; on a conflict {0, version, record, lease} as
 *         they are now, so the writer applies its event again without another read.
 */
const casScript = `
local version = tonumber(redis.call('HGET', KEYS[1], 'version')) or 0
local lease = redis.call('GET', KEYS[2]) or ''
if version ~= tonumber(ARGV[1]) or lease ~= ARGV[2] then
  return {0, version, redis.call('HGET', KEYS[1], 'record') or '', lease}
end
if ARGV[4] == 'take' then
  if not redis.call('SET', KEYS[2], ARGV[5], 'NX', 'PX', ARGV[6]) then return {0, version} end
elseif ARGV[4] == 'drop' then
  redis.call('DEL', KEYS[2])
end
if ARGV[3] ~= '' then
  version = version + 1
  redis.call('HSET', KEYS[1], 'version', version, 'record', ARGV[3])
  redis.call('PUBLISH', ARGV[7], version .. ' ' .. ARGV[3])
end
return {1, version}
`;

/** The prober's renewal: the lease lives on only while it is still this call's. KEYS[1] lease; ARGV call id, ms. */
const renewScript = `
local value = redis.call('GET', KEYS[1])
if value and (value == ARGV[1] or string.sub(value, 1, #ARGV[1] + 1) == ARGV[1] .. '|') then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`;

/**
 * Connects to Redis with short command timeouts and no offline queue: while Redis is down every
 * command fails at once, and the callers (fleet links, stores) fall back to in-process state.
 * ioredis reconnects on its own (`retryStrategy`); availability changes are reported to listeners.
 */
export function createRedisStateStore(options: RedisStateStoreOptions): RedisStateStore {
  const commandTimeout = options.commandTimeoutMs ?? 250;
  const retryStrategy = (times: number): number =>
    Math.min(50 * 2 ** Math.min(times, 6), options.maxReconnectDelayMs ?? 2000);
  const client = new Redis(options.url, {
    commandTimeout,
    connectTimeout: 1000,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy,
  });
  // The subscriber keeps its subscriptions across reconnects (autoResubscribe) and needs no timeout.
  const subscriber = new Redis(options.url, { connectTimeout: 1000, retryStrategy, autoResubscribe: true });
  const listeners = new Map<string, Set<(shared: SharedBreakerState) => void>>();
  const availability = new Set<(up: boolean) => void>();
  let up = false;
  let closed = false;

  const breakerKey = (providerId: string) => `${options.prefix}breaker:${providerId}`;

  const setUp = (next: boolean): void => {
    if (next === up) return;
    up = next;
    availability.forEach((listener) => listener(next));
  };
  client.on('ready', () => setUp(true));
  client.on('close', () => setUp(false));
  client.on('end', () => setUp(false));
  // ioredis also emits `error` on every failed reconnect: availability is reported through `close`.
  client.on('error', () => undefined);
  subscriber.on('error', () => undefined);
  subscriber.on('message', (channel: string, message: string) => {
    const providerId = channel.slice(`${options.prefix}breaker:`.length);
    const set = listeners.get(providerId);
    if (set === undefined) return;
    const space = message.indexOf(' ');
    const shared = publishedState(Number(message.slice(0, space)), message.slice(space + 1));
    if (shared !== undefined) set.forEach((listener) => listener(shared));
  });

  const shas = new Map<string, string>();
  async function runScript(script: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    let sha = shas.get(script);
    if (sha === undefined) {
      sha = createHash('sha1').update(script).digest('hex');
      shas.set(script, sha);
    }
    try {
      return await client.evalsha(sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
      return client.eval(script, keys.length, ...keys, ...args);
    }
  }

  const leaseKey = (providerId: string) => `${breakerKey(providerId)}:probe`;
  const cells: BreakerCells = {
    async read(providerId) {
      const replies = await client.multi().hmget(breakerKey(providerId), 'version', 'record').get(leaseKey(providerId)).exec();
      const [fields, lease] = (replies ?? []).map(([error, value]) => {
        if (error !== null) throw error;
        return value;
      });
      const [version, record] = Array.isArray(fields) ? fields : [];
      return {
        version: Number(version ?? 0) || 0,
        record: typeof record === 'string' ? record : null,
        lease: typeof lease === 'string' ? lease : null,
      } satisfies StoredBreaker;
    },
    async write(providerId, expected, next) {
      const lease = next.lease;
      const reply = await runScript(
        casScript,
        [breakerKey(providerId), leaseKey(providerId)],
        [
          expected.version,
          expected.lease ?? '',
          next.record ?? '',
          typeof lease === 'string' ? lease : 'take',
          typeof lease === 'string' ? '' : lease.take,
          options.probeLeaseMs,
          breakerKey(providerId),
        ],
      );
      if (!Array.isArray(reply)) throw new Error('Unexpected reply from the fleet breaker write');
      const [written, version, record, current] = reply as unknown[];
      if (Number(written) === 1) return { written: true, version: Number(version) };
      return {
        written: false,
        current: {
          version: Number(version),
          record: typeof record === 'string' && record !== '' ? record : null,
          lease: typeof current === 'string' && current !== '' ? current : null,
        },
      };
    },
  };
  const apply = createFleetBreakers(cells, options.breaker);

  const breakers: SharedBreakerStore = {
    apply,
    async renew(providerId, callId) {
      return Number(await runScript(renewScript, [leaseKey(providerId)], [callId, options.probeLeaseMs])) === 1;
    },
    subscribe(providerId, listener) {
      let set = listeners.get(providerId);
      if (set === undefined) {
        set = new Set();
        listeners.set(providerId, set);
        subscriber.subscribe(breakerKey(providerId)).catch(() => undefined);
      }
      set.add(listener);
      return () => set.delete(listener);
    },
    onAvailability(listener) {
      availability.add(listener);
      return () => availability.delete(listener);
    },
    isUp: () => up,
  };

  return {
    breakers,
    client,
    prefix: options.prefix,
    isUp: () => up,
    ready(timeoutMs) {
      if (up) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => finish(false), timeoutMs);
        const unsubscribe = breakers.onAvailability((next) => {
          if (next) finish(true);
        });
        const onError = () => finish(false);
        client.once('error', onError);
        function finish(result: boolean): void {
          clearTimeout(timer);
          unsubscribe();
          client.off('error', onError);
          resolve(result);
        }
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      availability.clear();
      listeners.clear();
      client.disconnect();
      subscriber.disconnect();
    },
  };
}
