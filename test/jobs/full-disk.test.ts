/**
 * A real full disk: JOBS_DIR on a 256 KiB tmpfs filled to the last byte (needs mounting, so root; skipped
 * elsewhere: test/jobs/storage-failure.test.ts injects the same error through the store as any user). An
 * upload answers 503 `STORAGE_UNAVAILABLE` (not 500), `/readyz` says `degraded` naming ENOSPC, the failures
 * are counted in /metrics, a job whose record cannot be written stops (interrupted) instead of running on,
 * and new jobs are refused 503 until the disk has room again.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { postJson, request, startHarness, type Harness } from '../http/blackbox-support.js';

const mountPoint = mkdtempSync(join(tmpdir(), 'study-helper-tmpfs-'));
const mounted = process.getuid?.() === 0 && spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0700', 'tmpfs', mountPoint], { stdio: 'ignore' }).status === 0;
const harnesses: Harness[] = [];

afterAll(async () => {
  await Promise.all(harnesses.map((harness) => harness.close()));
  if (mounted) spawnSync('umount', [mountPoint], { stdio: 'ignore' });
  rmSync(mountPoint, { recursive: true, force: true });
});

/** Fills the file system of `directory` to the last byte: one file, appended to until the disk refuses even a byte. */
function fill(directory: string): string {
  const path = join(directory, 'filler');
  const fd = openSync(path, 'w');
  try {
    for (let size = 64 * 1024; size >= 1; ) {
      try {
        writeSync(fd, Buffer.alloc(size, 1));
      } catch {
        size = Math.floor(size / 2);
      }
    }
  } finally {
    closeSync(fd);
  }
  return path;
}

async function uploadPdf(harness: Harness): Promise<Awaited<ReturnType<typeof request>>> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(await englishTextPdf(2))], { type: 'application/pdf' }), 'cells.pdf');
  return request(`${harness.url}/v1/documents`, { method: 'POST', body: form });
}

const keys = { 'x-gpt-key': 'test-gpt-key-0001-tmpfs' } as const;

describe.skipIf(!mounted)('JOBS_DIR on a full disk (tmpfs)', { timeout: 90_000 }, () => {
  it('uploads 503 STORAGE_UNAVAILABLE, /readyz degraded with the cause, the job stops, new jobs 503 until there is room', async () => {
    const jobsDir = join(mountPoint, 'jobs-dir');
    const harness = await startHarness({ JOBS_DIR: jobsDir, LOG_LEVEL: 'info' });
    harnesses.push(harness);
    const stored = await uploadPdf(harness);
    expect(stored.status, stored.text).toBe(201);
    expect((await request(`${harness.url}/readyz`)).body.status).toBe('ready');

    const filler = fill(mountPoint);
    const refused = await uploadPdf(harness);
    expect(refused.status, refused.text).toBe(503);
    expect(refused.body.error.code).toBe('STORAGE_UNAVAILABLE');
    expect(refused.headers.get('retry-after')).not.toBeNull();
    const ready = await request(`${harness.url}/readyz`);
    expect(ready.body).toMatchObject({ status: 'degraded', failures: [{ store: 'documents', reason: expect.stringContaining('ENOSPC') }] });
    expect(harness.logs.filter((line) => line.includes('a documents write failed') && line.includes('ENOSPC'))).toHaveLength(1);

    // A job on the document stored before: its first record cannot be written, so it stops at once.
    harness.fault({ provider: 'gpt', fault: 'slow', ms: 300 });
    const created = await postJson(`${harness.url}/v1/jobs`, { documentId: stored.body.documentId, providers: ['gpt'], options: { lang: 'en', mcqCount: 1, fillCount: 1 } }, keys);
    expect(created.status, created.text).toBe(202);
    const jobId = created.body.jobId as string;
    let status = '';
    for (let turn = 0; turn < 200 && status !== 'interrupted'; turn += 1) {
      status = (await request(`${harness.url}/v1/jobs/${jobId}`)).body.status as string;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(status).toBe('interrupted');
    const refusedJob = await postJson(`${harness.url}/v1/jobs`, { documentId: stored.body.documentId, providers: ['gpt'] }, keys);
    expect(refusedJob.status, refusedJob.text).toBe(503);
    expect(refusedJob.body.error.code).toBe('STORAGE_UNAVAILABLE');
    const metrics = (await request(`${harness.url}/metrics`)).text;
    expect(metrics).toMatch(/studyhelper_storage_write_failures_total\{store="jobs"\} [1-9]/);
    expect(metrics).toMatch(/studyhelper_storage_write_failures_total\{store="documents"\} [1-9]/);

    // Room again: the next job is taken (its probe write succeeds), uploads are stored.
    unlinkSync(filler);
    harness.emulator.resetFaults();
    const again = await postJson(`${harness.url}/v1/jobs`, { documentId: stored.body.documentId, providers: ['gpt'] }, keys);
    expect(again.status, again.text).toBe(202);
    expect((await uploadPdf(harness)).status).toBe(201);
    expect((await request(`${harness.url}/readyz`)).body.status).toBe('ready');
  });
});
