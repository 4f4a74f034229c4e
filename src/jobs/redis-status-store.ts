import type { Redis } from 'ioredis';
import type { JobStatusStore } from './status-store.js';
import { jobStatuses, type JobView } from './types.js';

export interface RedisJobStatusStoreOptions {
  /** A connection with short command timeouts (src/fleet `createRedisStateStore(...).client`). */
  readonly client: Redis;
  /** REDIS_PREFIX; views live under `<prefix>job:<jobId>`. */
  readonly prefix: string;
  /**
   * How long the view of a job still queued or running lives after each write (Redis `PX`). Every
   * status change rewrites it, so this only bounds what a crashed instance leaves behind. A finished
   * job's view gets the registry's `ttlMs` (JOB_TTL_SECONDS) instead.
   */
  readonly liveTtlMs: number;
  /**
   * Where views go while Redis is unreachable (the memory store; such a view is seen by this process
   * only). A write never fails because Redis did.
   */
  readonly fallback: JobStatusStore;
}

/**
 * Job views shared by every instance through Redis, each with a TTL: `GET /v1/jobs/:id` answers on any
 * instance. Only the plain JSON view goes to Redis, field by field (`JobView` holds no key; the job's
 * keys stay in its actor, in the process that runs it).
 *
 * The fallback holds a view only while this process's latest write of it did not reach Redis, so a
 * read looks there first (it is newer than what Redis has), then in Redis.
 */
export function createRedisJobStatusStore(options: RedisJobStatusStoreOptions): JobStatusStore {
  const { client, fallback } = options;
  const key = (jobId: string) => `${options.prefix}job:${jobId}`;
  return {
    async put(view, ttlMs) {
      const ttl = Math.max(1, Math.round(ttlMs ?? options.liveTtlMs));
      try {
        await client.set(key(view.jobId), JSON.stringify(plainView(view)), 'PX', ttl);
      } catch {
        await fallback.put(view, ttlMs);
        return;
      }
      await fallback.delete(view.jobId);
    },
    async get(jobId) {
      const local = await fallback.get(jobId);
      if (local !== undefined) return local;
      try {
        const text = await client.get(key(jobId));
        return text === null ? undefined : parseView(text);
      } catch {
        // Unreachable: only this process's fallback views can be answered meanwhile.
        return undefined;
      }
    },
    async delete(jobId) {
      await fallback.delete(jobId);
      try {
        await client.del(key(jobId));
      } catch {
        // Unreachable: the view expires with its TTL.
      }
    },
    async close() {
      // The client belongs to the fleet, which closes it.
      await fallback.close?.();
    },
  };
}

/** The view's own fields only: whatever else an object might carry never reaches Redis. */
function plainView(view: JobView): JobView {
  return {
    jobId: view.jobId,
    status: view.status,
    progress: view.progress,
    stage: view.stage,
    ...(view.result === undefined ? {} : { result: view.result }),
    ...(view.error === undefined ? {} : { error: view.error }),
    ...(view.meta === undefined ? {} : { meta: view.meta }),
    createdAt: view.createdAt,
    ...(view.finishedAt === undefined ? {} : { finishedAt: view.finishedAt }),
  };
}

function parseView(text: string): JobView | undefined {
  try {
    const value = JSON.parse(text) as Partial<JobView> | null;
    if (value === null || typeof value !== 'object') return undefined;
    const statusKnown = jobStatuses.some((status) => status === value.status);
    return typeof value.jobId === 'string' && statusKnown && typeof value.progress === 'number'
      ? (value as JobView)
      : undefined;
  } catch {
    return undefined;
  }
}
