/**
 * Jobs that outlive their instance. Real service processes (`src/main.ts`) and an in-process
 * instance share the real Redis under one prefix; every provider call goes through a recording proxy in
 * front of the emulator (one proxy per instance), which is the test's own oracle of what each instance
 * asked a provider and was answered.
 *
 * - SIGKILL of the instance running a job: the other instance reads `interrupted` within JOB_LEASE_MS
 *   (+2 s), its event stream ends `done` interrupted; a resume there with other keys is 403, with the same
 *   keys 202, a second one 409; the job then succeeds without asking any step A was answered again.
 * - SIGTERM: requests during the drain are 503 SHUTTING_DOWN (never a reset), the job that can finish
 *   within SHUTDOWN_GRACE_MS finishes, the one that cannot is left interrupted; no job reads running.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { startService, type Service } from '../../src/http/service.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { postJson, request } from '../http/blackbox-support.js';
import { startRecordingProxy, stepOf, type RecordingProxy } from '../jobs/recording-proxy.js';
import { openEvents } from '../jobs/support.js';
import { dumpKeys, redisTestUrl, startServiceProcesses, uniquePrefix, type ServiceProcess } from './support.js';

// Short, so the test is quick, yet long enough that a fresh process starting its first job on a loaded
// machine (the SDK import, the token counter's worker) renews in time: a lapse there reads interrupted.
const leaseMs = 3000;
const graceMs = 5000;
const key = 'test-claude-key-0001-lease';
const otherKey = 'test-claude-key-0002-lease';

let emulator: Emulator;
let prefix: string;
let proxies: RecordingProxy[] = [];
let processes: ServiceProcess[] = [];
let reader: Service;
let readerProxy: RecordingProxy;

beforeAll(async () => {
  emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
  prefix = uniquePrefix('job-lease');
  proxies = await Promise.all([startRecordingProxy(emulator), startRecordingProxy(emulator), startRecordingProxy(emulator)]);
  const [killedProxy, drainedProxy, otherProxy] = proxies as [RecordingProxy, RecordingProxy, RecordingProxy];
  readerProxy = otherProxy;
  const common = {
    JOB_LEASE_MS: String(leaseMs),
    SHUTDOWN_GRACE_MS: String(graceMs),
    // Small parts: the job is many provider steps, so it can die between them.
    JOB_PART_BUDGET_TOKENS: '64',
    PROVIDER_TIMEOUT_MS: '30000',
  };
  processes = await startServiceProcesses(emulator, prefix, [
    { ...common, ANTHROPIC_BASE_URL: killedProxy.url },
    { ...common, ANTHROPIC_BASE_URL: drainedProxy.url },
  ]);
  reader = await startService(
    loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      REDIS_URL: redisTestUrl,
      REDIS_PREFIX: prefix,
      ANTHROPIC_BASE_URL: otherProxy.url,
      OPENAI_BASE_URL: emulator.openaiBaseUrl,
      TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl,
      ...common,
    }),
  );
}, 120_000);

afterAll(async () => {
  await reader?.close();
  await Promise.all(processes.map((process) => process.kill('SIGKILL')));
  await Promise.all(proxies.map((proxy) => proxy.close()));
  await emulator?.close();
  const client = new Redis(redisTestUrl);
  try {
    const found = await dumpKeys(redisTestUrl, prefix);
    if (found.size > 0) await client.del(...found.keys());
  } finally {
    client.disconnect();
  }
});

async function upload(pages: number): Promise<string> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(await englishTextPdf(pages))], { type: 'application/pdf' }), 'doc.pdf');
  const result = await request(`${reader.url}/v1/documents`, { method: 'POST', body: form });
  expect(result.status, result.text).toBe(201);
  return result.body.documentId as string;
}

async function createJob(url: string, documentId: string): Promise<string> {
  const created = await postJson(
    `${url}/v1/jobs`,
    { documentId, providers: ['claude'], options: { lang: 'en', mcqCount: 2, fillCount: 2 } },
    { 'x-claude-key': key },
  );
  expect(created.status, created.text).toBe(202);
  return created.body.jobId as string;
}

interface ViewBody {
  status: string;
  progress: number;
  resumable?: boolean;
  error?: { code: string };
  meta?: { attempts: { outcome: string }[] };
}

/** GET on the reader until `predicate` holds; fails after `withinMs` with the last answer. */
async function readUntil(jobId: string, predicate: (body: ViewBody) => boolean, withinMs: number): Promise<ViewBody> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const result = await request(`${reader.url}/v1/jobs/${jobId}`);
    if (result.status === 200 && predicate(result.body as ViewBody)) return result.body as ViewBody;
    if (Date.now() > deadline) throw new Error(`job ${jobId}: not as expected within ${withinMs} ms: ${result.status} ${result.text}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('a job whose instance is killed', () => {
  it('reads interrupted everywhere within the lease, and resumes on another instance without asking a finished step again', async () => {
    const [killed] = processes as [ServiceProcess];
    const killedProxy = proxies[0] as RecordingProxy;
    // The killed instance is answered its first three provider steps, then waits on the rest forever.
    killedProxy.hold = () => killedProxy.seen.length > 3;
    const documentId = await upload(4);
    const jobId = await createJob(killed.url, documentId);

    // Its three answered steps are in the shared record before it dies (the reader sees their attempts).
    const before = await readUntil(
      jobId,
      (body) => body.status === 'running' && (body.meta?.attempts.filter((a) => a.outcome === 'succeeded').length ?? 0) >= 3,
      60_000,
    );
    expect(before.status).toBe('running');
    const answeredToKilled = killedProxy.seen.filter((seen) => seen.answered).map((seen) => stepOf(seen.body));
    expect(answeredToKilled).toHaveLength(3);
    const stream = await openEvents(`${reader.url}/v1/jobs/${jobId}/events`);

    await killed.kill('SIGKILL');
    const killedAt = Date.now();
    const interrupted = await readUntil(jobId, (body) => body.status !== 'running', leaseMs + 2000);
    expect(Date.now() - killedAt).toBeLessThanOrEqual(leaseMs + 2000);
    expect(interrupted).toMatchObject({ status: 'interrupted', resumable: true, error: { code: 'JOB_INTERRUPTED' } });
    const done = await stream.waitFor((event) => event.event === 'done');
    expect(JSON.parse(done.at(-1)?.data ?? '{}')).toEqual({ status: 'interrupted' });
    stream.close();
    // Read again: never running again until resumed.
    expect((await request(`${reader.url}/v1/jobs/${jobId}`)).body.status).toBe('interrupted');

    const resumeUrl = `${reader.url}/v1/jobs/${jobId}/resume`;
    const stranger = await request(resumeUrl, { method: 'POST', headers: { 'x-claude-key': otherKey } });
    expect(stranger.status, stranger.text).toBe(403);
    expect(stranger.body.error.code).toBe('JOB_FORBIDDEN');
    expect((await request(resumeUrl, { method: 'POST' })).status).toBe(403);
    expect(readerProxy.seen).toHaveLength(0);

    const resumed = await request(resumeUrl, { method: 'POST', headers: { 'x-claude-key': key } });
    expect(resumed.status, resumed.text).toBe(202);
    expect(resumed.body).toEqual({ jobId, status: 'queued' });
    const again = await request(resumeUrl, { method: 'POST', headers: { 'x-claude-key': key } });
    expect(again.status, again.text).toBe(409);
    expect(again.body.error.code).toBe('JOB_NOT_RESUMABLE');

    const finished = await readUntil(jobId, (body) => body.status === 'succeeded' || body.status === 'failed', 60_000);
    expect(finished.status).toBe('succeeded');
    // The oracle: no step the killed instance was answered is asked of a provider again.
    const askedOfResumer = readerProxy.seen.map((seen) => stepOf(seen.body));
    expect(askedOfResumer.length).toBeGreaterThan(0);
    expect(askedOfResumer.filter((step) => answeredToKilled.includes(step))).toEqual([]);
    // Their attempts stay in the job's record, followed by the resumer's own.
    expect(finished.meta?.attempts).toHaveLength(3 + askedOfResumer.length);
    expect(readerProxy.seen.every((seen) => seen.answered)).toBe(true);
  }, 150_000);
});

describe('an instance given SIGTERM', () => {
  it('answers 503 SHUTTING_DOWN while it drains, finishes what fits in the grace, and leaves the rest interrupted', async () => {
    const drained = processes[1] as ServiceProcess;
    const drainedProxy = proxies[1] as RecordingProxy;
    // The short document's steps take 100 ms each; the long document's are never answered.
    drainedProxy.delayMs = 100;
    drainedProxy.hold = (body) => body.includes('Chapter 3');
    const [warmUpDocument, shortDocument, longDocument] = await Promise.all([upload(2), upload(1), upload(3)]);
    // A first job warms the fresh process (provider SDK import, token counter worker) outside the grace.
    const warmUp = await createJob(drained.url, warmUpDocument);
    await readUntil(warmUp, (body) => body.status === 'succeeded', 60_000);
    const finishing = await createJob(drained.url, shortDocument);
    const stuck = await createJob(drained.url, longDocument);
    await readUntil(finishing, (body) => body.status === 'running', 30_000);
    await readUntil(stuck, (body) => body.status === 'running', 30_000);

    const exit = drained.kill('SIGTERM');
    // The signal takes a moment to land; from the first 503 on, every new request is answered 503.
    const signalled = Date.now();
    while ((await request(`${drained.url}/healthz`)).status !== 503) {
      expect(Date.now() - signalled).toBeLessThan(2000);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const answers: number[] = [];
    const codes: string[] = [];
    // Within the grace, the instance still listens: no request meets a reset or a refused connection.
    const end = signalled + graceMs / 2;
    while (Date.now() < end) {
      const result = await request(`${drained.url}/v1/jobs/${finishing}`);
      answers.push(result.status);
      codes.push(result.body?.error?.code as string);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(answers.length).toBeGreaterThan(5);
    expect(new Set(answers)).toEqual(new Set([503]));
    expect(new Set(codes)).toEqual(new Set(['SHUTTING_DOWN']));
    await expect(exit).resolves.toBe(0);

    const finished = await readUntil(finishing, () => true, 1000);
    expect(finished.status, JSON.stringify({ progress: finished.progress, steps: drainedProxy.seen.length, ms: Date.now() - signalled })).toBe('succeeded');
    const left = await readUntil(stuck, () => true, 1000);
    expect(left).toMatchObject({ status: 'interrupted', resumable: true, error: { code: 'JOB_INTERRUPTED' } });
  }, 120_000);
});
