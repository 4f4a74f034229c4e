import { interruptedRecord, isLiveStatus } from './record.js';
import { isFinalStatus, type JobRecord } from './types.js';

/**
 * Where job records live. The job actors stay in the process that runs them; the store holds the plain
 * JSON record (the view, plus what a resume needs, never a key), so a shared store (Redis) can answer
 * `GET /v1/jobs/:id` from any instance and a resume can continue the job on any instance.
 *
 * A queued or running job is held by a lease: the runner (`holder`, one random id per registry) writes
 * the record only while it holds the lease and renews it while it works. A reader that finds a live
 * record without a lease marks it `interrupted` (and stores that): its runner is gone.
 */
export interface JobStatusStore {
  /**
   * Writes the record of a job `holder` runs and renews the holder's lease for `leaseMs` (released when
   * the record is final). `lost`: another holder has the job, or it was declared interrupted (a final
   * record still overwrites an interrupted one: its result is real). `deferred`: the store is
   * unreachable; the record is held in memory and written back when it returns. `failed`: the store
   * refused the write (a full disk, a read-only folder): this process still answers the record, but it
   * is not stored, so the job must not run on as if its progress were kept.
   */
  put(record: JobRecord, options: JobPutOptions): Promise<JobPutResult>;
  /**
   * The record, `interrupted` if it was live and its lease lapsed; undefined when unknown or expired.
   * Rejects with `JobStoreUnavailableError` when the store cannot be read and this process holds no copy.
   */
  get(jobId: string): Promise<JobRecord | undefined>;
  /** Extends `holder`'s lease. `lost`: the job is interrupted or another holder's; `missing`: the record is gone (a store that lost its data). */
  renew(jobId: string, holder: string, leaseMs: number): Promise<'held' | 'lost' | 'missing' | 'unreachable'>;
  /**
   * A resume takes an interrupted job: only if the stored record is still exactly `expected` and no lease
   * is held, `next` is written and `holder` takes the lease. False when someone else got there first.
   */
  claim(expected: JobRecord, next: JobRecord, holder: string, leaseMs: number): Promise<boolean>;
  delete(jobId: string): Promise<void>;
  /**
   * `listener` runs each time a shared store answers again after an outage, possibly empty (Redis restarted
   * without persistence, a failover to an empty replica): a runner then writes again the records it owns.
   */
  onReturn?(listener: () => void): () => void;
  /**
   * Tries a write again after one failed (a small probe, not a record): resolves with nothing when the
   * store writes again, else with the error. Only stores whose writes can fail (`failed`) have it.
   */
  probe?(): Promise<unknown>;
  close?(): Promise<void>;
}

export interface JobPutOptions {
  readonly holder: string;
  readonly leaseMs: number;
  /** Given once the job's actor ended (JOB_TTL_SECONDS); a live record lives as long as the store's live TTL. */
  readonly ttlMs?: number;
}

export type JobPutResult = 'written' | 'lost' | 'deferred' | 'failed';

/** The shared store could not be read and this process holds no copy: the job may exist (503, not 404). */
export class JobStoreUnavailableError extends Error {
  constructor() {
    super('The shared job store (Redis) is unreachable, so the job could not be read (it may exist).');
    this.name = 'JobStoreUnavailableError';
  }
}

export interface MemoryJobStatusStoreOptions {
  /** Most records held; past it the oldest finished one goes first. */
  readonly maxEntries: number;
  /** How long an interrupted record stays readable (JOB_TTL_SECONDS); default one hour. */
  readonly interruptedTtlMs?: number;
  /** Epoch ms; default `Date.now` (so fake timers drive expiry in tests). */
  readonly now?: () => number;
  /** Records to start with (a file store's, read back at start-up), oldest write first. */
  readonly initial?: readonly JobStoreEntry[];
  /** Told each record written (`entry`) or dropped (undefined): a file store keeps its copy with it. */
  readonly onChange?: (jobId: string, entry: JobStoreEntry | undefined) => void;
}

/** A record and when it expires (epoch ms; null: a live record, kept while its runner holds it). */
export interface JobStoreEntry {
  readonly record: JobRecord;
  readonly expiresAt: number | null;
}

type Entry = JobStoreEntry;

export interface MemoryJobStatusStore extends JobStatusStore {
  readonly size: number;
}

/**
 * An in-process store (one process, no REDIS_URL): expiry is checked on read and swept on write (no
 * timers to clean up), and the number of records is bounded. The record of a job still queued or
 * running is never evicted: the registry refuses new jobs before that could be needed. Its leases do
 * not lapse with time: the holder is this very process, so a live record is held until the registry
 * writes it final or interrupted; nothing of it outlives the process.
 */
export function createMemoryJobStatusStore(options: MemoryJobStatusStoreOptions): MemoryJobStatusStore {
  const now = options.now ?? (() => Date.now());
  const interruptedTtlMs = options.interruptedTtlMs ?? 3_600_000;
  const entries = new Map<string, Entry>((options.initial ?? []).map((entry) => [entry.record.jobId, entry]));
  const leases = new Map<string, string>();
  const changed = options.onChange ?? (() => undefined);

  function drop(jobId: string): void {
    entries.delete(jobId);
    leases.delete(jobId);
    changed(jobId, undefined);
  }

  function sweep(at: number): void {
    for (const [jobId, entry] of entries) {
      if (entry.expiresAt !== null && entry.expiresAt <= at) drop(jobId);
    }
  }

  function evictOldestFinished(): boolean {
    for (const [jobId, entry] of entries) {
      if (isFinalStatus(entry.record.status)) {
        drop(jobId);
        return true;
      }
    }
    return false;
  }

  function set(record: JobRecord, ttlMs: number | undefined): void {
    const at = now();
    sweep(at);
    // Re-inserting keeps the Map in write order: the oldest finished record is the first one met.
    entries.delete(record.jobId);
    const entry = { record, expiresAt: ttlMs === undefined ? null : at + ttlMs };
    entries.set(record.jobId, entry);
    changed(record.jobId, entry);
    while (entries.size > options.maxEntries && evictOldestFinished());
  }

  function read(jobId: string): JobRecord | undefined {
    const entry = entries.get(jobId);
    if (entry === undefined) return undefined;
    if (entry.expiresAt !== null && entry.expiresAt <= now()) {
      drop(jobId);
      return undefined;
    }
    return entry.record;
  }

  return {
    async put(record, { holder, ttlMs }) {
      const lease = leases.get(record.jobId);
      const final = isFinalStatus(record.status);
      if (lease !== undefined && lease !== holder) return 'lost';
      if (lease === undefined && !final && read(record.jobId)?.status === 'interrupted') return 'lost';
      set(record, ttlMs);
      if (final) leases.delete(record.jobId);
      else leases.set(record.jobId, holder);
      return 'written';
    },
    async get(jobId) {
      const record = read(jobId);
      if (record === undefined || !isLiveStatus(record.status) || leases.has(jobId)) return record;
      const interrupted = interruptedRecord(record, now());
      set(interrupted, interruptedTtlMs);
      return interrupted;
    },
    async renew(jobId, holder) {
      const lease = leases.get(jobId);
      if (lease === holder) return 'held';
      if (lease !== undefined) return 'lost';
      const record = read(jobId);
      if (record === undefined) return 'missing';
      if (!isLiveStatus(record.status)) return 'lost';
      leases.set(jobId, holder);
      return 'held';
    },
    async claim(expected, next, holder) {
      const current = read(expected.jobId);
      if (leases.has(expected.jobId) || current === undefined || JSON.stringify(current) !== JSON.stringify(expected)) return false;
      set(next, undefined);
      leases.set(next.jobId, holder);
      return true;
    },
    async delete(jobId) {
      drop(jobId);
    },
    async close() {
      entries.clear();
      leases.clear();
    },
    get size() {
      return entries.size;
    },
  };
}
