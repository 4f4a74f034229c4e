/**
 * `/v1/jobs`: the whole pipeline (notes → mcq → fill) in the background (docs/api.md), one job actor per job
 * (src/machines/job.machine.ts) held by the job registry (src/jobs). Progress and attempts stream over
 * server-sent events, written by hand on the raw socket after `reply.hijack()` (the protocol is a few
 * lines of text; no plugin needed). The keys travel from the request headers into the job actor only.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { FallbackPolicy, Gateway } from '../../actors/types.js';
import type { DocumentStore } from '../../documents/index.js';
import {
  createJobRegistry,
  JobCapacityError,
  JobNotResumableError,
  jobStages,
  jobStatuses,
  JobStoreUnavailableError,
  keysMatch,
} from '../../jobs/index.js';
import type { JobCancelBus, JobRegistry, JobSpec, JobStatusStore, JobStreamEvent, JobTracer } from '../../jobs/index.js';
import type { ProviderId } from '../../providers/index.js';
import { defaultQuestionCount, estimateJob, resolveLang, TooManyPartsError } from '../../study/index.js';
import type { ResultCache } from '../../study/index.js';
import { createPriceTable, type PriceTable } from '../../cost/index.js';
import { clientIdOf, type Admission } from '../admission.js';
import { ApiError } from '../errors.js';
import { safeSegment } from '../../security/safe-url.js';
import { routeRateLimit } from '../rate-limit.js';
import { shareAddress } from '../client-address.js';
import type { RouteRateLimit } from '../rate-limit.js';
import { defaultSseMaxBufferBytes, enterStream, openEventStream } from '../sse.js';
import { buildChain, keyHeaders, readProviderKeys, requireChain } from '../keys.js';
import {
  attemptSchema,
  errorBodySchema,
  fillComponentSchema,
  maxCostUsdSchema,
  mcqComponentSchema,
  notesComponentSchema,
  outputLanguageSchema,
  providerIdSchema,
  providerOrderSchema,
  streamItemFields,
  usageSchema,
} from '../schemas.js';
import { eventStreamResponse, keySecurity } from '../openapi.js';
import { loadDocumentOrThrow } from './documents.js';
import { documentSourceOrThrow, pageRangeSchema } from '../document-source.js';
import { jobCacheKey } from '../../jobs/index.js';

export interface JobsRoutesOptions {
  readonly gateway: Gateway;
  readonly documentStore: DocumentStore;
  readonly defaultOrder: readonly ProviderId[];
  readonly fallbackMode: FallbackPolicy;
  /** The app's results cache (one per app): a job over a document already done costs no provider call. */
  readonly resultCache?: ResultCache;
  /** Whether the instance is busy, and whether other addresses hold generation slots: `JobRegistryOptions`. */
  readonly busy?: () => boolean;
  readonly othersActive?: (address: string) => boolean;
  readonly jobs: {
    readonly ttlSeconds: number;
    readonly concurrency: number;
    readonly maxJobs: number;
    readonly partBudgetTokens: number;
    readonly maxJobsPerClient?: number;
    readonly maxJobsPerAddress?: number;
    readonly concurrencyPerClient?: number;
    readonly concurrencyPerAddress?: number;
    /** JOB_LEASE_MS: how long a job's lease lives without renewal (default 15 000). */
    readonly leaseMs?: number;
  };
  /** Job creations per client per window (RATE_LIMIT_JOBS); none when absent. */
  readonly rateLimit?: Pick<RouteRateLimit, 'max' | 'windowSeconds' | 'salt'>;
  /** The origin handed to the gateway for a client address (client-address.ts); none when absent. */
  readonly originOf?: (ip: string) => string;
  /** `Retry-After` of a refused job (5 in the service). */
  readonly retryAfterSeconds?: number;
  /** Most parts a stage may split the document into (MAX_TEXT_PARTS). */
  readonly maxTextParts?: number;
  /** The price table `options.maxCostUsd` and the estimate are counted in; without it jobs have no budget. */
  readonly prices?: PriceTable;
  /** RETRY_MAX: the retries per provider the estimate's worst case allows for (default 2). */
  readonly retryMax?: number;
  /** SSE comment lines this often keep proxies from closing a quiet stream (default 15 s). */
  readonly heartbeatMs?: number;
  /** Most bytes queued for one event stream's client before it is dropped (64 KiB in the service). */
  readonly sseMaxBufferBytes?: number;
  /** The instance's event-stream slots, shared with the providers stream (SSE_MAX_STREAMS[_PER_CLIENT]); unbounded when absent. */
  readonly streams?: Admission;
  /** Where job views live (REDIS_URL: the fleet's Redis store); in process when absent. */
  readonly statusStore?: JobStatusStore;
  /** Carries a cancel to the instance that runs the job (REDIS_URL); without it only local jobs cancel. */
  readonly cancelBus?: JobCancelBus;
  /** Traces each job's stages and parts (OTEL_* variables, src/telemetry); untraced when absent. */
  readonly tracer?: JobTracer;
  /** Receives the registry the plugin creates (tests, metrics and the shutdown's drain use it). */
  readonly onRegistry?: (registry: JobRegistry) => void;
}

const countSchema = z.int().min(1).max(50);

const createJobBodySchema = z.strictObject({
  documentId: z.string().min(1).max(200).describe('An id from POST /v1/documents.'),
  pages: pageRangeSchema.optional(),
  providers: providerOrderSchema,
  options: z
    .strictObject({
      lang: outputLanguageSchema,
      mcqCount: countSchema
        .optional()
        .describe(`Multiple-choice questions asked for (default ${defaultQuestionCount}).`),
      fillCount: countSchema
        .optional()
        .describe(`Fill-in-the-blank questions asked for (default ${defaultQuestionCount}).`),
      maxCostUsd: maxCostUsdSchema,
    })
    .optional(),
  estimate: z
    .literal(true)
    .optional()
    .describe('Price the job instead of starting it: 200 {"estimate":…}, no job, no provider call.'),
});

/**
 * A job is taken only if its records can be stored: while the job store refuses writes (a full disk, a
 * read-only JOBS_DIR) a new or resumed job would run unstored, its parts paid for and lost with a restart.
 */
async function requireWritableStore(registry: JobRegistry, retryAfterSeconds: number): Promise<void> {
  if (await registry.writable()) return;
  throw new ApiError('STORAGE_UNAVAILABLE', 'The job records cannot be stored right now (the store refuses writes; /readyz names the cause); no job was created.', {
    retryAfterSeconds,
  });
}

const estimateResponseSchema = z
  .object({
    estimate: z.object({
      parts: z.number().int().describe("The parts the document's text is cut into for its notes."),
      inputTokens: z.number().int().describe('Input tokens of every call the job may make, re-asks and retries included.'),
      outputTokensMax: z.number().int().describe('Output tokens those calls may write at most.'),
      costUsdMax: z
        .record(z.string(), z.number().nullable())
        .describe("Per provider of the chain: the job's worst case in USD with that provider answering every call; null when its model has no price."),
    }),
  })
  .describe('What the job may cost at most (no job was made, no provider asked).')
  .meta({ id: 'JobEstimate' });

const jobParamsSchema = z.object({ id: z.string().min(1).max(200) });

const stageMetaSchema = z.object({
  provider: providerIdSchema,
  model: z.string(),
  fallback: z.boolean(),
  attempts: z.array(attemptSchema).readonly(),
  usage: usageSchema,
  cached: z.boolean(),
}).meta({ id: 'StageMeta', description: 'Which provider answered a stage, after which attempts; cached when no call was made.' });

const stageSchema = z.enum(['queued', ...jobStages, 'done']);

const jobViewSchema = z
  .object({
    jobId: z.string(),
    status: z.enum(jobStatuses),
    progress: z.number().min(0).max(100),
    stage: stageSchema.describe(
      'queued, the stage in progress (notes, mcq, fill), the stage it stopped in, or done.',
    ),
    result: z
      .union([
        z.object({ notes: notesComponentSchema, mcq: mcqComponentSchema, fill: fillComponentSchema }),
        z.object({ notes: notesComponentSchema.optional(), mcq: mcqComponentSchema.optional(), fill: fillComponentSchema.optional() }),
      ])
      .optional()
      .describe('When succeeded, every stage; when failed, the stages the job finished before it stopped.'),
    costUsd: z
      .number()
      .nullable()
      .optional()
      .describe("USD spent so far: the sum of every attempt's costUsd (resumed parts counted once); null while none could be priced."),
    error: z
      .object({
        code: z.string(),
        message: z.string(),
        attempts: z.array(attemptSchema).readonly(),
        retryAfterSeconds: z.number().int().min(0).optional(),
      })
      .optional()
      .describe('When failed: the contract error body of the stage that failed.'),
    meta: z
      .object({
        lang: z.enum(['ko', 'en']),
        langSource: z
          .enum(['request', 'detected'])
          .optional()
          .describe('request: options.lang gave the language; detected: read from the document.'),
        mcqCount: z.number().int(),
        fillCount: z.number().int(),
        maxCostUsd: z.number().optional().describe("options.maxCostUsd: the job's spending limit."),
        stages: z.object({
          notes: stageMetaSchema.optional(),
          mcq: stageMetaSchema.optional(),
          fill: stageMetaSchema.optional(),
        }),
        attempts: z.array(attemptSchema).readonly(),
        failedStage: z.enum(jobStages).optional(),
      })
      .optional(),
    createdAt: z.number(),
    finishedAt: z.number().optional(),
    resumable: z
      .literal(true)
      .optional()
      .describe('On an interrupted job: POST /v1/jobs/:id/resume with the same key headers continues it.'),
  })
  .meta({ id: 'Job', description: "A job's status, progress, and when finished its result or error." });

/** The 202 of a job created or resumed. */
const jobQueuedSchema = z.object({ jobId: z.string(), status: z.literal('queued') }).meta({ id: 'JobQueued' });

/** The events of `GET /v1/jobs/:id/events`, each one's `data`. */
const jobStreamEvents = {
  progress: z
    .object({
      progress: z.number().min(0).max(100),
      stage: stageSchema,
      part: z.number().int().min(1).optional(),
      parts: z.number().int().min(1).optional(),
    })
    .describe('How far the job is: the current progress comes first, then every change.'),
  attempt: attemptSchema,
  item: z
    .object({ task: z.enum(jobStages), ...streamItemFields })
    .describe("An element of a stage's result as soon as it is complete and valid."),
  reset: z
    .object({ task: z.enum(jobStages), provider: providerIdSchema, reason: z.string() })
    .describe("The stage's items sent so far are void."),
  done: z
    .object({ status: z.enum(['succeeded', 'failed', 'cancelled', 'interrupted']) })
    .describe('The last event: the status the job ended in (GET /v1/jobs/:id has its result or error).'),
};

function notFound(id: string): ApiError {
  return new ApiError(
    'JOB_NOT_FOUND',
    `No job ${JSON.stringify(safeSegment(id.slice(0, 100)))}: it is unknown or has expired (JOB_TTL_SECONDS).`,
  );
}

function notResumable(status: string): ApiError {
  return new ApiError('JOB_NOT_RESUMABLE', `The job is ${status}: only an interrupted job can be resumed.`);
}

/** Seconds a client waits before reading a job again while the shared store is unreachable. */
const storeRetryAfterSeconds = 2;

/**
 * A job read that the shared store could not answer is 503 `JOB_STORE_UNAVAILABLE` with `Retry-After`,
 * never 404: the job may well exist (docs/fleet.md "Redis outages").
 */
async function fromStore<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (!(error instanceof JobStoreUnavailableError)) throw error;
    throw new ApiError('JOB_STORE_UNAVAILABLE', `${error.message} Retry shortly.`, {
      retryAfterSeconds: storeRetryAfterSeconds,
    });
  }
}

function capacityRefusal(error: JobCapacityError, retryAfterSeconds: number): ApiError {
  const limit = error.scope === 'instance' ? 'instance' : error.scope === 'client' ? 'client_share' : 'address_share';
  return new ApiError(
    error.scope === 'instance' ? 'TOO_MANY_JOBS' : 'TOO_MANY_REQUESTS',
    error.message,
    { retryAfterSeconds },
    { limit, what: 'jobs' },
  );
}


export const jobsRoutes: FastifyPluginAsyncZod<JobsRoutesOptions> = async (app, options) => {
  const registry = createJobRegistry({
    gateway: options.gateway,
    policy: options.fallbackMode,
    ...(options.resultCache === undefined ? {} : { cache: options.resultCache }),
    budgetTokens: options.jobs.partBudgetTokens,
    ...(options.maxTextParts === undefined ? {} : { maxParts: options.maxTextParts }),
    ...(options.prices === undefined ? {} : { prices: options.prices }),
    concurrency: options.jobs.concurrency,
    maxJobs: options.jobs.maxJobs,
    ...(options.jobs.maxJobsPerClient === undefined ? {} : { maxJobsPerClient: options.jobs.maxJobsPerClient }),
    ...(options.jobs.maxJobsPerAddress === undefined ? {} : { maxJobsPerAddress: options.jobs.maxJobsPerAddress }),
    ...(options.jobs.concurrencyPerClient === undefined ? {} : { concurrencyPerClient: options.jobs.concurrencyPerClient }),
    ...(options.jobs.concurrencyPerAddress === undefined ? {} : { concurrencyPerAddress: options.jobs.concurrencyPerAddress }),
    ttlSeconds: options.jobs.ttlSeconds,
    ...(options.busy === undefined ? {} : { busy: options.busy }),
    ...(options.othersActive === undefined ? {} : { othersActive: options.othersActive }),
    ...(options.statusStore === undefined ? {} : { store: options.statusStore }),
    ...(options.cancelBus === undefined ? {} : { cancelBus: options.cancelBus }),
    ...(options.jobs.leaseMs === undefined ? {} : { leaseMs: options.jobs.leaseMs }),
    ...(options.tracer === undefined ? {} : { tracer: options.tracer }),
  });
  options.onRegistry?.(registry);
  const retryAfterSeconds = options.retryAfterSeconds ?? 5;
  const creationLimit =
    options.rateLimit === undefined
      ? false
      : routeRateLimit({ ...options.rateLimit, what: 'job creations', variable: 'RATE_LIMIT_JOBS', client: 'byKeys' });
  const heartbeatMs = options.heartbeatMs ?? 15_000;

  // Before the server waits for open connections: cancelling every job ends every event stream.
  app.addHook('preClose', async () => {
    await registry.stop();
  });

  app.post(
    '/v1/jobs',
    {
      config: { rateLimit: creationLimit },
      schema: {
        tags: ['jobs'],
        summary: 'Start a background job: notes, then MCQ and fill-in-the-blank questions grounded on them.',
        description: `Provider keys travel in the headers ${Object.values(keyHeaders).join(', ')} and are held in memory for the job's life only.`,
        security: keySecurity,
        body: createJobBodySchema,
        response: {
          200: estimateResponseSchema,
          202: jobQueuedSchema,
          400: errorBodySchema,
          404: errorBodySchema,
          413: errorBodySchema,
          422: errorBodySchema,
          429: errorBodySchema,
          503: errorBodySchema,
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const order = body.providers ?? options.defaultOrder;
      const keys = readProviderKeys(request.headers);
      const chain = requireChain(order, keys);
      const document = await loadDocumentOrThrow(options.documentStore, body.documentId);
      const source = documentSourceOrThrow(document, body.pages);
      if (body.estimate === true) {
        const estimate = await estimateJob({
          text: source.text,
          lang: resolveLang(body.options?.lang, source.text).lang,
          mcqCount: body.options?.mcqCount ?? defaultQuestionCount,
          fillCount: body.options?.fillCount ?? defaultQuestionCount,
          budgetTokens: options.jobs.partBudgetTokens,
          retryMax: options.retryMax ?? 2,
          chain: chain.map((link) => ({ provider: link.provider, model: options.gateway.provider(link.provider).model })),
          prices: options.prices ?? createPriceTable(),
          maxParts: options.maxTextParts,
          pageMap: source.pageMap,
        }).catch((error: unknown) => {
          // Refused as the job itself would be, with the same advice (how many pages fit).
          throw error instanceof TooManyPartsError ? new ApiError('TOO_MANY_PARTS', error.message) : error;
        });
        return reply.code(200).send({ estimate });
      }
      await requireWritableStore(registry, retryAfterSeconds);
      let view;
      try {
        view = registry.create({
          text: source.text,
          ...(source.pageMap === undefined ? {} : { pageMap: source.pageMap }),
          ...(body.pages === undefined ? {} : { pages: body.pages }),
          documentId: body.documentId,
          cacheKey: jobCacheKey(document.sha256, body.pages),
          ...resolveLang(body.options?.lang, source.text),
          mcqCount: body.options?.mcqCount ?? defaultQuestionCount,
          fillCount: body.options?.fillCount ?? defaultQuestionCount,
          chain,
          clientId: clientIdOf(keys, request.ip),
          address: shareAddress(request.ip),
          ...(options.originOf === undefined ? {} : { origin: options.originOf(request.ip) }),
          ...(body.options?.maxCostUsd === undefined ? {} : { maxCostUsd: body.options.maxCostUsd }),
        });
      } catch (error) {
        if (error instanceof JobCapacityError) throw capacityRefusal(error, retryAfterSeconds);
        throw error;
      }
      return reply.code(202).send({ jobId: view.jobId, status: 'queued' as const });
    },
  );

  app.get(
    '/v1/jobs/:id',
    {
      schema: {
        tags: ['jobs'],
        summary: "A job's status, progress, and when finished its result or error.",
        params: jobParamsSchema,
        response: { 200: jobViewSchema, 404: errorBodySchema, 503: errorBodySchema },
      },
    },
    async (request) => {
      const view = await fromStore(() => registry.get(request.params.id));
      if (view === undefined) throw notFound(request.params.id);
      return view;
    },
  );

  app.delete(
    '/v1/jobs/:id',
    {
      schema: {
        tags: ['jobs'],
        summary: 'Cancel a job: calls in flight are aborted and never count toward a breaker.',
        description:
          'Answers the job as it is after the cancel; an interrupted job becomes cancelled (no longer resumable); ' +
          'a finished job is left as it is.',
        params: jobParamsSchema,
        response: { 200: jobViewSchema, 404: errorBodySchema, 503: errorBodySchema },
      },
    },
    async (request) => {
      const view = await fromStore(() => registry.cancel(request.params.id));
      if (view === undefined) throw notFound(request.params.id);
      return view;
    },
  );

  app.post(
    '/v1/jobs/:id/resume',
    {
      config: { rateLimit: creationLimit },
      schema: {
        tags: ['jobs'],
        summary: 'Continue an interrupted job on this instance, from its first unfinished part.',
        description:
          `Send the key headers the job was created with (${Object.values(keyHeaders).join(', ')}); they are ` +
          "compared with the job's salted fingerprints, never stored. Finished stages and parts are kept and " +
          'never asked of a provider again. 403 JOB_FORBIDDEN with other keys; 409 JOB_NOT_RESUMABLE when the ' +
          'job is not interrupted.',
        security: keySecurity,
        params: jobParamsSchema,
        response: {
          202: jobQueuedSchema,
          403: errorBodySchema,
          404: errorBodySchema,
          409: errorBodySchema,
          429: errorBodySchema,
          503: errorBodySchema,
        },
      },
    },
    async (request, reply) => {
      const jobId = request.params.id;
      const record = await fromStore(() => registry.record(jobId));
      if (record === undefined) throw notFound(jobId);
      const resume = record.resume;
      // A job that ended for good keeps no fingerprints: nothing to compare, nothing to resume.
      if (resume === undefined) throw notResumable(record.status);
      const keys = readProviderKeys(request.headers);
      if (!keysMatch(resume, keys))
        throw new ApiError(
          'JOB_FORBIDDEN',
          `A job is resumed only with the key headers it was created with (${resume.providers.map((id) => keyHeaders[id]).join(', ')}).`,
        );
      if (record.status !== 'interrupted') throw notResumable(record.status);
      const document = await loadDocumentOrThrow(options.documentStore, resume.documentId);
      if (jobCacheKey(document.sha256, resume.pages) !== resume.cacheKey) throw notResumable('bound to a document that changed');
      await requireWritableStore(registry, retryAfterSeconds);
      // The same pages as the job started on (a range the document no longer has cannot happen: same sha256).
      const source = documentSourceOrThrow(document, resume.pages);
      const meta = record.meta;
      const spec: JobSpec = {
        text: source.text,
        ...(source.pageMap === undefined ? {} : { pageMap: source.pageMap }),
        ...(resume.pages === undefined ? {} : { pages: resume.pages }),
        documentId: resume.documentId,
        cacheKey: resume.cacheKey,
        ...(meta === undefined
          ? resolveLang(undefined, source.text)
          : { lang: meta.lang, ...(meta.langSource === undefined ? {} : { langSource: meta.langSource }) }),
        mcqCount: meta?.mcqCount ?? defaultQuestionCount,
        fillCount: meta?.fillCount ?? defaultQuestionCount,
        // The budget goes on counting what the finished parts cost (the registry starts it there).
        ...(meta?.maxCostUsd === undefined ? {} : { maxCostUsd: meta.maxCostUsd }),
        chain: buildChain(resume.providers, keys),
        clientId: clientIdOf(keys, request.ip),
        address: request.ip,
      };
      try {
        await registry.resume(record, spec);
      } catch (error) {
        if (error instanceof JobCapacityError) throw capacityRefusal(error, retryAfterSeconds);
        if (error instanceof JobNotResumableError) throw notResumable(error.status);
        throw error;
      }
      return reply.code(202).send({ jobId, status: 'queued' as const });
    },
  );

  app.get(
    '/v1/jobs/:id/events',
    {
      schema: {
        tags: ['jobs'],
        summary: "A job's events as text/event-stream: progress, attempt, and one terminal done.",
        description:
          'Events: `progress` ({progress, stage, part?, parts?}), `attempt` (an Attempt), `item` ({task, kind, value}: an element of a stage\'s result as soon as it is complete), `reset` ({task, provider, reason}), `done` ({status}). ' +
          'The current progress comes first; a job already finished sends its progress and done at once. ' +
          'Comment lines keep the stream alive. A client (remote address) holds at most SSE_MAX_STREAMS_PER_CLIENT ' +
          'event streams at once (429 TOO_MANY_REQUESTS), the instance SSE_MAX_STREAMS (503 SERVER_BUSY).',
        params: jobParamsSchema,
        response: {
          200: eventStreamResponse("The job's events, ending with one `done`.", jobStreamEvents),
          404: errorBodySchema,
          429: errorBodySchema,
          503: errorBodySchema,
        },
      },
    },
    async (request, reply) => {
      const jobId = request.params.id;
      if ((await fromStore(() => registry.get(jobId))) === undefined) throw notFound(jobId);
      // Refused before the stream starts, as a JSON error with Retry-After (src/http/sse.ts).
      const release = enterStream(options.streams, request.ip);

      // A client that does not read is dropped once its buffer is full (src/http/sse.ts); the job goes on.
      const sse = openEventStream(reply, options.sseMaxBufferBytes ?? defaultSseMaxBufferBytes, () =>
        request.log.info({ jobId }, 'job events: client not reading, dropped'),
      );
      const raw = reply.raw;
      let ended = false;
      const subscription: { unsubscribe?: () => void } = {};
      const heartbeat = setInterval(() => sse.raw(': heartbeat\n\n'), heartbeatMs);
      heartbeat.unref();
      const cleanUp = (): void => {
        if (ended) return;
        ended = true;
        release();
        clearInterval(heartbeat);
        subscription.unsubscribe?.();
        raw.off('close', cleanUp);
      };
      // The client went away: stop listening (the job itself goes on).
      raw.on('close', cleanUp);

      const onEvent = (event: JobStreamEvent): void => {
        if (ended) return;
        if (!sse.event(event.type, event.data)) return cleanUp();
        if (event.type === 'done') {
          cleanUp();
          raw.end();
        }
      };
      const unsubscribe = await registry.subscribe(jobId, onEvent).catch(() => undefined);
      if (unsubscribe === undefined) {
        // Expired between the check and the subscription.
        cleanUp();
        raw.end();
        return;
      }
      // A finished job ended the stream inside `subscribe`, before `unsubscribe` was known.
      if (ended) unsubscribe();
      else subscription.unsubscribe = unsubscribe;
    },
  );
};
