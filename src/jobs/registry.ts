import { randomUUID } from 'node:crypto';
import { createActor, type ActorRefFrom, type SnapshotFrom } from 'xstate';
import type { ChainLink, FallbackPolicy, Gateway } from '../actors/types.js';
import { jobMachine, type JobRestore } from '../machines/job.machine.js';
import { sumUsd, type PriceTable } from '../cost/index.js';
import type { CallBudget } from '../machines/types.js';
import { createCostBudget, type LangSource, type ResultCache, type StudyLang } from '../study/index.js';
import { createStageActor, type JobTracer, type StageActorDependencies } from './stage-actor.js';
import { createAddressClients } from './address-clients.js';
import type { JobCancelBus } from './cancel-bus.js';
import { keyFingerprints, newKeySalt, publicView } from './record.js';
import { createMemoryJobStatusStore, JobStoreUnavailableError, type JobStatusStore } from './status-store.js';
import type { JobRecord, JobResumeData, JobStatus, JobStreamEvent, JobView, PageRange, ProgressEvent } from './types.js';
import type { TextPageMap } from '../machines/job-types.js';

/** What `POST /v1/jobs` asks for, once the document is loaded and the chain built. */
export interface JobSpec {
  readonly text: string;
  /** Where each page of `text` begins (a document stored with its pages): the results carry `pages`. */
  readonly pageMap?: TextPageMap;
  /** The page range asked for (a resume reads the same pages again). */
  readonly pages?: PageRange;
  /** The document's id in the document store: a resume reads the text again from there. */
  readonly documentId: string;
  /** The document's identity for the results cache: its sha256 and the pages asked for (`jobCacheKey`). */
  readonly cacheKey: string;
  readonly lang: StudyLang;
  /** Whether `lang` was asked for or detected (reported in the view's `meta`). */
  readonly langSource?: LangSource;
  readonly mcqCount: number;
  readonly fillCount: number;
  /** The keys as `Secret`s (src/http/keys.ts wraps them), held only by the job actor. */
  readonly chain: readonly ChainLink[];
  /** Who asked (a salted hash of the key set, src/http/admission.ts), for the per-client shares. */
  readonly clientId?: string;
  /** Where it came from (the remote address), for the per-address share: a client is its key set, so one
   * that invents keys is bounded by this. */
  readonly address?: string;
  /** The origin of the creating request (`GenerateInput.origin`), handed to every provider call of the job. */
  readonly origin?: string;
  /** `options.maxCostUsd`: the job's spending limit in USD (needs the registry's `prices`). */
  readonly maxCostUsd?: number;
}

export interface JobRegistryOptions {
  readonly gateway: Gateway;
  readonly policy: FallbackPolicy;
  readonly cache?: ResultCache;
  /** Most document tokens in one prompt (JOB_PART_BUDGET_TOKENS). */
  readonly budgetTokens?: number;
  /** Most parts a stage may split the text into (MAX_TEXT_PARTS). */
  readonly maxParts?: number;
  /** The price table `maxCostUsd` is counted in; without it a job has no spending limit. */
  readonly prices?: PriceTable;
  /** Jobs running at once; the others wait queued (JOB_CONCURRENCY). */
  readonly concurrency: number;
  /** Most jobs held at once, live and finished (JOB_MAX_JOBS). */
  readonly maxJobs: number;
  /** Most live jobs of one client (JOB_MAX_JOBS_PER_CLIENT); default `maxJobs`. */
  readonly maxJobsPerClient?: number;
  /** Most live jobs of the clients of one address together (derived from JOB_MAX_JOBS and JOB_MAX_JOBS_PER_CLIENT); default `maxJobs`. */
  readonly maxJobsPerAddress?: number;
  /** Most running jobs of one client (JOB_CONCURRENCY_PER_CLIENT); default `concurrency`. */
  readonly concurrencyPerClient?: number;
  /**
   * Most running jobs of the clients of one address together (derived from JOB_CONCURRENCY); default
   * `concurrency`. A client is its key set and keys cost nothing to invent: without it one address's four
   * invented key sets, each within its own share, took every slot.
   */
  readonly concurrencyPerAddress?: number;
  /**
   * Whether the instance is busy now (its event loop or CPU time: src/http/load-gauge.ts). While it is and
   * other addresses are served too (their jobs, or `othersActive`), an address starts one job at a time and
   * its others wait queued: a job's provider calls follow one another as fast as the answers come, so one
   * address's jobs took the CPU every other client's requests wait for (the victim's p99 rose 30-100 ms).
   * A job running is never stopped for it. Never busy when absent.
   */
  readonly busy?: () => boolean;
  /** Whether addresses other than `address` hold or lately held generation slots (src/http/admission.ts). */
  readonly othersActive?: (address: string) => boolean;
  /** A finished job is forgotten this long after it ended (JOB_TTL_SECONDS). */
  readonly ttlSeconds: number;
  /** Default: an in-process store bounded by `maxJobs`. */
  readonly store?: JobStatusStore;
  /** How often a stream follows a job another instance runs, through the shared store (default 1 s). */
  readonly remotePollMs?: number;
  /** Traces each job's stages and parts (src/telemetry); absent: untraced. */
  readonly tracer?: JobTracer;
  /**
   * Carries a cancel to the instance that runs the job (REDIS_URL: Redis pub/sub). Without it a job
   * another instance runs cannot be cancelled from here (its view is answered as it is).
   */
  readonly cancelBus?: JobCancelBus;
  /** How long a remote cancel waits for the job's view to show it ended (default 2 s), polling every 25 ms. */
  readonly remoteCancelWaitMs?: number;
  /**
   * JOB_LEASE_MS (default 15 000): a job's runner holds a lease this long in the store and renews it every
   * third of it; a job whose lease lapsed reads `interrupted` everywhere.
   */
  readonly leaseMs?: number;
}

type JobListener = (event: JobStreamEvent) => void;

export interface JobRegistry {
  /**
   * Starts a job (queued until a slot frees). Throws `JobCapacityError` when `maxJobs` are live, or
   * when the job's client already has `maxJobsPerClient` live.
   */
  create(spec: JobSpec): JobView;
  get(jobId: string): Promise<JobView | undefined>;
  /**
   * Cancels a queued or running job; an interrupted one becomes `cancelled` (no longer resumable); a
   * finished one is answered as it is. Undefined when unknown.
   */
  cancel(jobId: string): Promise<JobView | undefined>;
  /** The stored record (the view plus what a resume needs), for the resume route; undefined when unknown. */
  record(jobId: string): Promise<JobRecord | undefined>;
  /**
   * Continues an interrupted job here from `record` (read by `record()`): a new actor with its finished
   * stages and parts, queued until a slot frees. The caller checked the keys. Throws `JobNotResumableError`
   * when the record is no longer the interrupted one (resumed elsewhere meanwhile), `JobCapacityError`
   * like `create`.
   */
  resume(record: JobRecord, spec: JobSpec): Promise<JobView>;
  /**
   * Shutdown (SIGTERM): takes no new job, lets the live ones run for up to `graceMs`, then interrupts
   * those still live (their records read `interrupted`, resumable on another instance). Resolves once
   * every record is written.
   */
  drain(graceMs: number): Promise<{ readonly finished: number; readonly interrupted: number }>;
  /**
   * Streams a job's events: first its current progress, then what happens; a finished job gets its
   * progress and `done` at once. Returns the unsubscribe function, or undefined for an unknown job.
   */
  subscribe(jobId: string, listener: JobListener): Promise<(() => void) | undefined>;
  /**
   * Whether a new job's records can be stored: false while the store's last write failed and a probe
   * write still fails (a full disk, a read-only JOBS_DIR). Without a failure it answers true at once.
   */
  writable(): Promise<boolean>;
  /** Jobs queued and running in this process, and the listeners on their events (open SSE streams). */
  counts(): { readonly queued: number; readonly running: number; readonly subscribers: number };
  /** Interrupts every live job (a stop without grace), writes their records and closes the store. */
  stop(): Promise<void>;
}

/** A resume that found the job no longer interrupted (resumed elsewhere meanwhile, or ended). */
export class JobNotResumableError extends Error {
  constructor(readonly status: JobStatus) {
    super(`The job is ${status}, not interrupted: only an interrupted job can be resumed.`);
    this.name = 'JobNotResumableError';
  }
}

/** Every job slot is taken by a queued or running job (`instance`), or every slot of this client (`client`). */
export class JobCapacityError extends Error {
  constructor(
    readonly maxJobs: number,
    readonly scope: 'instance' | 'client' | 'address' = 'instance',
  ) {
    super(
      scope === 'instance'
        ? `Too many jobs at once (at most ${maxJobs}); retry when one has finished.`
        : scope === 'client'
          ? `This client already has ${maxJobs} live jobs (JOB_MAX_JOBS_PER_CLIENT); retry when one has finished.`
          : `The clients of this address already have ${maxJobs} live jobs (the per-address share); retry when one has finished.`,
    );
    this.name = 'JobCapacityError';
  }
}

type JobActor = ActorRefFrom<typeof jobMachine>;
type JobSnapshot = SnapshotFrom<typeof jobMachine>;

/** What a job's record keeps for a resume besides its results: where its text is, and who may resume it. */
type ResumeBase = Pick<JobResumeData, 'documentId' | 'pages' | 'cacheKey' | 'providers' | 'keySalt' | 'keyFingerprints'>;

interface LiveJob {
  readonly jobId: string;
  readonly clientId: string;
  readonly address: string;
  readonly actor: JobActor;
  readonly resumeBase: ResumeBase;
  readonly listeners: Set<JobListener>;
  lastWritten: string;
  /** Epoch ms: when this registry saw the actor reach its final state (the machine reads no clock). */
  finishedAt?: number;
}

function statusOf(snapshot: JobSnapshot): JobStatus {
  const value = snapshot.value;
  if (typeof value !== 'string') return 'running';
  // A job just made, or resumed and waiting for its slot, reads queued.
  return value === 'created' || value === 'resuming' ? 'queued' : value;
}

/** The plain JSON view of a job's snapshot (ended at `finishedAt`, epoch ms): no key, no document text. */
function jobView(snapshot: JobSnapshot, finishedAt?: number): JobView {
  const context = snapshot.context;
  const status = statusOf(snapshot);
  const result =
    status === 'succeeded' && context.notes !== null && context.mcq !== null && context.fill !== null
      ? { notes: context.notes, mcq: context.mcq, fill: context.fill }
      : status === 'failed'
        ? finishedStages(context)
        : undefined;
  return {
    jobId: context.jobId,
    status,
    progress: context.progress,
    stage: context.position,
    ...(result === undefined ? {} : { result }),
    ...(context.error === null ? {} : { error: context.error }),
    costUsd: sumUsd(context.attempts.map((attempt) => attempt.costUsd)),
    meta: {
      lang: context.lang,
      ...(context.langSource === undefined ? {} : { langSource: context.langSource }),
      mcqCount: context.mcqCount,
      fillCount: context.fillCount,
      ...(context.budget === undefined ? {} : { maxCostUsd: context.budget.maxUsd }),
      stages: context.stages,
      attempts: context.attempts,
      ...(context.failedStage === null ? {} : { failedStage: context.failedStage }),
    },
    createdAt: context.createdAt,
    ...(finishedAt === undefined ? {} : { finishedAt }),
    ...(status === 'interrupted' ? { resumable: true as const } : {}),
  };
}

/** The stages a failed job finished (it keeps what it paid for); undefined when none. */
function finishedStages(context: JobSnapshot['context']): JobView['result'] {
  const { notes, mcq, fill } = context;
  if (notes === null) return undefined;
  return { notes, ...(mcq === null ? {} : { mcq }), ...(fill === null ? {} : { fill }) };
}

/**
 * The record a store keeps: the view, and while the job may still be resumed (queued, running,
 * interrupted) its finished stages and parts and the resume base. Once it ended for good the resume
 * data goes: a finished record holds no key fingerprint.
 */
function jobRecord(snapshot: JobSnapshot, base: ResumeBase, finishedAt?: number): JobRecord {
  const view = jobView(snapshot, finishedAt);
  if (view.status === 'succeeded' || view.status === 'failed' || view.status === 'cancelled') return view;
  const { notes, mcq, fill, finishedParts } = snapshot.context;
  return { ...view, resume: { ...base, notes, mcq, fill, finishedParts } };
}

function isFinal(view: JobView): view is JobView & { status: 'succeeded' | 'failed' | 'cancelled' | 'interrupted' } {
  return (
    view.status === 'succeeded' || view.status === 'failed' || view.status === 'cancelled' || view.status === 'interrupted'
  );
}

/** What a resumed job's actor starts from: its record's stages, parts, attempts and progress. */
function restoreOf(record: JobRecord, resume: JobResumeData): JobRestore {
  return {
    progress: Math.min(99, record.progress),
    notes: resume.notes,
    mcq: resume.mcq,
    fill: resume.fill,
    stages: record.meta?.stages ?? {},
    attempts: record.meta?.attempts ?? [],
    finishedParts: resume.finishedParts,
  };
}

function progressOf(view: JobView): ProgressEvent {
  return { progress: view.progress, stage: view.stage };
}

function currentProgress(snapshot: JobSnapshot): ProgressEvent {
  const { progress, position, part, parts } = snapshot.context;
  return { progress, stage: position, ...(part === null || parts === null ? {} : { part, parts }) };
}

/**
 * Creates, finds, cancels and resumes job actors. At most `concurrency` run at once (the rest wait
 * queued, in order), at most `maxJobs` are live; a finished job's actor is dropped and its record kept
 * in the status store for `ttlSeconds`, so memory stays bounded. Every live job's lease is renewed every
 * third of `leaseMs`; every change of status, stage, progress, finished stage or finished part is
 * written as it happens, so an interrupted job loses nothing it finished.
 */
export function createJobRegistry(options: JobRegistryOptions): JobRegistry {
  const ttlMs = options.ttlSeconds * 1000;
  const store =
    options.store ?? createMemoryJobStatusStore({ maxEntries: options.maxJobs, interruptedTtlMs: ttlMs });
  const leaseMs = options.leaseMs ?? 15_000;
  /** This registry's lease holder id: random, so a restarted process is another holder. */
  const holder = randomUUID();
  const stageDependencies: StageActorDependencies = {
    gateway: options.gateway,
    policy: options.policy,
    ...(options.cache === undefined ? {} : { cache: options.cache }),
    ...(options.budgetTokens === undefined ? {} : { budgetTokens: options.budgetTokens }),
    ...(options.maxParts === undefined ? {} : { maxParts: options.maxParts }),
  };
  const logic = jobMachine.provide({ actors: { generateStage: createStageActor(stageDependencies) } });
  /**
   * A job's machine: its stages' provider calls carry the origin of the request that created it, and
   * with tracing on, its stages are traced under that request's span.
   */
  const logicFor = (jobId: string, origin: string | undefined): typeof logic =>
    origin === undefined && options.tracer === undefined
      ? logic
      : jobMachine.provide({
          actors: {
            generateStage: createStageActor({
              ...stageDependencies,
              ...(origin === undefined ? {} : { origin }),
              ...(options.tracer === undefined ? {} : { trace: options.tracer.job(jobId) }),
            }),
          },
        });
  const live = new Map<string, LiveJob>();
  const queue: LiveJob[] = [];
  const running = new Set<string>();
  const liveByClient = new Map<string, number>();
  const liveByAddress = new Map<string, number>();
  const runningByClient = new Map<string, number>();
  const runningByAddress = new Map<string, number>();
  // An address's invented keys count as one client for the running share once it holds more than a few.
  const addressClients = createAddressClients();
  /** The client each running job was counted as when it started. */
  const runningAs = new Map<string, string>();
  const maxJobsPerClient = options.maxJobsPerClient ?? options.maxJobs;
  const maxJobsPerAddress = options.maxJobsPerAddress ?? options.maxJobs;
  const concurrencyPerClient = options.concurrencyPerClient ?? options.concurrency;
  const concurrencyPerAddress = options.concurrencyPerAddress ?? options.concurrency;
  /** Writes not yet settled: shutdown waits for them before the store closes. */
  const writes = new Set<Promise<unknown>>();
  let stopped = false;
  /** The store's last write failed (`failed`): new jobs wait until a probe write succeeds. */
  let storeFailing = false;

  const bump = (counts: Map<string, number>, clientId: string, by: number): void => {
    const next = (counts.get(clientId) ?? 0) + by;
    if (next <= 0) counts.delete(clientId);
    else counts.set(clientId, next);
  };

  /**
   * The next queued job to run: among clients under their running share whose address is under its own,
   * the one whose address runs the fewest jobs goes first, then the client running the fewest (in queue
   * order on a tie), so neither one address's nor one client's backlog starves another's job. A client
   * here is its key set, or its address once that address holds more than a few key sets
   * (address-clients.ts): inventing keys does not make an address many clients, nor more slots. While the
   * instance is busy and other addresses are served, an address already running a job starts no other (`busy`).
   */
  function nextQueued(): { job: LiveJob; share: string } | undefined {
    let best: { job: LiveJob; share: string; index: number; running: number; addressRunning: number } | undefined;
    const busy = options.busy?.() === true;
    for (const [index, job] of queue.entries()) {
      const share = addressClients.shareOf(job.clientId, job.address);
      const addressRunning = runningByAddress.get(job.address) ?? 0;
      if (addressRunning >= concurrencyPerAddress) continue;
      if (busy && addressRunning >= 1 && othersServed(job.address)) continue;
      // As one client, the address runs every job any of its keys runs.
      const clientRunning = share === job.clientId ? (runningByClient.get(share) ?? 0) : addressRunning;
      if (clientRunning >= concurrencyPerClient) continue;
      const before = best === undefined || addressRunning < best.addressRunning || (addressRunning === best.addressRunning && clientRunning < best.running);
      if (before) best = { job, share, index, running: clientRunning, addressRunning };
      if (addressRunning === 0 && clientRunning === 0) break;
    }
    if (best !== undefined) queue.splice(best.index, 1);
    return best;
  }

  /** Whether addresses other than `address` have jobs here, or generations (`othersActive`). */
  function othersServed(address: string): boolean {
    return liveByAddress.size > (liveByAddress.has(address) ? 1 : 0) || options.othersActive?.(address) === true;
  }

  function track<T>(promise: Promise<T>): Promise<T> {
    writes.add(promise);
    void promise.finally(() => writes.delete(promise)).catch(() => undefined);
    return promise;
  }

  function write(job: LiveJob, snapshot: JobSnapshot, force = false): void {
    const finished = snapshot.status === 'done';
    if (finished) job.finishedAt ??= Date.now();
    const record = jobRecord(snapshot, job.resumeBase, job.finishedAt);
    // Changes that matter to a reader or a resume only: not every attempt or part report.
    const { finishedParts, stages } = snapshot.context;
    const key = `${record.status}:${record.stage}:${record.progress}:${finishedParts.length}:${Object.keys(stages).length}`;
    if (!finished && !force && key === job.lastWritten) return;
    job.lastWritten = key;
    const put = store.put(record, { holder, leaseMs, ...(finished ? { ttlMs } : {}) });
    void track(put).then(
      (result) => {
        if (result === 'failed') storeFailing = true;
        else if (result === 'written') storeFailing = false;
        // Another instance resumed the job, or it was declared interrupted: it must not go on here. A
        // store that refuses writes (a full disk): the job stops too rather than pay for parts it cannot
        // keep; it reads interrupted, resumable from what was stored once the store writes again.
        if ((result === 'lost' || result === 'failed') && !finished && job.actor.getSnapshot().status === 'active') job.actor.send({ type: 'job.interrupt' });
      },
      () => undefined,
    );
  }

  function pump(): void {
    while (running.size < options.concurrency) {
      const picked = nextQueued();
      if (picked === undefined) return;
      const next = picked.job;
      if (next.actor.getSnapshot().status !== 'active') continue;
      running.add(next.jobId);
      runningAs.set(next.jobId, picked.share);
      bump(runningByClient, picked.share, 1);
      bump(runningByAddress, next.address, 1);
      next.actor.send({ type: 'job.start' });
    }
  }

  function finish(job: LiveJob): void {
    if (!live.has(job.jobId)) return;
    live.delete(job.jobId);
    bump(liveByClient, job.clientId, -1);
    bump(liveByAddress, job.address, -1);
    addressClients.remove(job.clientId, job.address);
    if (running.delete(job.jobId)) {
      bump(runningByClient, runningAs.get(job.jobId) ?? job.clientId, -1);
      bump(runningByAddress, job.address, -1);
    }
    runningAs.delete(job.jobId);
    const queued = queue.indexOf(job);
    if (queued >= 0) queue.splice(queued, 1);
    job.listeners.clear();
    if (!stopped) pump();
  }

  /**
   * Renews the lease of every live job. A lost lease (the job was declared interrupted, or resumed
   * elsewhere) interrupts the job here; a record the store lost (Redis restarted empty) is written again.
   */
  async function renewLeases(): Promise<void> {
    await Promise.all(
      [...live.values()].map(async (job) => {
        const result = await store.renew(job.jobId, holder, leaseMs);
        if (!live.has(job.jobId)) return;
        if (result === 'lost') job.actor.send({ type: 'job.interrupt' });
        else if (result === 'missing') write(job, job.actor.getSnapshot(), true);
      }),
    );
  }
  let renewing = false;
  // A shared store back after an outage may have come back empty: every live job's record is written
  // again at once (renewing finds it missing), not at the next renewal, so no reader meets a 404 meanwhile.
  const unwatchReturn = store.onReturn?.(() => void renewLeases().catch(() => undefined)) ?? (() => undefined);
  const renewTimer = setInterval(() => {
    if (renewing || live.size === 0) return;
    renewing = true;
    void renewLeases().finally(() => {
      renewing = false;
    });
  }, Math.max(10, Math.floor(leaseMs / 3)));
  renewTimer.unref();

  const remoteFollowers = new Set<() => void>();

  /**
   * A job another instance runs (shared store, REDIS_URL): its stream follows the stored record until
   * the job ends (or is found interrupted: its lease lapsed), sending progress as it moves and then `done`.
   * The stream always ends with `done`: a record gone for good (expired, or lost with a store that came back
   * empty and whose runner did not write it again within the store's grace) ends it `interrupted`, the
   * status of a job nobody runs; while the store cannot be read, it waits.
   */
  function followRemoteJob(jobId: string, first: JobView | undefined, listener: JobListener): () => void {
    let last = first === undefined ? '' : JSON.stringify(progressOf(first));
    const timer = setInterval(() => {
      void store.get(jobId).then(
        (view) => {
          if (!remoteFollowers.has(stopFollowing)) return;
          if (view === undefined) {
            listener({ type: 'done', data: { status: 'interrupted' } });
            return stopFollowing();
          }
          const progress = progressOf(view);
          if (JSON.stringify(progress) !== last) {
            last = JSON.stringify(progress);
            listener({ type: 'progress', data: progress });
          }
          if (isFinal(view)) {
            listener({ type: 'done', data: { status: view.status } });
            stopFollowing();
          }
        },
        // The store is unreachable: the stream waits for it.
        () => undefined,
      );
    }, options.remotePollMs ?? 1000);
    const stopFollowing = (): void => {
      clearInterval(timer);
      remoteFollowers.delete(stopFollowing);
    };
    remoteFollowers.add(stopFollowing);
    return stopFollowing;
  }

  // A cancel asked on another instance: the job is cancelled here if this instance runs it.
  const unsubscribeCancels =
    options.cancelBus?.subscribe((jobId) => live.get(jobId)?.actor.send({ type: 'job.cancel' })) ?? (() => undefined);

  /** An interrupted job nobody runs is cancelled in the store: it is no longer resumable. */
  async function cancelInterrupted(record: JobRecord): Promise<JobView> {
    const { resume: _resume, resumable: _resumable, error: _error, ...rest } = record;
    const cancelled: JobRecord = { ...rest, status: 'cancelled', finishedAt: Date.now() };
    if (!(await store.claim(record, cancelled, holder, leaseMs))) {
      const now = await store.get(record.jobId);
      return publicView(now ?? record);
    }
    await track(store.put(cancelled, { holder, leaseMs, ttlMs }));
    return cancelled;
  }

  /**
   * `DELETE` of a job this instance does not run: the cancel goes over the bus to the instance that
   * does, and the answer is the job's view once it shows the job ended (or, after
   * `remoteCancelWaitMs`, the view as it then is: the real state, never a guess).
   */
  async function cancelRemoteJob(jobId: string): Promise<JobView | undefined> {
    const record = await store.get(jobId);
    if (record === undefined) return undefined;
    if (record.status === 'interrupted') return cancelInterrupted(record);
    const view = publicView(record);
    if (isFinal(view) || options.cancelBus === undefined) return view;
    try {
      await options.cancelBus.publish(jobId);
    } catch {
      return view;
    }
    const deadline = Date.now() + (options.remoteCancelWaitMs ?? 2000);
    let latest: JobView = view;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      const next = await store.get(jobId);
      if (next === undefined) return latest;
      latest = publicView(next);
      if (isFinal(latest)) return latest;
    }
    return latest;
  }

  function admit(clientId: string, address: string): void {
    if (stopped) throw new Error('The job registry is stopped.');
    if ((liveByClient.get(clientId) ?? 0) >= maxJobsPerClient) throw new JobCapacityError(maxJobsPerClient, 'client');
    if ((liveByAddress.get(address) ?? 0) >= maxJobsPerAddress) throw new JobCapacityError(maxJobsPerAddress, 'address');
    if (live.size >= options.maxJobs) throw new JobCapacityError(options.maxJobs);
  }

  /**
   * The job's spending limit over the price table; a resumed job starts with what its finished attempts
   * cost already spent (they are never asked again, and never paid twice).
   */
  function budgetOf(spec: JobSpec, restore: JobRestore | undefined): { budget?: CallBudget } {
    if (spec.maxCostUsd === undefined || options.prices === undefined) return {};
    const spent = sumUsd((restore?.attempts ?? []).map((attempt) => attempt.costUsd)) ?? 0;
    return { budget: createCostBudget(spec.maxCostUsd, options.prices, spent) };
  }

  function actorFor(jobId: string, spec: JobSpec, createdAt: number, restore?: JobRestore): JobActor {
    return createActor(logicFor(jobId, spec.origin), {
      id: `job.${jobId}`,
      input: {
        jobId,
        text: spec.text,
        ...(spec.pageMap === undefined ? {} : { pageMap: spec.pageMap }),
        cacheKey: spec.cacheKey,
        lang: spec.lang,
        ...(spec.langSource === undefined ? {} : { langSource: spec.langSource }),
        mcqCount: spec.mcqCount,
        fillCount: spec.fillCount,
        chain: spec.chain.map((link) => ({ provider: link.provider, apiKey: link.apiKey })),
        createdAt,
        ...(restore === undefined ? {} : { restore }),
        ...budgetOf(spec, restore),
      },
    });
  }

  /** Makes a started actor a live job of this registry: its events fan out, its snapshots are written. */
  function adopt(jobId: string, spec: JobSpec, actor: JobActor, resumeBase: ResumeBase): LiveJob {
    const clientId = spec.clientId ?? 'anonymous';
    const address = spec.address ?? 'unknown';
    const job: LiveJob = { jobId, clientId, address, actor, resumeBase, listeners: new Set(), lastWritten: '' };
    const fanOut = (event: JobStreamEvent): void => job.listeners.forEach((listener) => listener(event));
    actor.on('progress', fanOut);
    actor.on('attempt', fanOut);
    actor.on('item', fanOut);
    actor.on('reset', fanOut);
    actor.on('done', fanOut);
    live.set(jobId, job);
    bump(liveByClient, clientId, 1);
    bump(liveByAddress, address, 1);
    addressClients.add(clientId, address);
    actor.subscribe({
      next: (snapshot) => {
        write(job, snapshot);
        if (snapshot.status === 'done') finish(job);
      },
      error: () => finish(job),
    });
    queue.push(job);
    // The caller answers `queued` first; the slot is granted right after.
    queueMicrotask(pump);
    return job;
  }

  return {
    create(spec) {
      const clientId = spec.clientId ?? 'anonymous';
      admit(clientId, spec.address ?? 'unknown');
      const jobId = randomUUID();
      const actor = actorFor(jobId, spec, Date.now());
      const keySalt = newKeySalt();
      const resumeBase: ResumeBase = {
        documentId: spec.documentId,
        ...(spec.pages === undefined ? {} : { pages: spec.pages }),
        cacheKey: spec.cacheKey,
        providers: spec.chain.map((link) => link.provider),
        keySalt,
        keyFingerprints: keyFingerprints(keySalt, spec.chain),
      };
      actor.start();
      const job = adopt(jobId, spec, actor, resumeBase);
      write(job, actor.getSnapshot());
      return jobView(actor.getSnapshot());
    },

    async record(jobId) {
      const job = live.get(jobId);
      if (job !== undefined) return jobRecord(job.actor.getSnapshot(), job.resumeBase, job.finishedAt);
      return store.get(jobId);
    },

    async resume(record, spec) {
      const resume = record.resume;
      if (record.status !== 'interrupted' || resume === undefined || live.has(record.jobId))
        throw new JobNotResumableError(record.status);
      admit(spec.clientId ?? 'anonymous', spec.address ?? 'unknown');
      const resumeBase: ResumeBase = {
        documentId: resume.documentId,
        ...(resume.pages === undefined ? {} : { pages: resume.pages }),
        cacheKey: resume.cacheKey,
        providers: resume.providers,
        keySalt: resume.keySalt,
        keyFingerprints: resume.keyFingerprints,
      };
      const actor = actorFor(record.jobId, spec, record.createdAt, restoreOf(record, resume));
      actor.start();
      // The store decides between two resumes at once: only one takes the job's lease.
      const claimed = await store.claim(record, jobRecord(actor.getSnapshot(), resumeBase), holder, leaseMs);
      if (!claimed || stopped || live.has(record.jobId)) {
        actor.stop();
        const now = await store.get(record.jobId).catch(() => undefined);
        throw new JobNotResumableError(now?.status ?? record.status);
      }
      const job = adopt(record.jobId, spec, actor, resumeBase);
      job.lastWritten = '';
      return jobView(actor.getSnapshot());
    },

    async get(jobId) {
      const job = live.get(jobId);
      if (job !== undefined) return jobView(job.actor.getSnapshot(), job.finishedAt);
      const record = await store.get(jobId);
      return record === undefined ? undefined : publicView(record);
    },

    async cancel(jobId) {
      const job = live.get(jobId);
      if (job === undefined) return cancelRemoteJob(jobId);
      job.actor.send({ type: 'job.cancel' });
      return jobView(job.actor.getSnapshot(), job.finishedAt);
    },

    async subscribe(jobId, listener) {
      const job = live.get(jobId);
      if (job !== undefined) {
        listener({ type: 'progress', data: currentProgress(job.actor.getSnapshot()) });
        job.listeners.add(listener);
        return () => job.listeners.delete(listener);
      }
      let view: JobRecord | undefined;
      try {
        view = await store.get(jobId);
      } catch (error) {
        // Found a moment ago, unreadable now (Redis lost or just back empty): followed until it answers.
        if (error instanceof JobStoreUnavailableError) return followRemoteJob(jobId, undefined, listener);
        throw error;
      }
      if (view === undefined) return undefined;
      listener({ type: 'progress', data: progressOf(view) });
      if (isFinal(view)) {
        listener({ type: 'done', data: { status: view.status } });
        return () => undefined;
      }
      return followRemoteJob(jobId, view, listener);
    },

    async writable() {
      if (!storeFailing) return true;
      if (store.probe === undefined || (await store.probe()) !== undefined) return false;
      storeFailing = false;
      return true;
    },

    counts() {
      let subscribers = 0;
      for (const job of live.values()) subscribers += job.listeners.size;
      return { queued: live.size - running.size, running: running.size, subscribers };
    },

    async drain(graceMs) {
      stopped = true;
      // Queued jobs never start now: only the running ones may finish within the grace.
      const before = live.size;
      for (const job of [...queue]) job.actor.send({ type: 'job.interrupt' });
      const deadline = Date.now() + graceMs;
      while (running.size > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, Math.min(100, Math.max(1, deadline - Date.now()))));
      }
      const left = live.size;
      for (const job of [...live.values()]) job.actor.send({ type: 'job.interrupt' });
      await Promise.allSettled([...writes]);
      return { finished: before - left, interrupted: left };
    },

    async stop() {
      stopped = true;
      clearInterval(renewTimer);
      unwatchReturn();
      unsubscribeCancels();
      await options.cancelBus?.close();
      for (const stopFollowing of [...remoteFollowers]) stopFollowing();
      queue.length = 0;
      // Not a cancel: the user asked for nothing; the job reads interrupted and can be resumed.
      for (const job of [...live.values()]) job.actor.send({ type: 'job.interrupt' });
      await Promise.allSettled([...writes]);
      await store.close?.();
    },
  };
}
