import { Gauge, type Registry } from 'prom-client';
import { createMemoryDocumentStore, type DocumentStore } from '../documents/index.js';
import { createRedisDocumentStore } from '../documents/redis-store.js';
import type { JobStatusStore } from '../jobs/status-store.js';
import { createRedisJobCancelBus, type JobCancelBus } from '../jobs/cancel-bus.js';
import { createRedisJobStatusStore } from '../jobs/redis-status-store.js';
import { createFleetLink } from './fleet-link.js';
import { assertKeySalt, createKeyHealthStore, fleetKeySalt } from './key-health-store.js';
import { createKeyLink } from './key-link.js';
import { createRedisStateStore, type BreakerSettings, type RedisStateStore } from './redis-state-store.js';

export interface FleetOptions {
  /** REDIS_URL. */
  readonly url: string;
  /** REDIS_PREFIX. */
  readonly prefix: string;
  readonly breaker: BreakerSettings;
  /**
   * PROVIDER_TIMEOUT_MS: the longest a probe call runs, so the longest its lease is renewed (plus 2 s),
   * and when a call refused for another instance's probe may try again (`Retry-After`).
   */
  readonly providerTimeoutMs: number;
  /**
   * The half-open probe lease's lifetime without renewal (default 3000): the prober renews it every third
   * while its call runs, so a dead prober blocks the other instances' probes for at most this.
   */
  readonly probeLeaseMs?: number;
  readonly commandTimeoutMs?: number;
  readonly syncIntervalMs?: number;
  /** How long start-up waits for the first connection before serving degraded (default 1000). */
  readonly connectTimeoutMs?: number;
  /** The most refused keys per provider read back from the fleet (default 10 000). */
  readonly maxKeys?: number;
}

/** Where the fleet says that the store was lost or is back (the service passes its logger). */
interface FleetLog {
  info(message: string): void;
  warn(message: string): void;
}

/** What the service needs from the fleet store: pieces for the gateway, the documents, /readyz and /metrics. */
export interface Fleet {
  readonly store: RedisStateStore;
  /** For `createGateway({ fleetLink })`. */
  readonly fleetLink: ReturnType<typeof createFleetLink>;
  /** For `createGateway({ keyLink })`: per-key health shared by the fleet. */
  readonly keyLink: ReturnType<typeof createKeyLink>;
  /**
   * The fleet's key fingerprint salt (created once in Redis), so one key has one fingerprint on every
   * instance; undefined while Redis is unreachable (the caller then uses its own).
   */
  keySalt(): Promise<string | undefined>;
  /**
   * Keeps the fleet's salt `salt` (the one `keySalt` gave, which this instance uses) in Redis: re-asserted
   * with SET NX each time Redis is reachable again and every few seconds, so a Redis that lost its data
   * (restarted empty, a failover, a flush) gets the salt back from the instances that use it, and an
   * instance started afterwards adopts it instead of creating a new one. `onWrite` is told each outcome:
   * an error when the salt in Redis is not `salt` (the fleet's fingerprints are split until this instance
   * restarts) or Redis refuses.
   */
  holdKeySalt(salt: string, onWrite: (error?: unknown) => void): void;
  documentStore(ttlSeconds: number, onWrite?: (error?: unknown) => void): DocumentStore;
  /**
   * Job views for `createJobRegistry({ store })`, readable from every instance; a memory store bounded
   * by `maxJobs` takes the writes while Redis is unreachable. `ttlSeconds` (JOB_TTL_SECONDS) is the
   * finished view's TTL (the registry passes it); a live view's is the longer of it and an hour.
   */
  jobStatusStore(options: {
    readonly ttlSeconds: number;
    readonly maxJobs: number;
    /** JOB_LEASE_MS: how long a store that came back empty answers a missing record 503 (default 15 000). */
    readonly leaseMs?: number;
    readonly onWrite?: (error?: unknown) => void;
  }): JobStatusStore;
  /** Carries job cancels to the instance that runs the job (pub/sub on `<prefix>jobs:cancel`). */
  jobCancelBus(): JobCancelBus;
  /** For `buildApp({ readiness })`: degraded while Redis is unreachable. */
  readiness(): Promise<{ store: 'redis'; storeReachable: boolean }>;
  /** Adds `studyhelper_state_store_up` (1 reachable, 0 not) to a registry. */
  registerMetrics(registry: Registry): void;
  /** Logs the state at start (when unreachable) and one line each time the store is lost or back. */
  reportTo(log: FleetLog): void;
  close(): Promise<void>;
}

/**
 * Connects this process to the fleet's shared state (REDIS_URL). Never fails the start: when Redis is
 * down the service serves with per-process breakers and reconnects in the background.
 */
export async function connectFleet(options: FleetOptions): Promise<Fleet> {
  const probeLeaseMs = options.probeLeaseMs ?? 3000;
  const store = createRedisStateStore({
    url: options.url,
    prefix: options.prefix,
    breaker: options.breaker,
    probeLeaseMs,
    ...(options.commandTimeoutMs === undefined ? {} : { commandTimeoutMs: options.commandTimeoutMs }),
  });
  await store.ready(options.connectTimeoutMs ?? 1000);
  const fleetLink = createFleetLink(store.breakers, {
    ...(options.syncIntervalMs === undefined ? {} : { syncIntervalMs: options.syncIntervalMs }),
    probeLeaseMs,
    probeMaxMs: options.providerTimeoutMs + 2000,
    probeDeadlineMs: options.providerTimeoutMs,
  });
  const keyStore = createKeyHealthStore({
    url: options.url,
    prefix: options.prefix,
    client: store.client,
    isUp: () => store.isUp(),
    onAvailability: (listener) => store.breakers.onAvailability(listener),
  });
  const keyLink = createKeyLink(keyStore, { maxKeys: options.maxKeys ?? 10_000 });
  const stopHolding = new Set<() => void>();
  return {
    store,
    fleetLink,
    keyLink,
    keySalt: () => fleetKeySalt(store.client, options.prefix),
    holdKeySalt(salt, onWrite) {
      const reassert = (): void =>
        void assertKeySalt(store.client, options.prefix, salt).then(
          () => onWrite(),
          (error: unknown) => onWrite(error),
        );
      const timer = setInterval(() => {
        if (store.isUp()) reassert();
      }, 5000);
      timer.unref();
      const unwatch = store.breakers.onAvailability((up) => {
        if (up) reassert();
      });
      stopHolding.add(() => {
        clearInterval(timer);
        unwatch();
      });
    },
    documentStore: (ttlSeconds, onWrite) =>
      createRedisDocumentStore({
        client: store.client,
        prefix: options.prefix,
        ttlSeconds,
        fallback: createMemoryDocumentStore({ ttlSeconds }),
        onAvailability: (listener) => store.breakers.onAvailability(listener),
        ...(onWrite === undefined ? {} : { onWrite }),
      }),
    jobStatusStore: ({ ttlSeconds, maxJobs, leaseMs, onWrite }) =>
      createRedisJobStatusStore({
        client: store.client,
        prefix: options.prefix,
        liveTtlMs: Math.max(ttlSeconds * 1000, 3_600_000),
        interruptedTtlMs: ttlSeconds * 1000,
        maxPending: maxJobs,
        onAvailability: (listener) => store.breakers.onAvailability(listener),
        ...(leaseMs === undefined ? {} : { restoreGraceMs: leaseMs }),
        ...(onWrite === undefined ? {} : { onWrite }),
      }),
    jobCancelBus: () => createRedisJobCancelBus({ url: options.url, prefix: options.prefix, client: store.client }),
    readiness: async () => ({ store: 'redis', storeReachable: store.isUp() }),
    registerMetrics(registry) {
      new Gauge({
        name: 'studyhelper_state_store_up',
        help: 'The shared state store (Redis) is reachable: 1, or 0 (per-process breakers meanwhile).',
        registers: [registry],
        collect() {
          this.set(store.isUp() ? 1 : 0);
        },
      });
    },
    reportTo(log) {
      if (!store.isUp())
        log.warn('state store (Redis) unreachable at start: serving with per-process breakers; reconnecting');
      store.breakers.onAvailability((up) => {
        if (up) log.info('state store (Redis) reachable again: breakers shared and reconciled');
        else log.warn('state store (Redis) lost: serving with per-process breakers; reconnecting');
      });
    },
    close: () => {
      stopHolding.forEach((stop) => stop());
      keyStore.close();
      return store.close();
    },
  };
}
