import type { Redis } from 'ioredis';
import { interruptedRecord, isLiveStatus } from './record.js';
import {
  JobStoreUnavailableError,
  type JobPutOptions,
  type JobPutResult,
  type JobStatusStore,
} from './status-store.js';
import { isFinalStatus, jobStatuses, type JobRecord } from './types.js';

export interface RedisJobStatusStoreOptions {
  /** A connection with short command timeouts (src/fleet `createRedisStateStore(...).client`). */
  readonly client: Redis;
  /** REDIS_PREFIX; records live under `<prefix>job:<jobId>`, leases under `<prefix>job:<jobId>:lease`. */
  readonly prefix: string;
  /**
   * How long the record of a job still queued or running lives after each write (Redis `PX`). Every
   * write renews it, so this only bounds what is left behind. A finished job's record gets the
   * registry's `ttlMs` (JOB_TTL_SECONDS) instead, and so does an interrupted one (`interruptedTtlMs`).
   */
  readonly liveTtlMs: number;
  /** How long an interrupted record stays readable (JOB_TTL_SECONDS). */
  readonly interruptedTtlMs: number;
  /** Most records held in memory while Redis is unreachable (JOB_MAX_JOBS); past it the oldest final one goes. */
  readonly maxPending: number;
  /** Tells when Redis is reachable again, so the records held meanwhile are written back at once. */
  readonly onAvailability?: (listener: (up: boolean) => void) => () => void;
  /**
   * How long after Redis is found to have lost its data (restarted empty, a failover to an empty replica, a
   * flush) a missing record is answered "unavailable" (503) rather than unknown (404): long enough for every
   * live job's runner to write its record again (it does at once on reconnecting, and at its next lease
   * renewal at the latest, a third of JOB_LEASE_MS). Default 15 000 (JOB_LEASE_MS).
   */
  readonly restoreGraceMs?: number;
  /** Told each failed write (Redis refusing or unreachable), with its cause, and each write that succeeds. */
  readonly onWrite?: (error: unknown) => void;
  readonly now?: () => number;
}

/** A runner's write: fenced by its lease (docs/fleet.md "Job leases"). KEYS: record, lease. */
const writeScript = `
local lease = redis.call('GET', KEYS[2])
if lease and lease ~= ARGV[1] then return 0 end
if not lease and ARGV[5] == '0' then
  local current = redis.call('GET', KEYS[1])
  if current then
    local ok, decoded = pcall(cjson.decode, current)
    if ok and type(decoded) == 'table' and decoded.status ~= 'queued' and decoded.status ~= 'running' then return 0 end
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if ARGV[5] == '1' then redis.call('DEL', KEYS[2]) else redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[4]) end
return 1`;

/** 1 held, 0 lost (another holder, or the job is no longer live), 2 the record is gone. */
const renewScript = `
local lease = redis.call('GET', KEYS[2])
if lease == ARGV[1] then redis.call('PEXPIRE', KEYS[2], ARGV[2]) return 1 end
if lease then return 0 end
local current = redis.call('GET', KEYS[1])
if not current then return 2 end
local ok, decoded = pcall(cjson.decode, current)
if ok and type(decoded) == 'table' and (decoded.status == 'queued' or decoded.status == 'running') then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`;

/** Replaces the record only if no lease is held and it is still exactly ARGV[1]; ARGV[4], ARGV[5]: a lease to take. */
const swapScript = `
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if ARGV[4] ~= '' then redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5]) end
return 1`;

/**
 * The store's epoch (`<prefix>jobs:epoch`): epoch ms from which a missing record is believed unknown. Written
 * once (SET NX) by the first instance as 0; when Redis comes back without it (it lost its data), written as
 * now + the grace, so every instance answers a missing record 503 until the runners have written theirs
 * again. ARGV: the value to write when missing. Returns the value in force.
 */
const epochScript = `
local current = redis.call('GET', KEYS[1])
if current then return current end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]`;

interface Pending {
  readonly record: JobRecord;
  readonly options: JobPutOptions;
}

/**
 * Job records shared by every instance through Redis, each with a TTL, and the leases of the jobs that
 * run (docs/fleet.md "Job records and leases"). Only the plain JSON record goes to Redis, field by field
 * (it holds no key; the job's keys stay in its actor, in the process that runs it).
 *
 * While Redis is unreachable a write is held in memory (`deferred`) and written back when Redis returns,
 * so a job that finished meanwhile is not lost to the other instances; a read this process holds no copy
 * for rejects with `JobStoreUnavailableError` (the route answers 503, not 404).
 */
export function createRedisJobStatusStore(options: RedisJobStatusStoreOptions): JobStatusStore & {
  /** Writes back the records held while Redis was unreachable. */
  flush(): Promise<void>;
} {
  const { client } = options;
  const now = options.now ?? (() => Date.now());
  const key = (jobId: string) => `${options.prefix}job:${jobId}`;
  const leaseKey = (jobId: string) => `${options.prefix}job:${jobId}:lease`;
  const epochKey = `${options.prefix}jobs:epoch`;
  const restoreGraceMs = options.restoreGraceMs ?? 15_000;
  const pending = new Map<string, Pending>();
  const returnListeners = new Set<() => void>();
  const reportWrite = options.onWrite ?? (() => undefined);
  let flushing: Promise<void> | undefined;

  /** The epoch in force, writing it if Redis has none: 0 at the fleet's first start, now + the grace after a loss. */
  async function ensureEpoch(lost: boolean): Promise<number> {
    const value = await client.eval(epochScript, 1, epochKey, String(lost ? now() + restoreGraceMs : 0));
    return Number(value);
  }
  // The fleet's first instance: a store that never had records is complete from the start.
  void ensureEpoch(false).catch(() => undefined);

  function hold(record: JobRecord, putOptions: JobPutOptions): void {
    pending.delete(record.jobId);
    pending.set(record.jobId, { record, options: putOptions });
    if (pending.size <= options.maxPending) return;
    for (const [jobId, entry] of pending) {
      if (isFinalStatus(entry.record.status)) {
        pending.delete(jobId);
        if (pending.size <= options.maxPending) return;
      }
    }
  }

  async function write(record: JobRecord, putOptions: JobPutOptions): Promise<'written' | 'lost'> {
    const final = isFinalStatus(record.status);
    const ttl = Math.max(1, Math.round(putOptions.ttlMs ?? options.liveTtlMs));
    const reply = await client.eval(
      writeScript,
      2,
      key(record.jobId),
      leaseKey(record.jobId),
      putOptions.holder,
      JSON.stringify(plainRecord(record)),
      ttl,
      Math.max(1, Math.round(putOptions.leaseMs)),
      final ? '1' : '0',
    );
    reportWrite(undefined);
    return Number(reply) === 1 ? 'written' : 'lost';
  }

  async function flush(): Promise<void> {
    flushing ??= (async () => {
      try {
        for (const [jobId, entry] of [...pending]) {
          await write(entry.record, entry.options);
          // A newer write may have been held meanwhile: only the one written back leaves.
          if (pending.get(jobId) === entry) pending.delete(jobId);
        }
      } catch {
        // Still unreachable: the next return (or the registry's next renewal) tries again.
      } finally {
        flushing = undefined;
      }
    })();
    return flushing;
  }

  // Back after an outage, maybe empty (a restart without persistence, a failover): the epoch is re-asserted
  // (the grace begins if Redis lost it), what was held is written back, and the runners re-write their records.
  const unwatch = options.onAvailability?.((up) => {
    if (!up) return;
    void ensureEpoch(true)
      .catch(() => undefined)
      .then(() => flush())
      .then(() => returnListeners.forEach((listener) => listener()));
  });

  /** Reads the raw record, whether its lease is held, and the epoch, in one round trip. */
  async function readRaw(jobId: string): Promise<{ text: string | null; leased: boolean; epoch: string | null }> {
    const [text, lease, epoch] = await client.mget(key(jobId), leaseKey(jobId), epochKey);
    return { text: text ?? null, leased: lease !== null && lease !== undefined, epoch: epoch ?? null };
  }

  /** A record not found: unknown, unless Redis lost its data lately (then its runner may not have re-written it yet). */
  async function missing(epoch: string | null): Promise<undefined> {
    const trustedFrom = epoch === null ? await ensureEpoch(true) : Number(epoch);
    if (trustedFrom > now()) throw new JobStoreUnavailableError();
    return undefined;
  }

  async function swap(expectedText: string, next: JobRecord, ttlMs: number, holder = '', leaseMs = 0): Promise<boolean> {
    const reply = await client.eval(
      swapScript,
      2,
      key(next.jobId),
      leaseKey(next.jobId),
      expectedText,
      JSON.stringify(plainRecord(next)),
      Math.max(1, Math.round(ttlMs)),
      holder,
      Math.max(1, Math.round(leaseMs)),
    );
    return Number(reply) === 1;
  }

  return {
    flush,
    async put(record, putOptions): Promise<JobPutResult> {
      if (pending.size > 0) await flush();
      try {
        const result = await write(record, putOptions);
        pending.delete(record.jobId);
        return result;
      } catch (error) {
        reportWrite(error);
        hold(record, putOptions);
        return 'deferred';
      }
    },
    async get(jobId) {
      const held = pending.get(jobId);
      if (held !== undefined) return held.record;
      try {
        // A live record without a lease is marked interrupted; a race with its runner's renewal or a
        // resume is settled by the swap (it only replaces what was read), then read again.
        for (let round = 0; round < 3; round += 1) {
          const { text, leased, epoch } = await readRaw(jobId);
          if (text === null) return await missing(epoch);
          const record = parseRecord(text);
          if (record === undefined || leased || !isLiveStatus(record.status)) return record;
          const interrupted = interruptedRecord(record, now());
          if (await swap(text, interrupted, options.interruptedTtlMs)) return interrupted;
        }
        const { text, epoch } = await readRaw(jobId);
        return text === null ? await missing(epoch) : parseRecord(text);
      } catch {
        throw new JobStoreUnavailableError();
      }
    },
    onReturn(listener) {
      returnListeners.add(listener);
      return () => returnListeners.delete(listener);
    },
    async renew(jobId, holder, leaseMs) {
      try {
        const reply = Number(
          await client.eval(renewScript, 2, key(jobId), leaseKey(jobId), holder, Math.max(1, Math.round(leaseMs))),
        );
        return reply === 1 ? 'held' : reply === 2 ? 'missing' : 'lost';
      } catch {
        return 'unreachable';
      }
    },
    async claim(expected, next, holder, leaseMs) {
      const { text } = await readRaw(expected.jobId);
      if (text === null) return false;
      const current = parseRecord(text);
      if (current === undefined || JSON.stringify(plainRecord(current)) !== JSON.stringify(plainRecord(expected)))
        return false;
      return swap(text, next, options.liveTtlMs, holder, leaseMs);
    },
    async delete(jobId) {
      pending.delete(jobId);
      try {
        await client.del(key(jobId), leaseKey(jobId));
      } catch {
        // Unreachable: the record expires with its TTL.
      }
    },
    async close() {
      // The client belongs to the fleet, which closes it. A last attempt to write back what is held.
      unwatch?.();
      returnListeners.clear();
      if (pending.size > 0) await flush();
      pending.clear();
    },
  };
}

/** The record's own fields only: whatever else an object might carry never reaches Redis. */
function plainRecord(record: JobRecord): JobRecord {
  return {
    jobId: record.jobId,
    status: record.status,
    progress: record.progress,
    stage: record.stage,
    ...(record.result === undefined ? {} : { result: record.result }),
    ...(record.error === undefined ? {} : { error: record.error }),
    ...(record.meta === undefined ? {} : { meta: record.meta }),
    createdAt: record.createdAt,
    ...(record.finishedAt === undefined ? {} : { finishedAt: record.finishedAt }),
    ...(record.resumable === undefined ? {} : { resumable: record.resumable }),
    ...(record.resume === undefined ? {} : { resume: record.resume }),
  };
}

function parseRecord(text: string): JobRecord | undefined {
  try {
    const value = JSON.parse(text) as Partial<JobRecord> | null;
    if (value === null || typeof value !== 'object') return undefined;
    const statusKnown = jobStatuses.some((status) => status === value.status);
    return typeof value.jobId === 'string' && statusKnown && typeof value.progress === 'number'
      ? (value as JobRecord)
      : undefined;
  } catch {
    return undefined;
  }
}
