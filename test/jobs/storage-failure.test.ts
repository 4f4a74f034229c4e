/**
 * A job whose records can no longer be stored (JOBS_DIR on a full disk; the write error injected through
 * the file store's own `writeFile`, so the test runs as any user) stops instead of running on unstored: it
 * reads `interrupted`, no provider call is made after the failed write, the store reports the cause, new
 * jobs wait for a probe write to succeed, and a restart reads back what was stored last, whole.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/actors/index.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { createFileJobStatusStore, createJobRegistry, type JobRegistry, type JobSpec } from '../../src/jobs/index.js';
import { Secret } from '../../src/security/secret.js';
import { gatewayOnEmulator } from './support.js';

let emulator: Emulator;
let gateway: Gateway;
let directory: string;
const registries: JobRegistry[] = [];

beforeAll(async () => {
  emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
  gateway = gatewayOnEmulator(emulator);
  directory = await mkdtemp(join(tmpdir(), 'study-helper-full-disk-'));
});

afterEach(async () => {
  await Promise.all(registries.splice(0).map((registry) => registry.stop()));
  emulator.resetFaults();
});

afterAll(async () => {
  await gateway.stop();
  await emulator.close();
  await rm(directory, { recursive: true, force: true });
});

const spec: JobSpec = {
  text: 'Photosynthesis converts light energy into chemical energy stored in glucose. Chlorophyll absorbs red and blue light.',
  cacheKey: 'full-disk-document',
  documentId: 'full-disk-document',
  lang: 'en',
  mcqCount: 1,
  fillCount: 1,
  chain: [{ provider: 'gpt', apiKey: new Secret('test-gpt-key-0001-full-disk') }],
};

describe('a job store on a full disk', () => {
  it('stops the job at the first write it cannot store, reports the cause, refuses new jobs until a write succeeds', async () => {
    let full = false;
    const reports: unknown[] = [];
    const options = { directory, maxEntries: 10, interruptedTtlMs: 60_000, liveTtlMs: 3_600_000 };
    const store = createFileJobStatusStore({
      ...options,
      onWrite: (error) => reports.push(error),
      writeFile: async (path, text) => {
        if (full) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
        await writeFile(path, text, { mode: 0o600 });
      },
    });
    const jobs = createJobRegistry({ gateway, policy: 'retry-then-fallback', concurrency: 1, maxJobs: 10, ttlSeconds: 60, store });
    registries.push(jobs);
    // Each provider call takes 300 ms; the disk fills up once the job is running (its first records stored).
    emulator.setFault({ provider: 'gpt', fault: 'slow', ms: 300 });
    const created = jobs.create(spec);
    const deadline = Date.now() + 10_000;
    while ((await jobs.get(created.jobId))?.status !== 'running' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    const callsBefore = emulator.stats().gpt.calls;
    full = true;

    // Its next record (the first finished step) is refused: the job stops there, interrupted.
    while ((await jobs.get(created.jobId))?.status === 'running' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    const view = await jobs.get(created.jobId);
    expect(view).toMatchObject({ status: 'interrupted', resumable: true });
    await new Promise((resolve) => setTimeout(resolve, 700));
    // No call after the one whose result could not be stored: nothing is paid for and lost.
    expect(emulator.stats().gpt.calls).toBeLessThanOrEqual(callsBefore + 1);
    expect(reports.some((report) => (report as { code?: string } | undefined)?.code === 'ENOSPC')).toBe(true);
    // New jobs wait: a probe write still fails.
    expect(await jobs.writable()).toBe(false);

    // The disk has room again: a probe write succeeds, new jobs are taken.
    full = false;
    expect(await jobs.writable()).toBe(true);
    expect(reports[reports.length - 1]).toBeUndefined();

    // A restart reads back the last record stored (the job interrupted at the progress stored), whole.
    const next = createFileJobStatusStore(options);
    const read = await next.get(created.jobId);
    expect(read).toMatchObject({ status: 'interrupted', resumable: true });
    expect(read?.progress).toBeLessThan(70);
    await next.close?.();
  });
});
