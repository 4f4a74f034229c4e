import { randomUUID } from 'node:crypto';
import { createActor, type ActorRefFrom, type SnapshotFrom } from 'xstate';
import type { ChainLink, FallbackPolicy, Gateway } from '../actors/types.js';
import { jobMachine } from '../machines/job.machine.js';
import type { LangSource, ResultCache, StudyLang } from '../study/index.js';
import { createStageActor } from './stage-actor.js';
import type { JobCancelBus } from './cancel-bus.js';
import { createMemoryJobStatusStore, type JobStatusStore } from './status-store.js';
import type { JobStatus, JobStreamEvent, JobView, ProgressEvent } from './types.js';

/** What `POST /v1/jobs` asks for, once the document is loaded and the chain built. */
export interface JobSpec {
  readonly text: string;
  /** The document's identity for the results cache (its sha256). */
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
}

export interface JobRegistryOptions {
  readonly gateway: Gateway;
  readonly policy: FallbackPolicy;
  readonly cache?: ResultCache;
  /** Most document tokens in one prompt (JOB_PART_BUDGET_TOKENS). */
  readonly budgetTokens?: number;
  /** Most parts a stage may split the text into (MAX_TEXT_PARTS). */
  readonly maxParts?: number;
  /** Jobs running at once; the others wait queued (JOB_CONCURRENCY). */
  readonly concurrency: number;
  /** Most jobs held at once, live and finished (JOB_MAX_JOBS). */
  readonly maxJobs: number;
  /** Most live jobs of one client (JOB_MAX_JOBS_PER_CLIENT); default `maxJobs`. */
  readonly maxJobsPerClient?: number;
  /** Most live jobs of the clients of one address together (JOB_MAX_JOBS_PER_ADDRESS); default `maxJobs`. */
  readonly maxJobsPerAddress?: number;
  /** Most running jobs of one client (JOB_CONCURRENCY_PER_CLIENT); default `concurrency`. */
  readonly concurrencyPerClient?: number;
  /** A finished job is forgotten this long after it ended (JOB_TTL_SECONDS). */
  readonly ttlSeconds: number;
  /** Default: an in-process store bounded by `maxJobs`. */
  readonly store?: JobStatusStore;
  /** How often a stream follows a job another instance runs, through the shared store (default 1 s). */
  readonly remotePollMs?: number;
  /**
   * Carries a cancel to the instance that runs the job (REDIS_URL: Redis pub/sub). Without it a job
   * another instance runs cannot be cancelled from here (its view is answered as it is).
   */
  readonly cancelBus?: JobCancelBus;
  /** How long a remote cancel waits for the job's view to show it ended (default 2 s), polling every 25 ms. */
  readonly remoteCancelWaitMs?: number;
}

export type JobListener = (event: JobStreamEvent) => void;

export interface JobRegistry {
  /**
   * Starts a job (queued until a slot frees). Throws `JobCapacityError` when `maxJobs` are live, or
   * when the job's client already has `maxJobsPerClient` live.
   */
  create(spec: JobSpec): JobView;
  get(jobId: string): Promise<JobView | undefined>;
  /** Cancels a queued or running job; a finished one is answered as it is. Undefined when unknown. */
  cancel(jobId: string): Promise<JobView | undefined>;
  /**
   * Streams a job's events: first its current progress, then what happens; a finished job gets its
   * progress and `done` at once. Returns the unsubscribe function, or undefined for an unknown job.
   */
  subscribe(jobId: string, listener: JobListener): Promise<(() => void) | undefined>;
  /** Jobs queued and running in this process, and the listeners on their events (open SSE streams). */
  counts(): { readonly queued: number; readonly running: number; readonly subscribers: number };
  /** Cancels every live job (shutdown) and closes the store. */
  stop(): Promise<void>;
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
          : `The clients of this address already have ${maxJobs} live jobs (JOB_MAX_JOBS_PER_ADDRESS); retry when one has finished.`,
    );
    this.name = 'JobCapacityError';
  }
}

type JobActor = ActorRefFrom<typeof jobMachine>;
type JobSnapshot = SnapshotFrom<typeof jobMachine>;

interface LiveJob {
  readonly jobId: string;
  readonly clientId: string;
  readonly address: string;
  readonly actor: JobActor;
  readonly listeners: Set<JobListener>;
  lastWritten: string;
  /** Epoch ms: when this registry saw the actor reach its final state (the machine reads no clock). */
  finishedAt?: number;
}

function statusOf(snapshot: JobSnapshot): JobStatus {
  const value = snapshot.value;
  return typeof value === 'string' ? value : 'running';
}

/** The plain JSON view of a job's snapshot (ended at `finishedAt`, epoch ms): no key, no document text. */
export function jobView(snapshot: JobSnapshot, finishedAt?: number): JobView {
  const context = snapshot.context;
  const status = statusOf(snapshot);
  const result =
    status === 'succeeded' && context.notes !== null && context.mcq !== null && context.fill !== null
      ? { notes: context.notes, mcq: context.mcq, fill: context.fill }
      : undefined;
  return {
    jobId: context.jobId,
    status,
    progress: context.progress,
    stage: context.position,
    ...(result === undefined ? {} : { result }),
    ...(context.error === null ? {} : { error: context.error }),
    meta: {
      lang: context.lang,
      ...(context.langSource === undefined ? {} : { langSource: context.langSource }),
      mcqCount: context.mcqCount,
      fillCount: context.fillCount,
      stages: context.stages,
      attempts: context.attempts,
      ...(context.failedStage === null ? {} : { failedStage: context.failedStage }),
    },
    createdAt: context.createdAt,
    ...(finishedAt === undefined ? {} : { finishedAt }),
  };
}

function isFinal(view: JobView): view is JobView & { status: 'succeeded' | 'failed' | 'cancelled' } {
  return view.status === 'succeeded' || view.status === 'failed' || view.status === 'cancelled';
}

function progressOf(view: JobView): ProgressEvent {
  return { progress: view.progress, stage: view.stage };
}

function currentProgress(snapshot: JobSnapshot): ProgressEvent {
  const { progress, position, part, parts } = snapshot.context;
  return { progress, stage: position, ...(part === null || parts === null ? {} : { part, parts }) };
}

/**
 * Creates, finds and cancels job actors. At most `concurrency` run at once (the rest wait queued, in
 * order), at most `maxJobs` are live; a finished job's actor is dropped and its view kept in the
 * status store for `ttlSeconds`, so memory stays bounded.
 */
export function createJobRegistry(options: JobRegistryOptions): JobRegistry {
  const store = options.store ?? createMemoryJobStatusStore({ maxEntries: options.maxJobs });
  const ttlMs = options.ttlSeconds * 1000;
  const logic = jobMachine.provide({
    actors: {
      generateStage: createStageActor({
        gateway: options.gateway,
        policy: options.policy,
        ...(options.cache === undefined ? {} : { cache: options.cache }),
        ...(options.budgetTokens === undefined ? {} : { budgetTokens: options.budgetTokens }),
        ...(options.maxParts === undefined ? {} : { maxParts: options.maxParts }),
      }),
    },
  });
  const live = new Map<string, LiveJob>();
  const queue: LiveJob[] = [];
  const running = new Set<string>();
  const liveByClient = new Map<string, number>();
  const liveByAddress = new Map<string, number>();
  const runningByClient = new Map<string, number>();
  const maxJobsPerClient = options.maxJobsPerClient ?? options.maxJobs;
  const maxJobsPerAddress = options.maxJobsPerAddress ?? options.maxJobs;
  const concurrencyPerClient = options.concurrencyPerClient ?? options.concurrency;
  let stopped = false;

  const bump = (counts: Map<string, number>, clientId: string, by: number): void => {
    const next = (counts.get(clientId) ?? 0) + by;
    if (next <= 0) counts.delete(clientId);
    else counts.set(clientId, next);
  };

  /**
   * The next queued job to run: among clients under their running share, the one running the fewest
   * jobs goes first (in queue order on a tie), so one client's backlog never starves another's job.
   */
  function nextQueued(): LiveJob | undefined {
    let best: { job: LiveJob; index: number; running: number } | undefined;
    for (const [index, job] of queue.entries()) {
      const clientRunning = runningByClient.get(job.clientId) ?? 0;
      if (clientRunning >= concurrencyPerClient) continue;
      if (best === undefined || clientRunning < best.running) best = { job, index, running: clientRunning };
      if (clientRunning === 0) break;
    }
    if (best !== undefined) queue.splice(best.index, 1);
    return best?.job;
  }

  function write(job: LiveJob, snapshot: JobSnapshot): void {
    const finished = snapshot.status === 'done';
    if (finished) job.finishedAt ??= Date.now();
    const view = jobView(snapshot, job.finishedAt);
    // Status-level changes only: a shared store is not written on every part.
    const key = `${view.status}:${view.stage}:${view.progress}`;
    if (!finished && key === job.lastWritten) return;
    job.lastWritten = key;
    void store.put(view, finished ? ttlMs : undefined);
  }

  function pump(): void {
    while (running.size < options.concurrency) {
      const next = nextQueued();
      if (next === undefined) return;
      if (next.actor.getSnapshot().status !== 'active') continue;
      running.add(next.jobId);
      bump(runningByClient, next.clientId, 1);
      next.actor.send({ type: 'job.start' });
    }
  }

  function finish(job: LiveJob): void {
    if (!live.has(job.jobId)) return;
    live.delete(job.jobId);
    bump(liveByClient, job.clientId, -1);
    bump(liveByAddress, job.address, -1);
    if (running.delete(job.jobId)) bump(runningByClient, job.clientId, -1);
    const queued = queue.indexOf(job);
    if (queued >= 0) queue.splice(queued, 1);
    job.listeners.clear();
    pump();
  }

  const remoteFollowers = new Set<() => void>();

  /**
   * A job another instance runs (shared store, REDIS_URL): its stream follows the stored view until
   * the job ends, sending progress as it moves and then `done`.
   */
  function followRemoteJob(jobId: string, first: JobView, listener: JobListener): () => void {
    let last = JSON.stringify(progressOf(first));
    const timer = setInterval(() => {
      void store.get(jobId).then(
        (view) => {
          if (!remoteFollowers.has(stopFollowing)) return;
          if (view === undefined) return stopFollowing();
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

  /**
   * `DELETE` of a job this instance does not run: the cancel goes over the bus to the instance that
   * does, and the answer is the job's view once it shows the job ended (or, after
   * `remoteCancelWaitMs`, the view as it then is: the real state, never a guess).
   */
  async function cancelRemoteJob(jobId: string): Promise<JobView | undefined> {
    const view = await store.get(jobId);
    if (view === undefined || isFinal(view) || options.cancelBus === undefined) return view;
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
      latest = next;
      if (isFinal(latest)) return latest;
    }
    return latest;
  }

  return {
    create(spec) {
      if (stopped) throw new Error('The job registry is stopped.');
      const clientId = spec.clientId ?? 'anonymous';
      const address = spec.address ?? 'unknown';
      if ((liveByClient.get(clientId) ?? 0) >= maxJobsPerClient) throw new JobCapacityError(maxJobsPerClient, 'client');
      if ((liveByAddress.get(address) ?? 0) >= maxJobsPerAddress) throw new JobCapacityError(maxJobsPerAddress, 'address');
      if (live.size >= options.maxJobs) throw new JobCapacityError(options.maxJobs);
      const jobId = randomUUID();
      const actor = createActor(logic, {
        id: `job.${jobId}`,
        input: {
          jobId,
          text: spec.text,
          cacheKey: spec.cacheKey,
          lang: spec.lang,
          ...(spec.langSource === undefined ? {} : { langSource: spec.langSource }),
          mcqCount: spec.mcqCount,
          fillCount: spec.fillCount,
          chain: spec.chain.map((link) => ({ provider: link.provider, apiKey: link.apiKey })),
          createdAt: Date.now(),
        },
      });
      const job: LiveJob = { jobId, clientId, address, actor, listeners: new Set(), lastWritten: '' };
      const fanOut = (event: JobStreamEvent): void => job.listeners.forEach((listener) => listener(event));
      actor.on('progress', fanOut);
      actor.on('attempt', fanOut);
      actor.on('item', fanOut);
      actor.on('reset', fanOut);
      actor.on('done', fanOut);
      actor.subscribe({
        next: (snapshot) => {
          write(job, snapshot);
          if (snapshot.status === 'done') finish(job);
        },
        error: () => finish(job),
      });
      live.set(jobId, job);
      bump(liveByClient, clientId, 1);
      bump(liveByAddress, address, 1);
      actor.start();
      write(job, actor.getSnapshot());
      queue.push(job);
      const view = jobView(actor.getSnapshot());
      // The caller answers `queued` first; the slot is granted right after.
      queueMicrotask(pump);
      return view;
    },

    async get(jobId) {
      const job = live.get(jobId);
      if (job !== undefined) return jobView(job.actor.getSnapshot(), job.finishedAt);
      return store.get(jobId);
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
      const view = await store.get(jobId);
      if (view === undefined) return undefined;
      listener({ type: 'progress', data: progressOf(view) });
      if (isFinal(view)) {
        listener({ type: 'done', data: { status: view.status } });
        return () => undefined;
      }
      return followRemoteJob(jobId, view, listener);
    },

    counts() {
      let subscribers = 0;
      for (const job of live.values()) subscribers += job.listeners.size;
      return { queued: live.size - running.size, running: running.size, subscribers };
    },

    async stop() {
      stopped = true;
      unsubscribeCancels();
      await options.cancelBus?.close();
      for (const stopFollowing of [...remoteFollowers]) stopFollowing();
      queue.length = 0;
      for (const job of [...live.values()]) job.actor.send({ type: 'job.cancel' });
      await store.close?.();
    },
  };
}
