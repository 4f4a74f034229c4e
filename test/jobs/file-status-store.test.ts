/**
 * The file-backed job store (JOBS_DIR, one process without Redis): what one store writes, a store started
 * later on the same directory reads back, a job left queued or running then reads `interrupted`
 * (resumable), an expired record is gone, and the directory holds at most `maxEntries` records.
 */
import { chmod, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
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

describe('claimJobsDirectory', () => {
  it('is refused while another live process holds the directory, and taken from one that died', async () => {
    await writeFile(join(directory, 'owner.pid'), String(process.ppid));
    expect(claimJobsDirectory(directory)).toBe(false);
    // Past the kernel's pid range: no such process.
    await writeFile(join(directory, 'owner.pid'), '2147483646');
    expect(claimJobsDirectory(directory)).toBe(true);
  });

  it('is refused when others may write in the directory', async () => {
    await chmod(directory, 0o777);
    expect(claimJobsDirectory(directory)).toBe(false);
  });
});
