/**
 * The HTTP service, built apart from `listen` (tests drive it through `app.inject()`).
 * Every route is an encapsulated plugin with zod schemas through fastify-type-provider-zod; the OpenAPI
 * document is generated from those schemas. `app.close()` lets in-flight requests finish, then stops the
 * gateway's actors and closes the document store.
 */
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import Fastify from 'fastify';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Gateway } from '../actors/types.js';
import type { Config } from '../config.js';
import type { DocumentStore } from '../documents/index.js';
import type { JobCancelBus, JobRegistry, JobStatusStore } from '../jobs/index.js';
import type { Registry } from 'prom-client';
import { createProviderMetrics } from '../metrics/index.js';
import { loadTelemetry } from '../telemetry/index.js';
import { createResultCache, maxAnswerChars, setTokenWorkerNice } from '../study/index.js';
import { createAdmission } from './admission.js';
import { registerLoadMetrics, startLoadGauge } from './load-gauge.js';
import { clientErrorHandler, createErrorHandler, frameworkErrors, notFoundHandler } from './error-handler.js';
import { ApiError } from './errors.js';
import { registerJsonBodyParser } from './json-body.js';
import { registerBodyShare } from './body-share.js';
import { fastifyTrustProxy, trustedPeer } from './trust-proxy.js';
import { limitConnections } from './connection-limits.js';
import { boundPipelining } from './pipelining.js';
import { createPaceCounter, createRefusalCounter } from './refusal-metrics.js';
import { closingSweep } from './closing-sweep.js';
import { createOriginOf } from './client-address.js';
import { openApiOptions } from './openapi.js';
import { isAlreadyValidated } from './schemas.js';
import { loggerOptions } from './logger.js';
import { registerRateLimits, type SharedRateLimitStore } from './rate-limit.js';
import { createStreamAdmission } from './sse.js';
import type { LogOptions } from './logger.js';
import { documentsRoutes, largestUploadBytes } from './routes/documents.js';
import { createUploadShare, type UploadShare } from './upload-share.js';
import { createPriceTable } from '../cost/index.js';
import { generateRoutes } from './routes/generate.js';
import { jobsRoutes } from './routes/jobs.js';
import { healthRoutes } from './routes/health.js';
import type { Readiness } from './routes/health.js';
import { createStorageHealth, type StorageHealth } from './storage-health.js';
import { metricsRoutes } from './routes/metrics.js';
import { keyRoutes } from './routes/keys.js';
import { providersRoutes } from './routes/providers.js';
import { webRoutes } from './routes/web.js';
import { mebibyte } from '../units.js';

export interface AppOptions {
  readonly config: Config;
  readonly gateway: Gateway;
  readonly documentStore: DocumentStore;
  /** Where job views live (the fleet's Redis store with REDIS_URL); in process when absent. */
  readonly jobStatusStore?: JobStatusStore;
  /** Carries `DELETE /v1/jobs/:id` to the instance that runs the job (the fleet's Redis pub/sub). */
  readonly jobCancelBus?: JobCancelBus;
  /** Log level and destination; `config.logLevel` to stdout when absent. */
  readonly log?: Partial<LogOptions>;
  /** Running with the built-in emulator: shown in the OpenAPI description. */
  readonly demo?: { readonly emulatorUrl: string };
  /** What `/readyz` reports; the in-process store when absent. */
  readonly readiness?: () => Promise<Readiness>;
  /**
   * Where the stores report their writes (service.ts passes it to the stores it builds); `/readyz` says
   * `degraded` and names the cause while a store's writes fail. A fresh one (nothing fails) when absent.
   */
  readonly storageHealth?: StorageHealth;
  /** Adds more metrics to the app's registry (the fleet's `studyhelper_state_store_up`). */
  readonly registerMetrics?: (registry: Registry) => void;
  /** Process metrics in `/metrics` (default true; tests building many apps turn them off). */
  readonly processMetrics?: boolean;
  /** The request rates counted fleet-wide (REDIS_URL): the fleet's Redis, prefix and salt; per instance when absent. */
  readonly sharedRateLimits?: SharedRateLimitStore;
  /** Whether the instance counts as busy, for the equal shares of generation slots (admission.ts); this process's event loop and CPU time (load-gauge.ts) when absent. */
  readonly busy?: () => boolean;
}


/**
 * zod's serializer, except that bodies built from already validated values are not encoded a second time
 * (schemas.ts).
 */
const responseSerializerCompiler: typeof serializerCompiler = (route) => (isAlreadyValidated(route.schema) ? (data: unknown) => JSON.stringify(data) : serializerCompiler(route));

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;

/**
 * zod's compilers as Fastify's defaults: Fastify then never loads its own (ajv and fast-json-stringify:
 * heap spent on code never used here, since every route's schemas are zod's). Fastify types these factories
 * after ajv's and fast-json-stringify's function types, hence the casts.
 */
const schemaController: FastifyServerOptions['schemaController'] = {
  compilersFactory: {
    buildValidator: (() => validatorCompiler) as unknown as CompilersFactory['buildValidator'],
    buildSerializer: (() => responseSerializerCompiler) as unknown as CompilersFactory['buildSerializer'],
  },
};

/**
 * The JSON body of every route but generate (job creation, breaker control, the demo's fault panel): a
 * few hundred bytes each; 16 KiB leaves room and refuses anything bigger while it streams.
 */
const smallBodyLimit = 16 * 1024;

/**
 * The JSON body of POST /v1/generate: room for a `text` of MAX_TEXT_CHARS characters and an
 * `options.notes` as long as the longest notes answer (`maxAnswerChars('notes')`), even if every
 * character is sent as a 6-byte `\uXXXX` escape, plus 4 KiB for the rest; never above MAX_UPLOAD_MB.
 * A body over it is cut while it streams (413 REQUEST_TOO_LARGE), never parsed.
 */
function generateBodyLimit(config: Pick<Config, 'maxUploadMb' | 'maxTextChars'>): number {
  return Math.min(Math.ceil(config.maxUploadMb * mebibyte), (config.maxTextChars + maxAnswerChars('notes')) * 6 + 4096);
}

/** Bytes of a refused request's unread body still read and dropped to keep its connection. */
const smallBodyBytes = 64 * 1024;

/** A body declared no longer than `smallBodyBytes` (a chunked one, of unknown length, is not). */
function isSmallBody(headers: { readonly 'content-length'?: string | undefined }): boolean {
  const declared = Number(headers['content-length'] ?? Number.NaN);
  return Number.isFinite(declared) && declared <= smallBodyBytes;
}

/**
 * The upload share of `config`, and the time an admitted upload has to arrive: the request deadline less the
 * headers' (they may have taken that long). The bucket is raised so that one upload of the largest size
 * the route takes, from an address with nothing in flight, always arrives in time. None when off.
 */
function uploadShareOf(config: Config): { share: UploadShare; timeLeftMs: number } | undefined {
  const { bytesPerSecond, burstBytes } = config.uploadShare;
  if (bytesPerSecond <= 0) return undefined;
  const timeLeftMs = Math.max(1, config.server.requestTimeoutMs - config.server.headersTimeoutMs);
  const largest = largestUploadBytes(config.maxUploadMb);
  return {
    share: createUploadShare({ bytesPerSecond, burstBytes: Math.max(burstBytes, Math.ceil(largest - (bytesPerSecond * timeLeftMs) / 1000)) }),
    timeLeftMs,
  };
}

/** What a drain did: jobs that finished within the grace, and jobs left interrupted. */
export interface DrainOutcome {
  readonly finished: number;
  readonly interrupted: number;
}

const drains = new WeakMap<FastifyInstance, (graceMs: number) => Promise<DrainOutcome>>();

/**
 * The first step of a shutdown (SIGTERM), before `app.close()`: from now on every new request gets 503
 * `SHUTTING_DOWN` (the server still listens, so no client meets a reset connection), running jobs may
 * finish for up to `graceMs`, and the rest are left `interrupted` (resumable on another instance), their
 * records written. Open event streams of jobs that finish get their `done`.
 */
export function drainApp(app: FastifyInstance, graceMs: number): Promise<DrainOutcome> {
  const drain = drains.get(app);
  return drain === undefined ? Promise.resolve({ finished: 0, interrupted: 0 }) : drain(graceMs);
}

/**
 * The service. `app.close()` is the graceful shutdown: from its start new requests get 503
 * `SHUTTING_DOWN`, in-flight ones finish, then the gateway stops and the document store closes.
 */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const { config, documentStore } = options;
  // Traces only with an OTLP endpoint (OTEL_* variables): otherwise the SDK is never even loaded.
  const telemetry = config.telemetry === undefined ? undefined : await loadTelemetry(config.telemetry);
  const gateway = telemetry?.traceGateway(options.gateway) ?? options.gateway;
  const logLevel = options.log?.level ?? config.logLevel;
  const app = Fastify({
    // LOG_LEVEL=silent: Fastify's null logger, which skips the pino child logger it makes for every request.
    logger: logLevel === 'silent' ? false : loggerOptions({ level: logLevel, ...(options.log?.stream ? { stream: options.log.stream } : {}) }),
    // We answer 503 ourselves during shutdown, with the contract body (Fastify's own would not be).
    return503OnClosing: false,
    // Idle keep-alive sockets close at once on shutdown; requests in flight still finish.
    forceCloseConnections: 'idle',
    clientErrorHandler,
    frameworkErrors,
    bodyLimit: smallBodyLimit,
    requestIdHeader: false,
    // zod validates and serializes every route (below): Fastify's own compilers (ajv, fast-json-stringify)
    // are never used, and naming ours here keeps Fastify from loading theirs (their heap, for nothing).
    schemaController,
    // Behind a proxy, the client's address (per-address shares and rates) comes from X-Forwarded-For.
    trustProxy: fastifyTrustProxy(config.server.trustProxy),
    // Slow clients are cut (else they hold sockets at will): headers and the whole request have deadlines,
    // idle sockets close.
    requestTimeout: config.server.requestTimeoutMs,
    connectionTimeout: config.server.connectionTimeoutMs,
    keepAliveTimeout: config.server.keepAliveTimeoutMs,
    http: {
      headersTimeout: config.server.headersTimeoutMs,
      requestTimeout: config.server.requestTimeoutMs,
      // Node checks both deadlines on this interval (30 s by default): often enough that they hold.
      connectionsCheckingInterval: Math.max(50, Math.min(30_000, Math.floor(config.server.headersTimeoutMs / 4))),
    },
  }).withTypeProvider<ZodTypeProvider>();

  // A client that sent its whole request and half-closed (shutdown(SHUT_WR)) still gets its answer: by
  // default Node ends such a socket on the client's FIN, and a refusal held back by REFUSAL_DELAY_MS (a 413
  // for a body over its limit) was then never written. With this flag Node answers the request in flight and
  // ends the socket after that answer (`_http_server.js` socketOnEnd); request deadlines still bound it.
  (app.server as typeof app.server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  // Open connections bounded per address and per instance, refused as they are accepted, so one
  // address cannot exhaust the process's file descriptors.
  // Every refusal by a bound is counted (`studyhelper_refusals_total`, registered with the other metrics below).
  const refusals = createRefusalCounter();
  // Every request an address's share made wait (paces refuse nothing, so the refusals never show them).
  const paces = createPaceCounter();
  limitConnections(app.server, {
    maxConnections: config.server.maxConnections,
    maxPerAddress: config.server.maxConnectionsPerAddress,
    exempt: trustedPeer(config.server.trustProxy),
    onRefused: (limit) => refusals.count({ limit, what: 'connections' }),
  });
  // Each address's share of the upload bytes read here (upload-share.ts): its uploads' bodies are fed to the
  // parser no faster than it (pipelining.ts pauses their sockets meanwhile).
  const uploads = uploadShareOf(config);
  // A connection's pipelined requests are parsed one after another as they are answered, and an address's
  // requests no faster than its share (pipelining.ts).
  boundPipelining(app.server, {
    exempt: trustedPeer(config.server.trustProxy),
    requestsPerSecond: config.server.requestsPerSecondPerAddress,
    ...(uploads === undefined ? {} : { bodyPacer: uploads.share.pacer }),
    onPaced: paces.count,
  });

  // Server spans first, so that every hook and route below runs inside its request's span.
  await telemetry?.registerServerSpans(app);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler<Parameters<typeof serializerCompiler>[0]['schema']>(responseSerializerCompiler);
  app.setErrorHandler(createErrorHandler({ refusalDelayMs: config.admission.refusalDelayMs, onRefusal: refusals.count }));
  app.setNotFoundHandler(notFoundHandler);
  // JSON in, JSON out: a text/plain body is refused (400) rather than handed to a schema as a string.
  app.removeContentTypeParser('text/plain');
  // Nesting bounded before JSON.parse sees a body (a deep one would stall the event loop).
  registerJsonBodyParser(app);
  // Each address's share of the body bytes parsed here, taken before a body is read (body-share.ts); the
  // bucket always holds at least the largest body a route takes, so one honest maximal body always passes.
  registerBodyShare(app, {
    bytesPerSecond: config.bodyShare.bytesPerSecond,
    burstBytes: Math.max(config.bodyShare.burstBytes, generateBodyLimit(config), smallBodyLimit),
  });

  let shuttingDown = false;
  // Connections that would hold close() open (idle only later, or a request still arriving): cleared while it closes.
  const sweep = closingSweep(app.server, config.server.headersTimeoutMs);
  app.addHook('preClose', async () => {
    shuttingDown = true;
    sweep.start();
  });
  let jobRegistry: JobRegistry | undefined;
  drains.set(app, async (graceMs) => {
    shuttingDown = true;
    return jobRegistry === undefined ? { finished: 0, interrupted: 0 } : jobRegistry.drain(graceMs);
  });
  // Both hooks run on every request: callback style, so the common case (not shutting down) settles
  // without a promise and a microtask each.
  app.addHook('onRequest', (_request, _reply, done) => {
    done(shuttingDown ? new ApiError('SHUTTING_DOWN', 'The service is shutting down; retry against another instance.') : undefined);
  });
  // A keep-alive socket whose request was in flight when shutdown began would otherwise hold
  // `close()` open until the keep-alive timeout: answer it and close it. So is a request answered before
  // a large body was read (refused on its headers: over a rate or a share, the extractor's queue full):
  // kept alive, Node would read the rest of the body to throw it away, at full speed, for every refused
  // upload of a flood; closed, what the client still sends is not read at all. A small body is read and
  // dropped as before, so a refused client keeps its connection.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (shuttingDown || (!request.raw.complete && !isSmallBody(request.headers))) void reply.header('connection', 'close');
    done(null, payload);
  });

  // The document says what the routes take and give: streams, key headers, the upload, components (openapi.ts).
  await app.register(fastifySwagger, openApiOptions(options.demo));
  // The document is static once built: serialized once, not for every request (a flood of keep-alive
  // connections would otherwise have it built for each). The UI's own copy, `/docs/json`, is that text too.
  let openapiJson: string | undefined;
  const openapiText = (): string => (openapiJson ??= JSON.stringify(app.swagger()));
  await app.register(fastifySwaggerUi, {
    routePrefix: '/docs',
    uiHooks: {
      onRequest: (request, reply, done) => {
        if (request.routeOptions.url !== '/docs/json') {
          done();
          return;
        }
        void reply.type('application/json; charset=utf-8').send(openapiText());
      },
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async (_request, reply) => reply.type('application/json; charset=utf-8').send(openapiText()));

  // The process's token worker (one per process, started on the first long text) runs at WORKER_NICE.
  setTokenWorkerNice(config.workerNice);
  // One results cache per app: the same document, task and options are paid for once.
  const resultCache = createResultCache();
  const metrics = createProviderMetrics(gateway, { processMetrics: options.processMetrics ?? true });
  options.registerMetrics?.(metrics.registry);
  refusals.register(metrics.registry);
  paces.register(metrics.registry);
  const storageHealth = options.storageHealth ?? createStorageHealth();
  storageHealth.register(metrics.registry);
  storageHealth.attachLog(app.log);
  const storeReadiness = options.readiness ?? (async (): Promise<Readiness> => ({ store: 'memory', storeReachable: true }));
  const readiness = async (): Promise<Readiness> => ({ ...(await storeReadiness()), failures: storageHealth.failures() });

  // Before the routes: the plugin adds its check to the routes that ask for one (uploads, job creations).
  await registerRateLimits(app, options.sharedRateLimits);
  const rateSalt = options.sharedRateLimits === undefined ? {} : { salt: options.sharedRateLimits.salt };
  // While the process is busy, the addresses holding generation slots share them equally (admission.ts),
  // and scrapes of /metrics within a second share one rendering.
  const loadGauge = options.busy === undefined ? startLoadGauge() : undefined;
  const busy = options.busy ?? loadGauge?.busy ?? ((): boolean => false);
  registerLoadMetrics(metrics.registry, busy, loadGauge);
  await app.register(healthRoutes, { readiness });
  await app.register(metricsRoutes, { metrics, busy });
  await app.register(providersRoutes, { gateway, adminToken: config.adminToken });
  const originOf = createOriginOf(options.sharedRateLimits?.salt);
  const windowSeconds = config.rateLimit.windowSeconds;
  await app.register(keyRoutes, { gateway, rateLimit: { max: config.rateLimit.keyStatus, windowSeconds, ...rateSalt } });
  await app.register(documentsRoutes, {
    store: documentStore,
    maxUploadMb: config.maxUploadMb,
    maxPdfPages: config.maxPdfPages,
    pdfLimits: {
      maxDecodedBytes: config.pdf.maxDecodedMb * mebibyte,
      maxTotalPages: config.pdf.maxTotalPages,
      maxTextBytes: config.pdf.maxTextMb * mebibyte,
    },
    rateLimit: { max: config.rateLimit.uploads, windowSeconds: config.rateLimit.windowSeconds, ...rateSalt },
    ...(uploads === undefined ? {} : { uploadShare: uploads }),
    extractorOptions: {
      workers: config.pdf.workers,
      queueMax: config.pdf.queueMax,
      timeoutMs: config.pdf.timeoutMs,
      memoryMb: config.pdf.workerMemoryMb,
      nice: config.workerNice,
    },
  });
  const prices = createPriceTable(config.modelPrices);
  const admission = createAdmission({ ...config.admission, busy });
  await app.register(generateRoutes, {
    gateway,
    documentStore,
    defaultOrder: config.providersDefaultOrder,
    fallbackMode: config.fallbackMode,
    bodyLimit: generateBodyLimit(config),
    maxTextChars: config.maxTextChars,
    maxTextParts: config.maxTextParts,
    prices,
    admission,
    rateLimit: { max: config.rateLimit.generations, windowSeconds, ...rateSalt },
    originOf,
    sseMaxBufferBytes: config.server.sseMaxBufferBytes,
  });
  // The web page, the live breaker stream and (demo mode) the fault panel's proxy to the emulator.
  // The event streams of both kinds share one bound per client and per instance (src/http/sse.ts).
  const streams = createStreamAdmission({
    maxStreams: config.server.sseMaxStreams,
    maxStreamsPerClient: config.server.sseMaxStreamsPerClient,
    retryAfterSeconds: config.admission.retryAfterSeconds,
  });
  await app.register(webRoutes, { gateway, streams, sseMaxBufferBytes: config.server.sseMaxBufferBytes, ...(options.demo === undefined ? {} : { demo: options.demo }) });
  // Jobs (POST/GET/DELETE /v1/jobs, SSE events) register here: `await app.register(jobsRoutes, {...})`.
  await app.register(jobsRoutes, {
    gateway,
    documentStore,
    defaultOrder: config.providersDefaultOrder,
    fallbackMode: config.fallbackMode,
    resultCache,
    jobs: config.jobs,
    maxTextParts: config.maxTextParts,
    prices,
    retryMax: config.retry.max,
    retryAfterSeconds: config.admission.retryAfterSeconds,
    rateLimit: { max: config.rateLimit.jobs, windowSeconds: config.rateLimit.windowSeconds, ...rateSalt },
    originOf,
    sseMaxBufferBytes: config.server.sseMaxBufferBytes,
    streams,
    // While the instance is busy and other addresses are served, an address runs one job at a time (registry.ts).
    busy,
    othersActive: (address) => admission.othersActive(address),
    ...(options.jobStatusStore === undefined ? {} : { statusStore: options.jobStatusStore }),
    ...(options.jobCancelBus === undefined ? {} : { cancelBus: options.jobCancelBus }),
    ...(telemetry === undefined ? {} : { tracer: telemetry.jobs }),
    onRegistry: (registry) => {
      jobRegistry = registry;
    },
  });

  app.addHook('onClose', async () => {
    loadGauge?.stop();
    metrics.stop();
    await gateway.stop();
    await documentStore.close?.();
    // Last: the spans of everything that ended above are exported before the app is closed. A collector
    // that is down loses them, and only them: the shutdown goes on.
    await telemetry?.shutdown().catch((error: unknown) => {
      app.log.warn({ error: error instanceof Error ? error.message : String(error) }, 'telemetry: spans not exported at shutdown');
    });
  });

  return app;
}
