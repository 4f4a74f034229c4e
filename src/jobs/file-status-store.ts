import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { interruptedRecord, isLiveStatus } from './record.js';
import { createMemoryJobStatusStore, type JobStoreEntry, type MemoryJobStatusStore } from './status-store.js';
import type { JobRecord } from './types.js';

export interface FileJobStatusStoreOptions {
  /** The directory of the records, one `<jobId>.json` each (created if missing). */
  readonly directory: string;
  /** Most records held, on disk as in memory (JOB_MAX_JOBS); past it the oldest finished one goes first. */
  readonly maxEntries: number;
  /** How long an interrupted record stays readable (JOB_TTL_SECONDS). */
  readonly interruptedTtlMs: number;
  /**
   * How long the file of a queued or running job is believed after its last write, as Redis keeps a live
   * record (`max(JOB_TTL_SECONDS, 1 h)`): older, the process that ran it died long ago and it is dropped.
   */
  readonly liveTtlMs: number;
  /** Most bytes of one record's file; a larger record is kept in memory only. Default 8 MiB. */
  readonly maxRecordBytes?: number;
  /** Epoch ms; default `Date.now`. */
  readonly now?: () => number;
  /** Told each file write's outcome: nothing when it succeeded, the error (ENOSPC, EROFS, EACCES…) when not. */
  readonly onWrite?: (error?: unknown) => void;
  /** Writes a file (default `fs.writeFile`, mode 0600); tests inject a failing one (a full disk). */
  readonly writeFile?: (path: string, text: string) => Promise<void>;
}

/** A job id that may name a file: what `randomUUID` makes (anything else is never written). */
const fileSafeId = /^[A-Za-z0-9-]{1,64}$/u;

/**
 * Job records on disk, for one process without Redis (JOBS_DIR, docs/jobs.md "Without Redis"): the
 * in-process store (status-store.ts), each record written to `<directory>/<jobId>.json` whenever it is
 * (as each stage and part finishes: the registry writes the record then) and removed when it expires or
 * is evicted. Records only: a record holds salted key fingerprints, never a key. At start-up the files
 * are read back; a job found queued or running was this directory's previous process's, which is gone,
 * so it reads `interrupted` (resumable with the same keys). Bounded by `maxEntries` records, each at
 * most `maxRecordBytes`, each with the TTL the Redis store gives it.
 */
export function createFileJobStatusStore(options: FileJobStatusStoreOptions): MemoryJobStatusStore {
  const now = options.now ?? (() => Date.now());
  const maxRecordBytes = options.maxRecordBytes ?? 8 * 1024 * 1024;
  const { directory } = options;
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const initial = readBack(directory, options, now());
  const report = options.onWrite ?? (() => undefined);
  const writeText = options.writeFile ?? ((path: string, text: string) => writeFile(path, text, { mode: 0o600 }));
  // One write at a time per job, in order; `flush` waits for all of them. Each settles with its error, if any.
  const pending = new Map<string, Promise<unknown>>();
  const fileOf = (jobId: string): string => join(directory, `${jobId}.json`);

  function persist(jobId: string, entry: JobStoreEntry | undefined): void {
    if (!fileSafeId.test(jobId)) return;
    const previous = pending.get(jobId) ?? Promise.resolve();
    const next = previous.then(async () => {
      if (entry === undefined) return rm(fileOf(jobId), { force: true });
      const expiresAt = entry.expiresAt ?? now() + options.liveTtlMs;
      const text = JSON.stringify({ expiresAt, record: entry.record });
      if (Buffer.byteLength(text) > maxRecordBytes) return rm(fileOf(jobId), { force: true });
      const temporary = `${fileOf(jobId)}.${process.pid}.tmp`;
      try {
        await writeText(temporary, text);
        await rename(temporary, fileOf(jobId));
      } catch (error) {
        // A full disk leaves a partial temporary file: removed, the last good file stays as it was.
        await rm(temporary, { force: true }).catch(() => undefined);
        throw error;
      }
    });
    const settled = next.then(
      () => {
        report();
        return undefined;
      },
      (error: unknown) => {
        report(error);
        return error;
      },
    );
    pending.set(jobId, settled);
    void settled.then(() => {
      if (pending.get(jobId) === settled) pending.delete(jobId);
    });
  }

  const memory = createMemoryJobStatusStore({
    maxEntries: options.maxEntries,
    interruptedTtlMs: options.interruptedTtlMs,
    now,
    initial,
    onChange: persist,
  });
  // The interrupted records read back are written as such (and the expired or surplus files removed).
  for (const entry of initial) persist(entry.record.jobId, entry);

  return {
    // Written means on disk: a process killed right after still has the record (its finished parts). A
    // write the disk refused is `failed`: this process answers the record, a restart would not have it.
    async put(record, putOptions) {
      const result = await memory.put(record, putOptions);
      const error = await pending.get(record.jobId);
      return result === 'written' && error !== undefined ? 'failed' : result;
    },
    async probe() {
      const path = join(directory, `.probe.${process.pid}.tmp`);
      try {
        await writeText(path, 'probe');
        await rm(path, { force: true });
        report();
        return undefined;
      } catch (error) {
        await rm(path, { force: true }).catch(() => undefined);
        report(error);
        return error;
      }
    },
    get: (jobId) => memory.get(jobId),
    renew: (jobId, holder, leaseMs) => memory.renew(jobId, holder, leaseMs),
    claim: (expected, next, holder, leaseMs) => memory.claim(expected, next, holder, leaseMs),
    delete: (jobId) => memory.delete(jobId),
    async close() {
      // Every write started is on disk before the process may exit; the files stay for the next one.
      while (pending.size > 0) await Promise.all(pending.values());
      await memory.close?.();
    },
    get size() {
      return memory.size;
    },
  };
}

/**
 * The records of `directory` as the store starts with them: unreadable, foreign and expired files are
 * removed; live records become interrupted (their process is gone); at most `maxEntries`, newest kept.
 */
function readBack(directory: string, options: FileJobStatusStoreOptions, at: number): JobStoreEntry[] {
  const entries: JobStoreEntry[] = [];
  for (const name of readdirSync(directory)) {
    const path = join(directory, name);
    const jobId = name.endsWith('.json') ? name.slice(0, -'.json'.length) : '';
    const parsed = fileSafeId.test(jobId) ? parseEntry(path, jobId) : undefined;
    if (parsed === undefined || parsed.expiresAt <= at) {
      rmSync(path, { force: true });
      continue;
    }
    const record = isLiveStatus(parsed.record.status) ? interruptedRecord(parsed.record, at) : parsed.record;
    const expiresAt = isLiveStatus(parsed.record.status) ? at + options.interruptedTtlMs : parsed.expiresAt;
    entries.push({ record, expiresAt });
  }
  // Oldest first (the in-process store evicts from the front); the newest `maxEntries` are kept.
  entries.sort((a, b) => (a.record.finishedAt ?? a.record.createdAt) - (b.record.finishedAt ?? b.record.createdAt));
  for (const surplus of entries.splice(0, Math.max(0, entries.length - options.maxEntries))) {
    rmSync(join(directory, `${surplus.record.jobId}.json`), { force: true });
  }
  return entries;
}

function parseEntry(path: string, jobId: string): { record: JobRecord; expiresAt: number } | undefined {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as { expiresAt?: unknown; record?: Partial<JobRecord> };
    const record = parsed.record;
    if (typeof parsed.expiresAt !== 'number' || record === undefined || record.jobId !== jobId) return undefined;
    if (typeof record.status !== 'string' || typeof record.createdAt !== 'number') return undefined;
    return { record: record as JobRecord, expiresAt: parsed.expiresAt };
  } catch {
    return undefined;
  }
}

/**
 * Takes `directory` for this process (`owner.pid`). Refused, with the reason, when it cannot be used:
 * another live process holds it (its running jobs must not be read back as interrupted), it is not this
 * user's own or others may write in it (a directory planted in a shared tmp), or it cannot be made or
 * written (a read-only folder, a full disk: the error's code and message). A holder that died leaves it to
 * the next process.
 */
export function claimJobsDirectory(directory: string): { readonly claimed: true } | { readonly claimed: false; readonly reason: string } {
  const refused = (reason: string) => ({ claimed: false as const, reason });
  let step = 'create it';
  try {
    mkdirSync(directory, { recursive: true, mode: 0o700 });
    step = 'read it';
    const stat = statSync(directory);
    const uid = process.getuid?.();
    if (!stat.isDirectory()) return refused('it is not a directory');
    if (uid !== undefined && stat.uid !== uid) return refused(`it belongs to another user (uid ${stat.uid}, this process runs as ${uid})`);
    if ((stat.mode & 0o022) !== 0) return refused(`others may write in it (mode ${(stat.mode & 0o777).toString(8)})`);
    const lock = join(directory, 'owner.pid');
    try {
      const holder = Number(readFileSync(lock, 'utf8').trim());
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder))
        return refused(`another live process (pid ${holder}, named in its owner.pid) holds it, e.g. WORKERS > 1 without REDIS_URL`);
    } catch {
      // No lock yet.
    }
    step = 'write owner.pid in it';
    writeFileSync(lock, String(process.pid), { mode: 0o600 });
    return { claimed: true };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'EROFS' ? 'the file system is read-only' : code === 'EACCES' || code === 'EPERM' ? 'permission denied (a read-only folder?)' : code === 'ENOSPC' ? 'the disk is full' : (code ?? 'error');
    return refused(`could not ${step}: ${why} (${error instanceof Error ? error.message : String(error)})`);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
