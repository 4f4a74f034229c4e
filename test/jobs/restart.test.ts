/**
 * One process without Redis: a job survives a restart of its process (JOBS_DIR). A real service
 * process (`src/main.ts`, no REDIS_URL) runs a job whose provider calls go through a recording proxy in
 * front of the emulator (the test's own oracle of what was asked and answered); it is killed (SIGKILL)
 * mid-job and started again on the same directory. Then the job reads `interrupted` (JOB_INTERRUPTED,
 * resumable), other keys get 403, the same keys resume it (202), and it succeeds without any step the
 * killed process was answered being asked of the provider again.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { postJson, request } from '../http/blackbox-support.js';
import { startMainProcess, type ServiceProcess } from '../fleet/support.js';
import { startRecordingProxy, stepOf, type RecordingProxy } from './recording-proxy.js';

const key = 'test-claude-key-0001-restart';
const otherKey = 'test-claude-key-0002-restart';

/** `src/main.ts` in its own process, without REDIS_URL, on `jobsDir`; resolves once `/healthz` answers. */
function startProcess(jobsDir: string, proxy: RecordingProxy, emulator: Emulator): Promise<ServiceProcess> {
  return startMainProcess({
    REDIS_URL: undefined,
    JOBS_DIR: jobsDir,
    ANTHROPIC_BASE_URL: proxy.url,
    OPENAI_BASE_URL: emulator.openaiBaseUrl,
    TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl,
    // Small parts: the job is many provider steps, so it can die between them.
    JOB_PART_BUDGET_TOKENS: '64',
    PROVIDER_TIMEOUT_MS: '30000',
  });
}

interface ViewBody {
  status: string;
  resumable?: boolean;
  error?: { code: string };
  meta?: { attempts: { outcome: string }[] };
}

async function readUntil(url: string, jobId: string, predicate: (body: ViewBody) => boolean, withinMs: number): Promise<ViewBody> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const result = await request(`${url}/v1/jobs/${jobId}`);
    if (result.status === 200 && predicate(result.body as ViewBody)) return result.body as ViewBody;
    if (Date.now() > deadline) throw new Error(`job ${jobId}: not as expected within ${withinMs} ms: ${result.status} ${result.text}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

let emulator: Emulator;
let proxy: RecordingProxy;
let jobsDir: string;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
  proxy = await startRecordingProxy(emulator);
  jobsDir = await mkdtemp(join(tmpdir(), 'study-helper-restart-'));
});

afterAll(async () => {
  await Promise.all(started.map((running) => running.kill('SIGKILL')));
  await proxy?.close();
  await emulator?.close();
  if (jobsDir !== undefined) await rm(jobsDir, { recursive: true, force: true });
});

describe('a job of a process without Redis, killed mid-job', () => {
  it('reads interrupted after the process starts again on the same directory, and resumes without asking a finished step again', async () => {
    // The first process is answered its first three provider steps, then waits on the rest forever.
    proxy.hold = (_body, index) => index >= 3;
    const first = await startProcess(jobsDir, proxy, emulator);
    started.push(first);
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(await englishTextPdf(4))], { type: 'application/pdf' }), 'doc.pdf');
    const uploaded = await request(`${first.url}/v1/documents`, { method: 'POST', body: form });
    expect(uploaded.status, uploaded.text).toBe(201);
    const created = await postJson(
      `${first.url}/v1/jobs`,
      { documentId: uploaded.body.documentId, providers: ['claude'], options: { lang: 'en', mcqCount: 2, fillCount: 2 } },
      { 'x-claude-key': key },
    );
    expect(created.status, created.text).toBe(202);
    const jobId = created.body.jobId as string;

    await readUntil(
      first.url,
      jobId,
      (body) => body.status === 'running' && (body.meta?.attempts.filter((a) => a.outcome === 'succeeded').length ?? 0) >= 3,
      90_000,
    );
    // The fourth step is asked (and held): the first three are finished parts of the job.
    while (proxy.seen.length < 4) await new Promise((resolve) => setTimeout(resolve, 20));
    const answeredBefore = proxy.seen.filter((seen) => seen.answered).map((seen) => stepOf(seen.body));
    expect(answeredBefore).toHaveLength(3);
    // Stored as each part finishes: the three answered steps are in the job's file before the kill.
    const file = join(jobsDir, 'jobs', `${jobId}.json`);
    const succeededOnDisk = async (): Promise<number> => {
      try {
        const stored = JSON.parse(await readFile(file, 'utf8')) as { record: ViewBody };
        return stored.record.meta?.attempts.filter((a) => a.outcome === 'succeeded').length ?? 0;
      } catch {
        return 0;
      }
    };
    const onDiskBy = Date.now() + 10_000;
    while ((await succeededOnDisk()) < 3 && Date.now() < onDiskBy) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await succeededOnDisk()).toBe(3);

    await first.kill('SIGKILL');
    const askedBeforeRestart = proxy.seen.length;
    proxy.hold = () => false;
    const second = await startProcess(jobsDir, proxy, emulator);
    started.push(second);

    const interrupted = await readUntil(second.url, jobId, () => true, 5000);
    expect(interrupted).toMatchObject({ status: 'interrupted', resumable: true, error: { code: 'JOB_INTERRUPTED' } });

    const resumeUrl = `${second.url}/v1/jobs/${jobId}/resume`;
    const stranger = await request(resumeUrl, { method: 'POST', headers: { 'x-claude-key': otherKey } });
    expect(stranger.status, stranger.text).toBe(403);
    expect(stranger.body.error.code).toBe('JOB_FORBIDDEN');
    const resumed = await request(resumeUrl, { method: 'POST', headers: { 'x-claude-key': key } });
    expect(resumed.status, resumed.text).toBe(202);
    expect(resumed.body).toEqual({ jobId, status: 'queued' });

    const finished = await readUntil(second.url, jobId, (body) => body.status === 'succeeded' || body.status === 'failed', 90_000);
    expect(finished.status).toBe('succeeded');
    // The oracle: no step the killed process was answered is asked of the provider again.
    const askedAfter = proxy.seen.slice(askedBeforeRestart).map((seen) => stepOf(seen.body));
    expect(askedAfter.length).toBeGreaterThan(0);
    expect(askedAfter.filter((step) => answeredBefore.includes(step))).toEqual([]);
    expect(finished.meta?.attempts).toHaveLength(3 + askedAfter.length);
  }, 240_000);
});
