/**
 * The file-backed job store (JOBS_DIR, one process without Redis): what one store writes, a store started
 * later on the same directory reads back, a job left queued or running then reads `interrupted`
 * (resumable), an expired record is gone, and the directory holds at most `maxEntries` records.
 */
import { spawnSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimJobsDirectory, createFileJobStatusStore } from '../../src/jobs/index.js';
import type { JobRecord } from '../../src/jobs/types.js';

let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), 'study-helper-file-store-'));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

function job(jobId: string, status: JobRecord['status'], createdAt = 1000): JobRecord {
  return { jobId, status, progress: 40, stage: 'notes', createdAt } as JobRecord;
}

const options = (now: number, maxEntries = 10) => ({ directory, maxEntries, interruptedTtlMs: 60_000, liveTtlMs: 3_600_000, now: () => now });

describe('createFileJobStatusStore', () => {
  it('a running job of a store that is gone reads interrupted, resumable, in the next store on the directory', async () => {
    const first = createFileJobStatusStore(options(10_000));
    expect(await first.put(job('a1', 'running'), { holder: 'h1', leaseMs: 15_000 })).toBe('written');
    // The process dies: no close, nothing more written.
    const second = createFileJobStatusStore(options(20_000));
    const read = await second.get('a1');
    expect(read).toMatchObject({ jobId: 'a1', status: 'interrupted', resumable: true, error: { code: 'JOB_INTERRUPTED' }, progress: 40 });
    await second.close?.();
  });

  it('a finished record lives its TTL, then is gone from the next store', async () => {
    // One store at a time on the directory, as the directory's lock makes it (claimJobsDirectory): each
    // is closed (its writes on disk) before the next starts.
    const first = createFileJobStatusStore(options(10_000));
    await first.put(job('b1', 'succeeded'), { holder: 'h1', leaseMs: 15_000, ttlMs: 5_000 });
    await first.close?.();
    const second = createFileJobStatusStore(options(14_000));
    expect((await second.get('b1'))?.status).toBe('succeeded');
    await second.close?.();
    const third = createFileJobStatusStore(options(16_000));
    expect(await third.get('b1')).toBeUndefined();
    await third.close?.();
    expect((await readdir(join(directory))).filter((name) => name.startsWith('b1'))).toEqual([]);
  });

  it('keeps at most maxEntries records on disk', async () => {
    const store = createFileJobStatusStore(options(10_000, 3));
    for (let index = 0; index < 6; index += 1) {
      await store.put(job(`c${index}`, 'succeeded', 1000 + index), { holder: 'h1', leaseMs: 15_000, ttlMs: 60_000 });
    }
    await store.close?.();
    expect((await readdir(directory)).filter((name) => name.endsWith('.json'))).toHaveLength(3);
  });
});

describe('createFileJobStatusStore when the disk refuses writes', () => {
  it('answers failed (not written), reports the cause, and leaves the last good file as it was', async () => {
    let full = false;
    const reports: unknown[] = [];
    const store = createFileJobStatusStore({
      ...options(10_000),
      onWrite: (error) => reports.push(error),
      // The real write, until the disk is full: then ENOSPC after a partial write, as a full disk does.
      writeFile: async (path, text) => {
        if (!full) return writeFile(path, text, { mode: 0o600 });
        await writeFile(path, text.slice(0, 10));
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      },
    });
    expect(await store.put(job('d1', 'running'), { holder: 'h1', leaseMs: 15_000 })).toBe('written');
    expect(reports).toEqual([undefined]);
    full = true;
    expect(await store.put({ ...job('d1', 'running'), progress: 70 }, { holder: 'h1', leaseMs: 15_000 })).toBe('failed');
    expect(reports[1]).toMatchObject({ code: 'ENOSPC' });
    // This process still answers the newer record; the disk keeps the older one, whole, and no partial file.
    expect((await store.get('d1'))?.progress).toBe(70);
    expect(await readdir(directory)).toEqual(['d1.json']);
    const next = createFileJobStatusStore(options(20_000));
    expect(await next.get('d1')).toMatchObject({ status: 'interrupted', progress: 40 });
    await next.close?.();
  });
});

describe('claimJobsDirectory', () => {
  it('is refused while another live process holds the directory, naming it, and taken from one that died', async () => {
    await writeFile(join(directory, 'owner.pid'), String(process.ppid));
    const refused = claimJobsDirectory(directory);
    expect(refused.claimed).toBe(false);
    expect(refused.claimed ? '' : refused.reason).toContain(`another live process (pid ${process.ppid}`);
    // Past the kernel's pid range: no such process.
    await writeFile(join(directory, 'owner.pid'), '2147483646');
    expect(claimJobsDirectory(directory)).toEqual({ claimed: true });
  });

  it('is refused when others may write in the directory, saying so', async () => {
    await chmod(directory, 0o777);
    const refused = claimJobsDirectory(directory);
    expect(refused.claimed ? '' : refused.reason).toContain('others may write in it (mode 777)');
  });

  it('is refused on a read-only folder, naming that cause (not another process)', async (context) => {
    const readOnly = await readOnlyDirectory(directory);
    if (readOnly === undefined) return context.skip();
    try {
      const refused = claimJobsDirectory(join(readOnly.path, 'jobs'));
      expect(refused.claimed).toBe(false);
      const reason = refused.claimed ? '' : refused.reason;
      expect(reason).toMatch(/read-only|permission denied/);
      expect(reason).not.toContain('another live process');
    } finally {
      await readOnly.release();
    }
  });
});

/**
 * A folder nothing may be written in: a read-only tmpfs where this user may mount one (root), else a folder
 * without write permission (which binds a non-root user only); undefined when neither can be had.
 */
async function readOnlyDirectory(base: string): Promise<{ path: string; release: () => Promise<void> } | undefined> {
  const path = join(base, 'read-only');
  await mkdir(path);
  if (process.getuid?.() === 0) {
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=64k', 'tmpfs', path], { stdio: 'ignore' });
    if (mounted.status !== 0) return undefined;
    return { path, release: async () => void spawnSync('umount', [path], { stdio: 'ignore' }) };
  }
  await chmod(path, 0o500);
  return { path, release: () => chmod(path, 0o700) };
}
