/**
 * The running service: configuration → provider adapters → actor system (gateway) → document store →
 * HTTP app listening on HOST:PORT. `npm start` and `npm run demo` both start it through here.
 */
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Inspection } from '../inspect/index.js';
import { createGateway } from '../actors/index.js';
import { createPriceTable } from '../cost/index.js';
import { loggableConfig } from '../config.js';
import type { Config } from '../config.js';
import { createFileDocumentStore, createMemoryDocumentStore } from '../documents/index.js';
import { claimJobsDirectory, createFileJobStatusStore } from '../jobs/index.js';
import type { Fleet } from '../fleet/index.js';
import { createKeyIdentity, randomKeySalt } from '../security/key-id.js';
import { createAdapters, loadProviderSdks } from '../providers/index.js';
import { buildApp, drainApp, type DrainOutcome } from './app.js';
import { createStorageHealth, type StorageName } from './storage-health.js';
import type { LogOptions } from './logger.js';

export interface Service {
  readonly app: FastifyInstance;
  /** `http://host:port` the service listens on. */
  readonly url: string;
  /** Graceful: in-flight requests finish, then the actors stop. Live jobs are interrupted at once. */
  close(): Promise<void>;
  /**
   * SIGTERM's shutdown: new requests get 503 `SHUTTING_DOWN` while the server still listens, running jobs
   * finish for up to `graceMs` (default SHUTDOWN_GRACE_MS), the rest are left `interrupted`, then `close()`.
   */
  shutdown(graceMs?: number): Promise<DrainOutcome>;
  /** SHUTDOWN_GRACE_MS. */
  readonly shutdownGraceMs: number;
}

export interface ServiceOptions {
  readonly log?: Partial<LogOptions>;
  readonly demo?: { readonly emulatorUrl: string };
}

/** INSPECT: the live actors to Stately's inspector through the local relay (offline; loaded only when asked for). */
async function inspector(config: Config): Promise<Inspection | undefined> {
  if (!config.inspect) return undefined;
  const { startInspection } = await import('../inspect/index.js');
  const inspection = await startInspection({ host: config.inspectHost, port: config.inspectPort });
  if (inspection.viewerUrl !== undefined) console.log(`Stately inspector: ${inspection.viewerUrl}`);
  return inspection;
}

/**
 * REDIS_URL: breakers, documents and job views shared by every worker and instance (docs/fleet.md).
 * Imported only then: ioredis and the fleet code stay out of a single instance's memory.
 */
async function connectFleetIfConfigured(config: Config): Promise<Fleet | undefined> {
  if (config.redisUrl === undefined) return undefined;
  const { connectFleet } = await import('../fleet/index.js');
  return connectFleet({
    url: config.redisUrl,
    prefix: config.redisPrefix,
    breaker: config.breaker,
    providerTimeoutMs: config.providerTimeoutMs,
    maxKeys: config.keyHealth.maxKeys,
  });
}

/** The provider adapters the configuration names (base URLs, models, the TimelyGPT token lifetime). */
export function adaptersFromConfig(config: Config): ReturnType<typeof createAdapters> {
  return createAdapters({
    anthropicBaseUrl: config.baseUrls.claude,
    openaiBaseUrl: config.baseUrls.gpt,
    timelygptBaseUrl: config.baseUrls.timelygpt,
    claudeModel: config.models.claude,
    gptModel: config.models.gpt,
    timelygptModel: config.models.timelygpt,
    timelygptTokenTtlMs: config.timelygptTokenTtlMs,
  });
}

export async function startService(config: Config, options: ServiceOptions = {}): Promise<Service> {
  // No tokenizer warm-up: token counting runs in a worker started on the first text that needs it
  // (src/study/token-counter.ts), so neither idle memory nor the event loop pays for it (docs/architecture.md).
  const adapters = adaptersFromConfig(config);
  const inspection = await inspector(config);
  const inspect = inspection?.inspect;
  const fleet = await connectFleetIfConfigured(config);
  const fleetSalt = config.keyHealth.fingerprintSalt ?? (await fleet?.keySalt());
  const keySalt = fleetSalt ?? randomKeySalt();
  // Every store reports its writes here: a failed one is logged with its cause, in /readyz and /metrics.
  const storageHealth = createStorageHealth();
  const reportTo = (store: StorageName) => (error?: unknown) => storageHealth.report(store, error);
  // The fleet's salt stays in Redis while this instance uses it: a Redis that lost it gets it back.
  if (fleet !== undefined && config.keyHealth.fingerprintSalt === undefined && fleetSalt !== undefined) fleet.holdKeySalt(fleetSalt, reportTo('keySalt'));
  const gateway = createGateway({
    adapters,
    breaker: config.breaker,
    retry: config.retry,
    policy: config.fallbackMode,
    providerTimeoutMs: config.providerTimeoutMs,
    firstTokenTimeoutMs: config.firstTokenTimeoutMs,
    streamIdleTimeoutMs: config.streamIdleTimeoutMs,
    ...(inspect === undefined ? {} : { inspect }),
    ...(fleet === undefined ? {} : { fleetLink: fleet.fleetLink, keyLink: fleet.keyLink }),
    keyHealth: config.keyHealth,
    // One fingerprint per key fleet-wide: the configured salt, else the fleet's, else this process's.
    keyIdentity: createKeyIdentity(keySalt),
    pricing: createPriceTable(config.modelPrices),
  });
  // Without Redis, job records and their documents go to JOBS_DIR when this process can take it, so its
  // jobs survive a restart (docs/jobs.md "Without Redis").
  const jobsDirClaim = fleet === undefined && config.jobsDir !== undefined ? claimJobsDirectory(config.jobsDir) : undefined;
  const jobsDir = jobsDirClaim?.claimed === true ? config.jobsDir : undefined;
  const documentStore =
    fleet !== undefined
      ? fleet.documentStore(config.documentTtlSeconds, reportTo('documents'))
      : jobsDir !== undefined
        ? createFileDocumentStore({ directory: join(jobsDir, 'documents'), ttlSeconds: config.documentTtlSeconds, onWrite: reportTo('documents') })
        : createMemoryDocumentStore({ ttlSeconds: config.documentTtlSeconds });
  const app = await buildApp({
    config,
    gateway,
    documentStore,
    storageHealth,
    ...(jobsDir === undefined
      ? {}
      : {
          jobStatusStore: createFileJobStatusStore({
            directory: join(jobsDir, 'jobs'),
            maxEntries: config.jobs.maxJobs,
            interruptedTtlMs: config.jobs.ttlSeconds * 1000,
            liveTtlMs: Math.max(config.jobs.ttlSeconds * 1000, 3_600_000),
            onWrite: reportTo('jobs'),
          }),
        }),
    // Job views too (GET /v1/jobs/:id from any instance); never the keys, which stay in the job's actor.
    ...(fleet === undefined
      ? {}
      : {
          jobStatusStore: fleet.jobStatusStore({
            ttlSeconds: config.jobs.ttlSeconds,
            maxJobs: config.jobs.maxJobs,
            leaseMs: config.jobs.leaseMs,
            onWrite: reportTo('jobs'),
          }),
          jobCancelBus: fleet.jobCancelBus(),
        }),
    ...(fleet === undefined
      ? {}
      : { readiness: fleet.readiness, registerMetrics: (registry) => fleet.registerMetrics(registry) }),
    ...(options.log === undefined ? {} : { log: options.log }),
    ...(options.demo === undefined ? {} : { demo: options.demo }),
    // Request rates counted fleet-wide; a client has one id on every instance only with the fleet's salt
    // (unknown when Redis was down at start: then the ids, and so the counts, stay this instance's).
    ...(fleet === undefined
      ? {}
      : { sharedRateLimits: { redis: fleet.store.client, prefix: `${config.redisPrefix}rate:`, salt: `${fleetSalt ?? randomKeySalt()}:rate` } }),
  });
  if (jobsDirClaim !== undefined && !jobsDirClaim.claimed) {
    app.log.warn(`JOBS_DIR ${config.jobsDir ?? ''} is not usable: ${jobsDirClaim.reason}. Jobs are kept in memory only and a restart forgets them.`);
  }
  if (inspection !== undefined) app.addHook('onClose', async () => inspection.stop());
  app.log.info({ config: loggableConfig(config) }, 'effective configuration');
  for (const warning of config.warnings) app.log.warn(warning);
  if (fleet !== undefined) {
    fleet.reportTo(app.log);
    app.addHook('onClose', async () => fleet.close());
  }
  // The default order's SDKs load before the first request (Claude's is imported on first use otherwise,
  // claude-sdk.ts): imported on a request, its ~0.2 s of module evaluation stalled every request in flight.
  await loadProviderSdks(config.providersDefaultOrder.map((provider) => ({ provider })));
  const address = await app.listen({ port: config.port, host: config.host });
  return {
    app,
    url: address,
    close: () => app.close(),
    shutdownGraceMs: config.shutdownGraceMs,
    async shutdown(graceMs = config.shutdownGraceMs) {
      const outcome = await drainApp(app, graceMs);
      app.log.info(outcome, 'shutdown: jobs finished within the grace, the rest left interrupted');
      await app.close();
      return outcome;
    },
  };
}

/**
 * SIGINT/SIGTERM: graceful shutdown (`service.shutdown()`: new requests 503, running jobs finish within
 * SHUTDOWN_GRACE_MS, the rest interrupted), bounded by `deadlineMs` (default the grace plus 10 s); a
 * second signal exits at once. `onClosed` runs after the service closed (the demo stops its emulator there).
 */
export function closeOnSignals(service: Service, options: { deadlineMs?: number; onClosed?: () => Promise<void> } = {}): void {
  let closing = false;
  const handle = (signal: NodeJS.Signals): void => {
    if (closing) {
      service.app.log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    closing = true;
    service.app.log.info({ signal, graceMs: service.shutdownGraceMs }, 'shutting down: finishing running jobs and in-flight requests');
    const deadline = setTimeout(() => {
      service.app.log.error('shutdown deadline passed: exiting with requests still in flight');
      process.exit(1);
    }, options.deadlineMs ?? service.shutdownGraceMs + 10_000);
    deadline.unref();
    service
      .shutdown()
      .then(() => options.onClosed?.())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          service.app.log.error({ error: error instanceof Error ? error.message : String(error) }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGINT', handle);
  process.on('SIGTERM', handle);
}
