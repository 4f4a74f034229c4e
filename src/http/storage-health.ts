/**
 * Whether the service can still store what it promises to keep: job records (JOBS_DIR or Redis), uploaded
 * documents, the fleet's key fingerprint salt. A write that fails (a full disk, a read-only folder, Redis
 * refusing or unreachable) must not be silence: the first failure of a store is logged with its cause (once,
 * until a write of that store succeeds again, which is logged too), `/readyz` answers `degraded` with the
 * reason while it lasts, and every failure is counted in `studyhelper_storage_write_failures_total`.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { scrubSecrets } from '../security/redact.js';

/** What is stored: job records, uploaded documents, the fleet's key fingerprint salt. */
export type StorageName = 'jobs' | 'documents' | 'keySalt';

const storageNames: readonly StorageName[] = ['jobs', 'documents', 'keySalt'];

interface StorageFailure {
  readonly store: StorageName;
  /** The cause as logged: the error's code and message (never a key). */
  readonly reason: string;
}

interface StorageLog {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

export interface StorageHealth {
  /** The outcome of a write to `store`: nothing when it succeeded, the error when it failed. */
  report(store: StorageName, error?: unknown): void;
  /** The stores whose last write failed, with the cause. */
  failures(): readonly StorageFailure[];
  /** Adds the failure counter and the per-store gauge to a registry. */
  register(registry: Registry): void;
  /** Where the transitions are logged (the app's logger, once it exists); a failure met before is logged then. */
  attachLog(log: StorageLog): void;
}

/** The cause in one bounded line: `ENOSPC: no space left on device, write`, `OOM command not allowed…`. */
function causeOf(error: unknown): string {
  const code = typeof error === 'object' && error !== null && 'code' in error ? String((error as { code: unknown }).code) : undefined;
  const message = error instanceof Error ? error.message : String(error);
  const text = code !== undefined && !message.startsWith(code) ? `${code}: ${message}` : message;
  return scrubSecrets(text).slice(0, 200);
}

export function createStorageHealth(): StorageHealth {
  const failing = new Map<StorageName, string>();
  let log: StorageLog | undefined;
  const failuresTotal = new Counter({
    name: 'studyhelper_storage_write_failures_total',
    help: 'Writes the service could not store (a full disk, a read-only folder, Redis refusing or unreachable), by store.',
    labelNames: ['store'] as const,
    registers: [],
  });
  const failingGauge = new Gauge({
    name: 'studyhelper_storage_failing',
    help: '1 while the last write of a store failed (jobs, documents, keySalt), else 0.',
    labelNames: ['store'] as const,
    registers: [],
    collect() {
      for (const store of storageNames) this.set({ store }, failing.has(store) ? 1 : 0);
    },
  });
  return {
    report(store, error) {
      if (error === undefined) {
        if (!failing.delete(store)) return;
        log?.info({ store }, `storage: ${store} writes succeed again`);
        return;
      }
      failuresTotal.inc({ store });
      if (failing.has(store)) return;
      const reason = causeOf(error);
      failing.set(store, reason);
      log?.warn({ store, cause: reason }, `storage: a ${store} write failed (${reason}); /readyz says degraded until one succeeds`);
    },
    failures: () => [...failing].map(([store, reason]) => ({ store, reason })),
    register(registry) {
      registry.registerMetric(failuresTotal);
      registry.registerMetric(failingGauge);
    },
    attachLog(next) {
      log = next;
      for (const [store, reason] of failing) next.warn({ store, cause: reason }, `storage: a ${store} write failed (${reason}); /readyz says degraded until one succeeds`);
    },
  };
}
