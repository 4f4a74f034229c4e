import { isFinalStatus, type JobView } from './types.js';

/**
 * Where job views live. The job actors stay in the process that runs them; the store holds the plain
 * JSON view, so a shared store (Redis, issue 7) can answer `GET /v1/jobs/:id` from any instance.
 * A finished job's view expires `ttlMs` after it was written.
 */
export interface JobStatusStore {
  /** Writes the view; `ttlMs` is given once the job has finished. */
  put(view: JobView, ttlMs?: number): Promise<void>;
  get(jobId: string): Promise<JobView | undefined>;
  delete(jobId: string): Promise<void>;
  close?(): Promise<void>;
}

export interface MemoryJobStatusStoreOptions {
  /** Most views held; past it the oldest finished one goes first. */
  readonly maxEntries: number;
  /** Epoch ms; default `Date.now` (so fake timers drive expiry in tests). */
  readonly now?: () => number;
}

interface Entry {
  readonly view: JobView;
  readonly expiresAt: number | null;
}

export interface MemoryJobStatusStore extends JobStatusStore {
  readonly size: number;
}

/**
 * An in-process store: expiry is checked on read and swept on write (no timers to clean up), and the
 * number of views is bounded. The view of a job still queued or running is never evicted: the
 * registry refuses new jobs before that could be needed.
 */
export function createMemoryJobStatusStore(options: MemoryJobStatusStoreOptions): MemoryJobStatusStore {
  const now = options.now ?? (() => Date.now());
  const entries = new Map<string, Entry>();

  function sweep(at: number): void {
    for (const [jobId, entry] of entries) {
      if (entry.expiresAt !== null && entry.expiresAt <= at) entries.delete(jobId);
    }
  }

  function evictOldestFinished(): boolean {
    for (const [jobId, entry] of entries) {
      if (isFinalStatus(entry.view.status)) {
        entries.delete(jobId);
        return true;
      }
    }
    return false;
  }

  return {
    async put(view, ttlMs) {
      const at = now();
      sweep(at);
      // Re-inserting keeps the Map in write order: the oldest finished view is the first one met.
      entries.delete(view.jobId);
      entries.set(view.jobId, { view, expiresAt: ttlMs === undefined ? null : at + ttlMs });
      while (entries.size > options.maxEntries && evictOldestFinished());
    },
    async get(jobId) {
      const entry = entries.get(jobId);
      if (entry === undefined) return undefined;
      if (entry.expiresAt !== null && entry.expiresAt <= now()) {
        entries.delete(jobId);
        return undefined;
      }
      return entry.view;
    },
    async delete(jobId) {
      entries.delete(jobId);
    },
    async close() {
      entries.clear();
    },
    get size() {
      return entries.size;
    },
  };
}
