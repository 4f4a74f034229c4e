import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { ErrorClass } from '../errors/index.js';
import type { SharedBreakerState } from '../machines/breaker.machine.js';
import {
  defaultMaxRecoveryMs,
  defaultMinDistinctKeys,
  voterIdPattern,
  type OpenStrategyName,
} from '../machines/breaker-strategy.js';
import { breakerScriptFor } from './breaker-script.js';

/** One update of a provider's fleet breaker, applied atomically by the breaker script. */
export type FleetBreakerOperation =
  | { readonly op: 'succeeded' | 'acquire'; readonly callId: string }
  /** The prober extends its own probe lease while its call runs (`granted`: it still held it). */
  | { readonly op: 'renew'; readonly callId: string }
  /**
   * A call's failure; its class, when given, decides counted or not in the script (column B); its
   * voter — its origin (the caller's salted address id) when given, else its key id (a salted
   * fingerprint) — joins the streak's distinct voters (the quorum, `distinctKeyQuorum.voter`).
   */
  | {
      readonly op: 'failed' | 'ignored';
      readonly callId: string;
      readonly errorClass?: ErrorClass;
      readonly keyId?: string;
      readonly origin?: string | undefined;
    }
  | { readonly op: 'reset' | 'release' | 'forceOpen' | 'read' }
  | {
      readonly op: 'merge';
      readonly local: Omit<SharedBreakerState, 'opens' | 'version'>;
    };

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
  /** The breakers' open strategy (default consecutive failures); the script is generated for it. */
  readonly strategy?: OpenStrategyName;
}

/** The breakers' shared memory, as the fleet links use it. */
export interface SharedBreakerStore {
  /** Rejects (fast: `commandTimeoutMs`) when the store is unreachable. */
  apply(providerId: string, operation: FleetBreakerOperation, now: number): Promise<FleetBreakerResult>;
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

const stateNames = ['closed', 'open', 'halfOpen', 'forcedOpen'] as const;

function parseState(fields: readonly unknown[]): SharedBreakerState {
  const [state, failures, openedAt, retryAt, opens, version, changedAt, period, keys] = fields.map((field) =>
    String(field),
  );
  const name = stateNames.find((candidate) => candidate === state);
  if (name === undefined) throw new Error(`Unknown fleet breaker state ${String(state)}`);
  const time = (value: string | undefined): number | null => (Number(value) < 0 ? null : Number(value));
  return {
    state: name,
    consecutiveFailures: Number(failures),
    openedAt: time(openedAt),
    retryAt: time(retryAt),
    opens: Number(opens),
    version: Number(version),
    changedAt: Number(changedAt),
    openPeriodMs: Number(period),
    streakKeys: keyIdsOf(keys),
  };
}

/** Key ids travel joined by spaces (a fingerprint holds none, nor commas). */
function keyIdsOf(joined: string | undefined): readonly string[] {
  return (joined ?? '').split(' ').filter((id) => id !== '');
}

/**
 * A key id as the script takes it: a salted fingerprint, or '' for none (the script counts it as the one
 * key 'anonymous'); one holding a separator would split, so it is passed as none too.
 */
function scriptKeyId(keyId: string | undefined): string {
  return keyId !== undefined && voterIdPattern.test(keyId) ? keyId : '';
}

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
  const breakerScript = breakerScriptFor(options.breaker.strategy ?? 'consecutiveFailures');
  const scriptSha = createHash('sha1').update(breakerScript).digest('hex');
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
    let shared: SharedBreakerState;
    try {
      shared = parseState(message.split(','));
    } catch {
      return;
    }
    set.forEach((listener) => listener(shared));
  });

  async function runScript(keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
      return await client.evalsha(scriptSha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
      return client.eval(breakerScript, keys.length, ...keys, ...args);
    }
  }

  const breakers: SharedBreakerStore = {
    async apply(providerId, operation, now) {
      const key = breakerKey(providerId);
      const callId = 'callId' in operation ? operation.callId : '';
      const merge =
        operation.op === 'merge'
          ? [
              operation.local.state,
              operation.local.consecutiveFailures,
              operation.local.openedAt ?? -1,
              operation.local.retryAt ?? -1,
              operation.local.changedAt,
              operation.local.openPeriodMs,
              operation.local.streakKeys.map(scriptKeyId).join(' '),
            ]
          : operation.op === 'failed' || operation.op === 'ignored'
            ? [operation.errorClass ?? '', scriptKeyId(operation.keyId), scriptKeyId(operation.origin)]
            : [];
      const reply = await runScript(
        [key, `${key}:probe`],
        [
          operation.op,
          Math.round(now),
          options.breaker.threshold,
          options.breaker.recoveryMs,
          callId,
          options.probeLeaseMs,
          key,
          options.breaker.maxRecoveryMs ?? defaultMaxRecoveryMs,
          options.breaker.minDistinctKeys ?? defaultMinDistinctKeys,
          ...merge,
        ],
      );
      if (!Array.isArray(reply) || reply.length < 10)
        throw new Error('Unexpected reply from the breaker script');
      const startedAt = Number(reply[10]);
      return {
        shared: parseState(reply.slice(0, 9)),
        granted: Number(reply[9]) === 1,
        probeStartedAt: Number.isFinite(startedAt) && startedAt >= 0 ? startedAt : null,
      };
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
