/**
 * The service's configuration, read once from the environment at start-up (docs/api.md "Configuration").
 * A bad value stops the start with a `ConfigError` naming the variable; a provider name the service does
 * not know in `PROVIDERS_DEFAULT_ORDER` only warns (docs/errors.md "Resilience rules": server-side configuration degrades gracefully).
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { fallbackPolicies } from './actors/types.js';
import { parseModelPrices, type ModelPrice } from './cost/index.js';
import type { FallbackPolicy } from './actors/types.js';
import { providerIds } from './providers/index.js';
import { mebibyte } from './units.js';
import type { ProviderId } from './providers/index.js';
import { defaultWorkerNice } from './threads/thread-priority.js';
import { defaultMaxPdfPages } from './documents/index.js';
import { loggableTelemetry, readTelemetryConfig, telemetryVariableNames, type TelemetryConfig } from './telemetry/index.js';

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof logLevels)[number];

export interface Config {
  readonly port: number;
  readonly host: string;
  /**
   * `maxRecoveryMs` caps the open period, which doubles on each failed half-open probe;
   * `minDistinctKeys` is the quorum of distinct keys a failure streak needs to open the breaker.
   */
  readonly breaker: {
    readonly threshold: number;
    readonly recoveryMs: number;
    readonly maxRecoveryMs: number;
    readonly minDistinctKeys: number;
  };
  readonly retry: { readonly max: number; readonly backoffMs: readonly number[] };
  /**
   * Per-key health (docs/api.md "key health"): how long auth, permission and quota failures refuse a key
   * (`quarantineMs`, 0 turns per-key health off), how long a rate limit without `Retry-After` cools it,
   * how many refused keys each provider remembers (derived), and the fingerprint salt (unset: shared through Redis).
   */
  readonly keyHealth: {
    readonly quarantineMs: number;
    readonly coolingMs: number;
    readonly maxKeys: number;
    readonly fingerprintSalt: string | undefined;
  };
  readonly fallbackMode: FallbackPolicy;
  readonly providerTimeoutMs: number;
  /** FIRST_TOKEN_TIMEOUT_MS: an upstream call that sends nothing for this long times out (class `timeout`). */
  readonly firstTokenTimeoutMs: number;
  /** STREAM_IDLE_TIMEOUT_MS: a streamed answer silent for this long between two pieces times out. */
  readonly streamIdleTimeoutMs: number;
  readonly providersDefaultOrder: readonly ProviderId[];
  readonly timelygptTokenTtlMs: number;
  /** Unset: breaker state and documents live in this process. */
  readonly redisUrl: string | undefined;
  readonly redisPrefix: string;
  /**
   * Without REDIS_URL: where job records and the documents they read are kept on disk, so jobs survive a
   * restart of the process (JOBS_DIR; default `<os tmpdir>/study-helper-<PORT>`, none when PORT is 0 or
   * JOBS_DIR is `off`). Ignored with REDIS_URL.
   */
  readonly jobsDir: string | undefined;
  readonly maxUploadMb: number;
  readonly maxPdfPages: number;
  /** Longest `text` POST /v1/generate accepts, in characters (MAX_TEXT_CHARS). */
  readonly maxTextChars: number;
  /** Most parts one stage may split a text into; bounds the upstream calls per request (MAX_TEXT_PARTS). */
  readonly maxTextParts: number;
  readonly documentTtlSeconds: number;
  /** PDF extraction: the worker pool and the limits on one PDF (docs/documents.md). */
  readonly pdf: {
    /** Worker processes extracting at once (PDF_WORKERS), one extraction each. */
    readonly workers: number;
    /** Extractions waiting for a worker; past it 503 PDF_EXTRACTOR_BUSY (derived: `derivedLimits`). */
    readonly queueMax: number;
    /** One extraction's deadline for each 250 pages it reads, at least once (PDF_TIMEOUT_MS). */
    readonly timeoutMs: number;
    /** One worker's V8 heap (PDF_WORKER_MEMORY_MB). */
    readonly workerMemoryMb: number;
    /** Most bytes a PDF's streams may decompress to, in MB (PDF_MAX_DECODED_MB). */
    readonly maxDecodedMb: number;
    /** Most UTF-8 bytes of text one document may extract to and keep, in MB (PDF_MAX_TEXT_MB). */
    readonly maxTextMb: number;
    /** A PDF declaring or holding more pages is refused (derived: `derivedLimits`). */
    readonly maxTotalPages: number;
  };
  /** The nice value of the PDF worker processes and the token-count worker thread (WORKER_NICE, 0–19; Linux only). */
  readonly workerNice: number;
  /** Unset: the operator breaker route answers 404. */
  readonly adminToken: string | undefined;
  /** Background jobs (POST /v1/jobs): see docs/jobs.md. */
  readonly jobs: {
    /** Finished jobs are forgotten this long after they end (JOB_TTL_SECONDS). */
    readonly ttlSeconds: number;
    /** Jobs running at once; the rest wait queued (JOB_CONCURRENCY). */
    readonly concurrency: number;
    /** Most jobs held at once, queued, running and finished (JOB_MAX_JOBS). */
    readonly maxJobs: number;
    /** Most document tokens in one prompt; above it a job works in parts (JOB_PART_BUDGET_TOKENS). */
    readonly partBudgetTokens: number;
    /** Most live jobs (queued and running) of one client (JOB_MAX_JOBS_PER_CLIENT). */
    readonly maxJobsPerClient: number;
    /** Live jobs the clients of one remote address may hold together (derived: `derivedLimits`). */
    readonly maxJobsPerAddress: number;
    /** Most running jobs of one client (JOB_CONCURRENCY_PER_CLIENT). */
    readonly concurrencyPerClient: number;
    /** Running jobs the clients of one remote address may hold together (derived: `derivedLimits`). */
    readonly concurrencyPerAddress: number;
    /** A job's runner renews its lease every third of this; a lapsed lease reads interrupted (JOB_LEASE_MS). */
    readonly leaseMs: number;
  };
  /** On SIGTERM, running jobs may finish for this long before the rest are interrupted (SHUTDOWN_GRACE_MS). */
  readonly shutdownGraceMs: number;
  /** Socket and stream limits of the HTTP server (docs/operations.md). */
  readonly server: {
    /** The whole request, headers and body, must arrive within this (REQUEST_TIMEOUT_MS). */
    readonly requestTimeoutMs: number;
    /** The request headers must arrive within this (derived: `derivedLimits`). */
    readonly headersTimeoutMs: number;
    /** A socket with no byte either way for this long is closed (derived: `derivedLimits`). */
    readonly connectionTimeoutMs: number;
    /** An idle keep-alive socket is closed after this (derived: `derivedLimits`). */
    readonly keepAliveTimeoutMs: number;
    /** Most bytes queued for one SSE client before it is dropped (derived: `derivedLimits`). */
    readonly sseMaxBufferBytes: number;
    /** Whose address is the client's (TRUST_PROXY, Fastify's `trustProxy`): false, proxy hops, or proxy addresses. */
    readonly trustProxy: boolean | number | readonly string[];
    /** Event streams open at once in this instance (SSE_MAX_STREAMS). */
    readonly sseMaxStreams: number;
    /** Event streams one client (remote address) may hold open at once (SSE_MAX_STREAMS_PER_CLIENT). */
    readonly sseMaxStreamsPerClient: number;
    /** Connections open at once in this instance (MAX_CONNECTIONS). */
    readonly maxConnections: number;
    /** Connections one address (IPv6: one /64) may hold open at once (MAX_CONNECTIONS_PER_ADDRESS). */
    readonly maxConnectionsPerAddress: number;
    /** Requests one address may have parsed per second, and at once (REQUESTS_PER_SECOND_PER_ADDRESS; 0: unpaced). */
    readonly requestsPerSecondPerAddress: number;
  };
  /** Admission of `POST /v1/generate` runs (docs/operations.md). */
  readonly admission: {
    /** Runs in flight at once in this instance (MAX_INFLIGHT_GENERATIONS). */
    readonly maxInFlight: number;
    /** Runs one client may have in flight (MAX_INFLIGHT_GENERATIONS_PER_CLIENT). */
    readonly maxPerClient: number;
    /** Slots the clients of one remote address may hold together (derived: `derivedLimits`). */
    readonly maxPerAddress: number;
    /** `Retry-After` of a refusal for lack of a slot or a stream (derived: `derivedLimits`). */
    readonly retryAfterSeconds: number;
    /** A run takes one slot per this many characters of its text, at least one (derived: `derivedLimits`). */
    readonly slotChars: number;
    /** A 429 TOO_MANY_REQUESTS is sent after this long (REFUSAL_DELAY_MS; 0: at once). */
    readonly refusalDelayMs: number;
  };
  /**
   * Per-client request rates (docs/operations.md): uploads and job creations one client may make per
   * window, refused before the body is read; 0 turns a limit off.
   */
  readonly rateLimit: {
    /** The window, in seconds (RATE_LIMIT_WINDOW_SECONDS). */
    readonly windowSeconds: number;
    /** `POST /v1/documents` per client per window (RATE_LIMIT_UPLOADS). */
    readonly uploads: number;
    /** `POST /v1/jobs` per client per window (RATE_LIMIT_JOBS). */
    readonly jobs: number;
    /** `POST /v1/generate` per address per window (RATE_LIMIT_GENERATIONS). */
    readonly generations: number;
    /** `GET /v1/keys/status` per address per window (RATE_LIMIT_KEY_STATUS). */
    readonly keyStatus: number;
  };
  /**
   * Each address's share of the JSON body bytes this instance reads and parses (src/http/body-share.ts): a
   * bucket of `burstBytes` refilled at `bytesPerSecond`; 0 bytes a second turns it off.
   */
  readonly bodyShare: {
    /** JSON_BODY_MB_PER_SECOND, in bytes. */
    readonly bytesPerSecond: number;
    /** JSON_BODY_BURST_MB, in bytes (the app raises it to the largest JSON body a route takes). */
    readonly burstBytes: number;
  };
  /**
   * Each address's share of the upload body bytes this instance reads (src/http/upload-share.ts): a bucket
   * of `burstBytes` refilled at `bytesPerSecond`; an upload over it is slowed, not refused; 0 bytes a second
   * turns it off.
   */
  readonly uploadShare: {
    /** UPLOAD_MB_PER_SECOND, in bytes. */
    readonly bytesPerSecond: number;
    /** UPLOAD_BURST_MB, in bytes (the app raises it so that one maximal upload always arrives in time). */
    readonly burstBytes: number;
  };
  readonly baseUrls: Readonly<Record<ProviderId, string>>;
  readonly models: Readonly<Record<ProviderId, string>>;
  /** MODEL_PRICES: USD per million tokens by model, added to or over the built-in table (src/cost). */
  readonly modelPrices: Readonly<Record<string, ModelPrice>>;
  readonly logLevel: LogLevel;
  /** Publish the live actors to the Stately inspector. */
  readonly inspect: boolean;
  /** The inspector relay's interface (INSPECT_HOST, loopback by default). */
  readonly inspectHost: string;
  /** The inspector relay's port (INSPECT_PORT). */
  readonly inspectPort: number;
  /** Running with the built-in emulator (`npm run demo`). */
  readonly demo: boolean;
  /** Trace export over OTLP (the standard OTEL_* variables, docs/telemetry.md); absent: no tracing, no SDK loaded. */
  readonly telemetry?: TelemetryConfig;
  /** What start-up should log at warn level (unknown provider names and the like). */
  readonly warnings: readonly string[];
}

const defaultProviderOrder: readonly ProviderId[] = providerIds;

/**
 * PDF_WORKERS by default: one worker per core but one, at least one. The workers' CPU is taken from the
 * same cores as the event loop: with as many busy workers as cores, two hostile PDFs on a 2-core machine
 * held both cores and every other request waited.
 */
const defaultPdfWorkers = Math.max(1, availableParallelism() - 1);

/**
 * MAX_CONNECTIONS by default: three quarters of the process's open-file limit (Linux's /proc/self/limits),
 * leaving the rest to upstream calls, Redis, workers and files; 8192 where the limit cannot be read.
 * Past the file limit every new connection is reset, whoever makes it: the
 * cap keeps room for the connections the service itself needs.
 */
const defaultMaxConnections = (() => {
  try {
    const line = /^Max open files\s+(\d+)/mu.exec(readFileSync('/proc/self/limits', 'utf8'));
    const soft = Number(line?.[1]);
    return Number.isSafeInteger(soft) && soft > 64 ? Math.floor(soft * 0.75) : 8192;
  } catch {
    return 8192;
  }
})();

/**
 * The limits no operator needs to set, each fixed or derived from the variables an operator does set and
 * from the machine, with its reason (docs/configuration.md "Derived limits"). Tests that need another value
 * for a scenario override the field of the loaded `Config`, not the environment.
 */
const derivedLimits = {
  /** `Retry-After` of every refusal for lack of room (a slot, a job, a stream): long enough for a short run to end. */
  retryAfterSeconds: 5,
  /** One generation slot per 25 000 characters: a client's 8 slots hold 8 short runs, or one of the longest default text (200 000). */
  slotChars: 25_000,
  /** Refused keys each provider remembers: about 2 MB of fingerprints; beyond it the least recently touched is forgotten (its next call goes out). */
  keyHealthMaxKeys: 10_000,
  /** Bytes queued for one event-stream client before it is dropped: a few hundred events, beyond what the kernel already holds. */
  sseMaxBufferBytes: 65_536,
  /** An idle keep-alive socket closes after 72 s: above the 60 s idle timeout of common load balancers, so they close first. */
  keepAliveTimeoutMs: 72_000,
  /** A page tree declaring more pages is refused as a bomb: the most MAX_PDF_PAGES itself may be. */
  pdfMaxTotalPages: 10_000,
  /** Uploads waiting per PDF worker: a waiting upload is at most 16 extractions away from a worker. */
  pdfQueuePerWorker: 16,
  /** Headers are due within 10 s (header slowloris), and never after the whole request. */
  headersTimeoutMs: (requestTimeoutMs: number): number => Math.min(10_000, requestTimeoutMs),
  /**
   * A socket silent both ways is closed after 10 minutes, or after the longest chain of calls a generation
   * may wait on without sending a byte (every provider, every retry, every backoff), whichever is longer.
   */
  connectionTimeoutMs: (providerTimeoutMs: number, retry: Config['retry']): number => {
    const backoffs = Array.from({ length: retry.max }, (_, index) => retry.backoffMs[Math.min(index, retry.backoffMs.length - 1)] ?? 0);
    const perProvider = (retry.max + 1) * providerTimeoutMs + backoffs.reduce((sum, delay) => sum + delay, 0);
    return Math.max(600_000, providerIds.length * perProvider);
  },
  /**
   * Generation slots the clients of one address hold together: half the instance, but at least four clients'
   * shares (the four key sets an address may hold before they count as one client), so users behind one NAT
   * keep working while a client inventing keys cannot take the instance.
   */
  maxGenerationsPerAddress: (maxInFlight: number, maxPerClient: number): number => Math.max(4 * maxPerClient, Math.floor(maxInFlight / 2)),
  /** Live jobs the clients of one address hold together: a tenth of the instance, but at least five clients' shares. */
  maxJobsPerAddress: (maxJobs: number, maxJobsPerClient: number): number => Math.max(5 * maxJobsPerClient, Math.floor(maxJobs / 10)),
  /**
   * Running jobs the clients of one address hold together: half of JOB_CONCURRENCY (at least one client's
   * share, at most all of it). Four invented key sets from one address, each within its own client's share,
   * took every slot while their calls hung, and another user's job stayed queued for minutes.
   */
  jobConcurrencyPerAddress: (concurrency: number, concurrencyPerClient: number): number =>
    Math.min(concurrency, Math.max(concurrencyPerClient, Math.floor(concurrency / 2))),
} as const;

const defaultBaseUrls: Readonly<Record<ProviderId, string>> = {
  claude: 'https://api.anthropic.com',
  gpt: 'https://api.openai.com/v1',
  timelygpt: 'https://hello.timelygpt.co.kr/api/v2/chat',
};

/**
 * The model each provider is called with by default; override per deployment with
 * CLAUDE_MODEL / GPT_MODEL / TIMELYGPT_MODEL.
 */
const defaultModels: Readonly<Record<ProviderId, string>> = {
  claude: 'claude-sonnet-4-6',
  gpt: 'gpt-5.2',
  timelygpt: 'gpt-5.2',
};

/** A configuration value that cannot be used; the message names the variable. */
export class ConfigError extends Error {
  readonly variable: string;

  constructor(variable: string, message: string) {
    super(`Invalid configuration: ${variable} ${message}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

const integer = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const booleanFlag = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['1', '0', 'true', 'false', 'yes', 'no', 'on', 'off', '']))
  .transform((value) => ['1', 'true', 'yes', 'on'].includes(value));

/**
 * TRUST_PROXY, as Fastify's `trustProxy`: `false` (the socket's address is the client's), a number of
 * proxy hops, or the proxies' addresses and CIDR ranges (comma-separated). `true` (believe any
 * X-Forwarded-For) is accepted but lets a client choose its own address, and so its per-address shares.
 */
const trustProxy = z
  .string()
  .trim()
  .transform((value, context): boolean | number | string[] => {
    const lowered = value.toLowerCase();
    if (['', '0', 'false', 'no', 'off'].includes(lowered)) return false;
    if (['true', 'yes', 'on'].includes(lowered)) return true;
    if (/^[1-9]$/u.test(value)) return Number(value);
    const entries = value.split(',').map((entry) => entry.trim());
    const invalid = entries.filter((entry) => {
      const [address, bits, ...rest] = entry.split('/');
      const family = isIP(address ?? '');
      if (family === 0 || rest.length > 0) return true;
      return bits !== undefined && !(/^\d{1,3}$/u.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
    });
    if (invalid.length > 0) {
      context.addIssue({ code: 'custom', message: `not false, true, a hop count 1-9, or addresses/CIDRs: ${invalid.join(', ')}` });
      return z.NEVER;
    }
    return entries;
  });

const httpUrl = z
  .string()
  .trim()
  .pipe(z.url({ protocol: /^https?$/ }))
  .transform((value) => value.replace(/\/+$/, ''));

const backoffList = z
  .string()
  .trim()
  .min(1)
  .transform((value) => value.split(',').map((part) => (/^\d+$/.test(part.trim()) ? Number(part.trim()) : Number.NaN)))
  .pipe(z.array(z.number('must be a comma list of whole milliseconds').int().min(0).max(600_000)).min(1));

/** MODEL_PRICES: `{"<model>":{"input":usd,"output":usd}}`, USD per million tokens (src/cost/prices.ts). */
const modelPrices = z.string().transform((value, context): Record<string, ModelPrice> => {
  try {
    return parseModelPrices(value);
  } catch (error) {
    context.addIssue({ code: 'custom', message: error instanceof Error ? error.message : String(error) });
    return z.NEVER;
  }
});

/** Each variable: its schema and default (as the string the environment would hold). */
const variables = {
  PORT: { schema: integer(0, 65_535), fallback: '3000' },
  HOST: { schema: z.string().trim().min(1), fallback: '127.0.0.1' },
  BREAKER_FAILURE_THRESHOLD: { schema: integer(1, 1000), fallback: '5' },
  BREAKER_RECOVERY_MS: { schema: integer(1, 86_400_000), fallback: '60000' },
  BREAKER_MAX_RECOVERY_MS: { schema: integer(1, 86_400_000), fallback: '600000' },
  BREAKER_MIN_DISTINCT_KEYS: { schema: integer(1, 100), fallback: '2' },
  RETRY_MAX: { schema: integer(0, 10), fallback: '2' },
  KEY_QUARANTINE_MS: { schema: integer(0, 86_400_000), fallback: '600000' },
  KEY_COOLING_MS: { schema: integer(1, 86_400_000), fallback: '30000' },
  KEY_FINGERPRINT_SALT: { schema: z.string().min(16).optional(), fallback: undefined },
  RETRY_BACKOFF_MS: { schema: backoffList, fallback: '1000,2000' },
  FALLBACK_MODE: { schema: z.enum(fallbackPolicies), fallback: 'retry-then-fallback' },
  PROVIDER_TIMEOUT_MS: { schema: integer(1, 3_600_000), fallback: '60000' },
  FIRST_TOKEN_TIMEOUT_MS: { schema: integer(1, 3_600_000), fallback: '30000' },
  STREAM_IDLE_TIMEOUT_MS: { schema: integer(1, 3_600_000), fallback: '20000' },
  TIMELYGPT_TOKEN_TTL_MS: { schema: integer(1, 86_400_000), fallback: '3300000' },
  REDIS_URL: { schema: z.string().trim().pipe(z.url({ protocol: /^rediss?$/ })).optional(), fallback: undefined },
  REDIS_PREFIX: { schema: z.string().min(1), fallback: 'study-helper:' },
  JOBS_DIR: { schema: z.string().trim().min(1).max(4096).optional(), fallback: undefined },
  MAX_UPLOAD_MB: { schema: z.coerce.number().positive().max(1024), fallback: '20' },
  MAX_PDF_PAGES: { schema: integer(1, 10_000), fallback: String(defaultMaxPdfPages) },
  MAX_TEXT_CHARS: { schema: integer(1, 10_000_000), fallback: '200000' },
  MAX_TEXT_PARTS: { schema: integer(1, 10_000), fallback: '40' },
  DOCUMENT_TTL_SECONDS: { schema: integer(1, 31_536_000), fallback: '7200' },
  PDF_WORKERS: { schema: integer(1, 64), fallback: String(defaultPdfWorkers) },
  PDF_TIMEOUT_MS: { schema: integer(100, 600_000), fallback: '30000' },
  PDF_WORKER_MEMORY_MB: { schema: integer(32, 8192), fallback: '48' },
  PDF_MAX_DECODED_MB: { schema: integer(1, 4096), fallback: '64' },
  PDF_MAX_TEXT_MB: { schema: integer(1, 1024), fallback: '8' },
  WORKER_NICE: { schema: integer(0, 19), fallback: String(defaultWorkerNice) },
  ADMIN_TOKEN: { schema: z.string().min(1).optional(), fallback: undefined },
  JOB_TTL_SECONDS: { schema: integer(1, 31_536_000), fallback: '3600' },
  JOB_CONCURRENCY: { schema: integer(1, 1000), fallback: '4' },
  JOB_MAX_JOBS: { schema: integer(1, 1_000_000), fallback: '1000' },
  JOB_PART_BUDGET_TOKENS: { schema: integer(64, 1_000_000), fallback: '6000' },
  JOB_MAX_JOBS_PER_CLIENT: { schema: integer(1, 1_000_000), fallback: '20' },
  JOB_CONCURRENCY_PER_CLIENT: { schema: integer(1, 1000), fallback: '2' },
  JOB_LEASE_MS: { schema: integer(300, 600_000), fallback: '15000' },
  SHUTDOWN_GRACE_MS: { schema: integer(0, 3_600_000), fallback: '25000' },
  MAX_INFLIGHT_GENERATIONS: { schema: integer(1, 100_000), fallback: '64' },
  MAX_INFLIGHT_GENERATIONS_PER_CLIENT: { schema: integer(1, 100_000), fallback: '8' },
  REFUSAL_DELAY_MS: { schema: integer(0, 60_000), fallback: '500' },
  RATE_LIMIT_WINDOW_SECONDS: { schema: integer(1, 86_400), fallback: '60' },
  RATE_LIMIT_UPLOADS: { schema: integer(0, 1_000_000), fallback: '30' },
  RATE_LIMIT_JOBS: { schema: integer(0, 1_000_000), fallback: '30' },
  REQUEST_TIMEOUT_MS: { schema: integer(1, 3_600_000), fallback: '90000' },
  TRUST_PROXY: { schema: trustProxy, fallback: 'false' },
  SSE_MAX_STREAMS: { schema: integer(1, 1_000_000), fallback: '1000' },
  SSE_MAX_STREAMS_PER_CLIENT: { schema: integer(1, 1_000_000), fallback: '8' },
  MAX_CONNECTIONS: { schema: integer(1, 10_000_000), fallback: String(defaultMaxConnections) },
  MAX_CONNECTIONS_PER_ADDRESS: { schema: integer(1, 10_000_000), fallback: '256' },
  REQUESTS_PER_SECOND_PER_ADDRESS: { schema: integer(0, 1_000_000), fallback: '200' },
  RATE_LIMIT_GENERATIONS: { schema: integer(0, 1_000_000), fallback: '3000' },
  RATE_LIMIT_KEY_STATUS: { schema: integer(0, 1_000_000), fallback: '60' },
  JSON_BODY_MB_PER_SECOND: { schema: z.coerce.number().min(0).max(1024), fallback: '1' },
  JSON_BODY_BURST_MB: { schema: z.coerce.number().positive().max(1024), fallback: '2' },
  UPLOAD_MB_PER_SECOND: { schema: z.coerce.number().min(0).max(1024), fallback: '4' },
  UPLOAD_BURST_MB: { schema: z.coerce.number().positive().max(1024), fallback: '8' },
  ANTHROPIC_BASE_URL: { schema: httpUrl, fallback: defaultBaseUrls.claude },
  OPENAI_BASE_URL: { schema: httpUrl, fallback: defaultBaseUrls.gpt },
  TIMELYGPT_BASE_URL: { schema: httpUrl, fallback: defaultBaseUrls.timelygpt },
  CLAUDE_MODEL: { schema: z.string().trim().min(1), fallback: defaultModels.claude },
  GPT_MODEL: { schema: z.string().trim().min(1), fallback: defaultModels.gpt },
  TIMELYGPT_MODEL: { schema: z.string().trim().min(1), fallback: defaultModels.timelygpt },
  MODEL_PRICES: { schema: modelPrices, fallback: '{}' },
  LOG_LEVEL: { schema: z.enum(logLevels), fallback: 'info' },
  INSPECT: { schema: booleanFlag, fallback: 'false' },
  INSPECT_HOST: { schema: z.string().trim().min(1), fallback: '127.0.0.1' },
  INSPECT_PORT: { schema: integer(0, 65_535), fallback: '8080' },
  DEMO: { schema: booleanFlag, fallback: 'false' },
} as const;

type Variables = typeof variables;
type VariableName = keyof Variables;
type Parsed = { [K in VariableName]: z.output<Variables[K]['schema']> };

function read<K extends VariableName>(env: NodeJS.ProcessEnv, name: K): Parsed[K] {
  const { fallback } = variables[name];
  const schema: z.ZodType = variables[name].schema;
  const raw = env[name];
  // An empty variable (`FOO=`) means "unset", as in most deployment tools.
  const value = raw === undefined || raw === '' ? fallback : raw;
  const result = schema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    const shown = value === undefined ? '' : ` (got ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)})`;
    // These can hold secrets (a token, a Redis password): never echo them.
    const got = name === 'ADMIN_TOKEN' || name === 'REDIS_URL' ? '' : shown;
    throw new ConfigError(name, `${issue?.message ?? 'is invalid'}${got}`);
  }
  // Safe: `schema` is `variables[name].schema`, whose output type is `Parsed[K]` by definition.
  return result.data as Parsed[K];
}

/** Variables earlier versions read, now derived limits: set, each gets a start-up warning saying what replaced it. */
const retiredVariables: Readonly<Record<string, string>> = {
  ADMISSION_RETRY_AFTER_SECONDS: 'Retry-After is 5 s',
  GENERATION_SLOT_CHARS: 'a slot is 25 000 characters',
  MAX_INFLIGHT_GENERATIONS_PER_ADDRESS: 'an address holds max(4 × MAX_INFLIGHT_GENERATIONS_PER_CLIENT, MAX_INFLIGHT_GENERATIONS / 2) slots',
  JOB_MAX_JOBS_PER_ADDRESS: 'an address holds max(5 × JOB_MAX_JOBS_PER_CLIENT, JOB_MAX_JOBS / 10) live jobs',
  PDF_QUEUE_MAX: '16 uploads may wait per PDF_WORKERS',
  PDF_MAX_TOTAL_PAGES: 'a PDF may declare 10 000 pages',
  KEY_HEALTH_MAX_KEYS: 'each provider remembers 10 000 refused keys',
  SSE_MAX_BUFFER_BYTES: 'an event-stream client may have 64 KiB queued',
  HEADERS_TIMEOUT_MS: 'headers are due within min(10 s, REQUEST_TIMEOUT_MS)',
  CONNECTION_TIMEOUT_MS: 'a silent socket closes after 10 min or the longest chain of provider calls',
  KEEP_ALIVE_TIMEOUT_MS: 'an idle keep-alive socket closes after 72 s',
};

function warnRetired(env: NodeJS.ProcessEnv, warnings: string[]): void {
  for (const [name, now] of Object.entries(retiredVariables)) {
    if ((env[name] ?? '') !== '') warnings.push(`${name} is no longer read and is ignored: ${now} (docs/configuration.md "Derived limits")`);
  }
}

/** PROVIDERS_DEFAULT_ORDER: known ids in the given order; unknown names are dropped with a warning. */
function readProviderOrder(env: NodeJS.ProcessEnv, warnings: string[]): readonly ProviderId[] {
  const raw = env.PROVIDERS_DEFAULT_ORDER;
  if (raw === undefined || raw.trim() === '') return defaultProviderOrder;
  const names = raw.split(',').map((name) => name.trim().toLowerCase()).filter((name) => name !== '');
  const order: ProviderId[] = [];
  for (const name of names) {
    const known = providerIds.find((id) => id === name);
    if (known === undefined) {
      warnings.push(`PROVIDERS_DEFAULT_ORDER names an unknown provider ${JSON.stringify(name)}; it is ignored (known: ${providerIds.join(', ')})`);
    } else if (!order.includes(known)) {
      order.push(known);
    }
  }
  if (order.length === 0) {
    warnings.push(`PROVIDERS_DEFAULT_ORDER names no known provider; using the default ${defaultProviderOrder.join(',')}`);
    return defaultProviderOrder;
  }
  return order;
}

/** The server's socket limits: REQUEST_TIMEOUT_MS, the rest derived (`derivedLimits`). */
function readServer(env: NodeJS.ProcessEnv, providerTimeoutMs: number, retry: Config['retry']): Config['server'] {
  const requestTimeoutMs = read(env, 'REQUEST_TIMEOUT_MS');
  return {
    requestTimeoutMs,
    headersTimeoutMs: derivedLimits.headersTimeoutMs(requestTimeoutMs),
    connectionTimeoutMs: derivedLimits.connectionTimeoutMs(providerTimeoutMs, retry),
    keepAliveTimeoutMs: derivedLimits.keepAliveTimeoutMs,
    sseMaxBufferBytes: derivedLimits.sseMaxBufferBytes,
    trustProxy: read(env, 'TRUST_PROXY'),
    sseMaxStreams: read(env, 'SSE_MAX_STREAMS'),
    sseMaxStreamsPerClient: read(env, 'SSE_MAX_STREAMS_PER_CLIENT'),
    maxConnections: read(env, 'MAX_CONNECTIONS'),
    maxConnectionsPerAddress: read(env, 'MAX_CONNECTIONS_PER_ADDRESS'),
    requestsPerSecondPerAddress: read(env, 'REQUESTS_PER_SECOND_PER_ADDRESS'),
  };
}

/** Reads and validates every variable; throws `ConfigError` naming the first bad one. */
export function loadConfig(env: NodeJS.ProcessEnv): Config {
  const warnings: string[] = [];
  const retry = { max: read(env, 'RETRY_MAX'), backoffMs: read(env, 'RETRY_BACKOFF_MS') };
  const providerTimeoutMs = read(env, 'PROVIDER_TIMEOUT_MS');
  const pdfWorkers = read(env, 'PDF_WORKERS');
  const maxJobs = read(env, 'JOB_MAX_JOBS');
  const maxJobsPerClient = read(env, 'JOB_MAX_JOBS_PER_CLIENT');
  const maxInFlight = read(env, 'MAX_INFLIGHT_GENERATIONS');
  const maxPerClient = read(env, 'MAX_INFLIGHT_GENERATIONS_PER_CLIENT');
  warnRetired(env, warnings);
  return {
    port: read(env, 'PORT'),
    host: read(env, 'HOST'),
    breaker: {
      threshold: read(env, 'BREAKER_FAILURE_THRESHOLD'),
      recoveryMs: read(env, 'BREAKER_RECOVERY_MS'),
      maxRecoveryMs: read(env, 'BREAKER_MAX_RECOVERY_MS'),
      // Without per-key health (KEY_QUARANTINE_MS=0) no key has a circuit of its own to stop a streak
      // below the quorum, so the quorum is off: one key's streak opens the provider, as before.
      minDistinctKeys: read(env, 'KEY_QUARANTINE_MS') === 0 ? 1 : read(env, 'BREAKER_MIN_DISTINCT_KEYS'),
    },
    retry,
    keyHealth: {
      quarantineMs: read(env, 'KEY_QUARANTINE_MS'),
      coolingMs: read(env, 'KEY_COOLING_MS'),
      maxKeys: derivedLimits.keyHealthMaxKeys,
      fingerprintSalt: read(env, 'KEY_FINGERPRINT_SALT'),
    },
    fallbackMode: read(env, 'FALLBACK_MODE'),
    providerTimeoutMs,
    firstTokenTimeoutMs: read(env, 'FIRST_TOKEN_TIMEOUT_MS'),
    streamIdleTimeoutMs: read(env, 'STREAM_IDLE_TIMEOUT_MS'),
    providersDefaultOrder: readProviderOrder(env, warnings),
    timelygptTokenTtlMs: read(env, 'TIMELYGPT_TOKEN_TTL_MS'),
    redisUrl: read(env, 'REDIS_URL'),
    redisPrefix: read(env, 'REDIS_PREFIX'),
    jobsDir: resolveJobsDir(read(env, 'JOBS_DIR'), read(env, 'PORT')),
    maxUploadMb: read(env, 'MAX_UPLOAD_MB'),
    maxPdfPages: read(env, 'MAX_PDF_PAGES'),
    maxTextChars: read(env, 'MAX_TEXT_CHARS'),
    maxTextParts: read(env, 'MAX_TEXT_PARTS'),
    documentTtlSeconds: read(env, 'DOCUMENT_TTL_SECONDS'),
    pdf: {
      workers: pdfWorkers,
      queueMax: derivedLimits.pdfQueuePerWorker * pdfWorkers,
      timeoutMs: read(env, 'PDF_TIMEOUT_MS'),
      workerMemoryMb: read(env, 'PDF_WORKER_MEMORY_MB'),
      maxDecodedMb: read(env, 'PDF_MAX_DECODED_MB'),
      maxTextMb: read(env, 'PDF_MAX_TEXT_MB'),
      maxTotalPages: derivedLimits.pdfMaxTotalPages,
    },
    workerNice: read(env, 'WORKER_NICE'),
    adminToken: read(env, 'ADMIN_TOKEN'),
    jobs: {
      ttlSeconds: read(env, 'JOB_TTL_SECONDS'),
      concurrency: read(env, 'JOB_CONCURRENCY'),
      maxJobs,
      partBudgetTokens: read(env, 'JOB_PART_BUDGET_TOKENS'),
      maxJobsPerClient,
      maxJobsPerAddress: derivedLimits.maxJobsPerAddress(maxJobs, maxJobsPerClient),
      concurrencyPerClient: read(env, 'JOB_CONCURRENCY_PER_CLIENT'),
      concurrencyPerAddress: derivedLimits.jobConcurrencyPerAddress(read(env, 'JOB_CONCURRENCY'), read(env, 'JOB_CONCURRENCY_PER_CLIENT')),
      leaseMs: read(env, 'JOB_LEASE_MS'),
    },
    shutdownGraceMs: read(env, 'SHUTDOWN_GRACE_MS'),
    server: readServer(env, providerTimeoutMs, retry),
    admission: {
      maxInFlight,
      maxPerClient,
      maxPerAddress: derivedLimits.maxGenerationsPerAddress(maxInFlight, maxPerClient),
      retryAfterSeconds: derivedLimits.retryAfterSeconds,
      slotChars: derivedLimits.slotChars,
      refusalDelayMs: read(env, 'REFUSAL_DELAY_MS'),
    },
    rateLimit: {
      windowSeconds: read(env, 'RATE_LIMIT_WINDOW_SECONDS'),
      uploads: read(env, 'RATE_LIMIT_UPLOADS'),
      jobs: read(env, 'RATE_LIMIT_JOBS'),
      generations: read(env, 'RATE_LIMIT_GENERATIONS'),
      keyStatus: read(env, 'RATE_LIMIT_KEY_STATUS'),
    },
    bodyShare: {
      bytesPerSecond: Math.round(read(env, 'JSON_BODY_MB_PER_SECOND') * mebibyte),
      burstBytes: Math.round(read(env, 'JSON_BODY_BURST_MB') * mebibyte),
    },
    uploadShare: {
      bytesPerSecond: Math.round(read(env, 'UPLOAD_MB_PER_SECOND') * mebibyte),
      burstBytes: Math.round(read(env, 'UPLOAD_BURST_MB') * mebibyte),
    },
    baseUrls: {
      claude: read(env, 'ANTHROPIC_BASE_URL'),
      gpt: read(env, 'OPENAI_BASE_URL'),
      timelygpt: read(env, 'TIMELYGPT_BASE_URL'),
    },
    models: { claude: read(env, 'CLAUDE_MODEL'), gpt: read(env, 'GPT_MODEL'), timelygpt: read(env, 'TIMELYGPT_MODEL') },
    modelPrices: read(env, 'MODEL_PRICES'),
    logLevel: read(env, 'LOG_LEVEL'),
    inspect: read(env, 'INSPECT'),
    inspectHost: read(env, 'INSPECT_HOST'),
    inspectPort: read(env, 'INSPECT_PORT'),
    demo: read(env, 'DEMO'),
    ...telemetryOf(env),
    warnings,
  };
}

/** The trace export the OTEL_* variables ask for, as a property of the config (none: no property). */
function telemetryOf(env: NodeJS.ProcessEnv): Pick<Config, 'telemetry'> {
  const telemetry = readTelemetryConfig(env, (variable, message) => {
    throw new ConfigError(variable, message);
  });
  return telemetry === undefined ? {} : { telemetry };
}

/** The names of every variable `loadConfig` reads (docs/configuration.md is checked against it). */
export const configVariableNames: readonly string[] = [...Object.keys(variables), 'PROVIDERS_DEFAULT_ORDER', ...telemetryVariableNames].sort();

/** REDIS_URL with its password (if any) replaced by `***`: the form start-up may log. */
function maskedRedisUrl(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'redis://***';
  }
}

/**
 * The effective configuration as start-up logs it, once: every value `loadConfig` settled on, set or
 * derived, without a secret (ADMIN_TOKEN and KEY_FINGERPRINT_SALT read only `set`/`unset`; REDIS_URL's
 * password is masked). The warnings are logged on their own, at warn level.
 */
export function loggableConfig(config: Config): Record<string, unknown> {
  const { warnings: _warnings, adminToken, redisUrl, keyHealth, telemetry, ...rest } = config;
  return {
    ...rest,
    telemetry: loggableTelemetry(telemetry),
    adminToken: adminToken === undefined ? 'unset' : 'set',
    redisUrl: maskedRedisUrl(redisUrl) ?? 'unset',
    keyHealth: { ...keyHealth, fingerprintSalt: keyHealth.fingerprintSalt === undefined ? 'unset' : 'set' },
  };
}

/** JOBS_DIR: as given, `off` for none, or derived from PORT (one directory per port; none for a random port). */
function resolveJobsDir(given: string | undefined, port: number): string | undefined {
  if (given === 'off') return undefined;
  if (given !== undefined) return resolve(given);
  return port === 0 ? undefined : join(tmpdir(), `study-helper-${port}`);
}
