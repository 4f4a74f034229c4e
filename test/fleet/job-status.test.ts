/**
 * Job status through Redis: two service instances (the real service, each with its own
 * emulator on loopback) sharing one REDIS_URL and prefix. A job runs in the instance that created it;
 * its plain JSON view is in Redis with a TTL, so `GET /v1/jobs/:id` answers on every instance.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { connectFleet } from '../../src/fleet/index.js';
import { JobStoreUnavailableError, type JobView } from '../../src/jobs/index.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { postJson, request, startHarness, type Harness } from '../http/blackbox-support.js';
import { openEvents } from '../jobs/support.js';
import { dumpKeys, ownRedis, redisTestUrl, uniquePrefix, waitFor } from './support.js';

const keys = { 'x-claude-key': 'test-claude-key-fleet-jobs-0001' } as const;
const jobTtlSeconds = 120;
const harnesses: Harness[] = [];
const prefixes: string[] = [];

afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((harness) => harness.close()));
});

afterAll(async () => {
  const client = new Redis(redisTestUrl);
  try {
    for (const prefix of prefixes) {
      const found = await dumpKeys(redisTestUrl, prefix);
      if (found.size > 0) await client.del(...found.keys());
    }
  } finally {
    client.disconnect();
  }
});

/** Two instances of one fleet: same REDIS_URL, same REDIS_PREFIX. */
async function twoInstances(name: string): Promise<{ a: Harness; b: Harness; prefix: string }> {
  const prefix = uniquePrefix(name);
  prefixes.push(prefix);
  const env = {
    REDIS_URL: redisTestUrl,
    REDIS_PREFIX: prefix,
    JOB_TTL_SECONDS: String(jobTtlSeconds),
    PROVIDER_TIMEOUT_MS: '10000',
    LOG_LEVEL: 'warn',
  };
  const [a, b] = await Promise.all([startHarness(env), startHarness(env)]);
  harnesses.push(a, b);
  return { a, b, prefix };
}

async function startJob(harness: Harness): Promise<string> {
  const form = new FormData();
  form.append(
    'file',
    new Blob([new Uint8Array(await englishTextPdf(2))], { type: 'application/pdf' }),
    'cells.pdf',
  );
  const upload = await request(`${harness.url}/v1/documents`, { method: 'POST', body: form });
  expect(upload.status, upload.text).toBe(201);
  const created = await postJson(
    `${harness.url}/v1/jobs`,
    {
      documentId: upload.body.documentId,
      providers: ['claude'],
      options: { lang: 'en', mcqCount: 2, fillCount: 2 },
    },
    keys,
  );
  expect(created.status, created.text).toBe(202);
  return created.body.jobId as string;
}

async function view(
  harness: Harness,
  jobId: string,
): Promise<{ status: number; body: JobView; text: string }> {
  const result = await request(`${harness.url}/v1/jobs/${jobId}`);
  return { status: result.status, body: result.body as JobView, text: result.text };
}

/** GET on `harness` until the job's status is `status`; fails after 10 s with the last answer. */
async function until(harness: Harness, jobId: string, status: string): Promise<JobView> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const result = await view(harness, jobId);
    if (result.status === 200 && result.body.status === status) return result.body;
    if (Date.now() > deadline)
      throw new Error(`job ${jobId} not ${status} within 10 s: ${result.status} ${result.text}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('job status shared through Redis', { timeout: 60_000 }, () => {
  it('answers a job finished on instance A from instance B, with a TTL and no key in Redis', async () => {
    const { a, b, prefix } = await twoInstances('jobs-done');
    const jobId = await startJob(a);
    const onA = await until(a, jobId, 'succeeded');
    const onB = await view(b, jobId);
    expect(onB.status, onB.text).toBe(200);
    expect(onB.body).toEqual(onA);
    expect(onB.body.result?.mcq).toBeDefined();
    // B's emulator was never called: B only read the view.
    expect(b.emulator.stats().claude.calls).toBe(0);

    const client = new Redis(redisTestUrl);
    try {
      const ttl = await client.pttl(`${prefix}job:${jobId}`);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(jobTtlSeconds * 1000);
    } finally {
      client.disconnect();
    }
    const stored = await dumpKeys(redisTestUrl, prefix);
    expect([...stored.keys()]).toContain(`${prefix}job:${jobId}`);
    for (const [key, value] of stored) {
      expect(key).not.toContain(keys['x-claude-key']);
      expect(value).not.toContain(keys['x-claude-key']);
      expect(value).not.toContain('test-claude-key');
    }
  });

  it('answers a running job from the other instance, and a cancel there cancels it where it runs', async () => {
    const { a, b } = await twoInstances('jobs-running');
    // Every call to A's provider takes 5 s: the job stays running.
    a.fault({ provider: 'claude', fault: 'slow', ms: 5000 });
    const jobId = await startJob(a);
    await until(a, jobId, 'running');
    const running = await until(b, jobId, 'running');
    expect(running).toMatchObject({ jobId, status: 'running', stage: 'notes' });

    // A stream opened on B follows the job A runs through the store, up to its end.
    const stream = await openEvents(`${b.url}/v1/jobs/${jobId}/events`);
    await stream.waitFor((event) => event.event === 'progress');

    // DELETE on B, which does not run the job: A cancels it, and B answers the job's real state.
    const remoteCancel = await request(`${b.url}/v1/jobs/${jobId}`, { method: 'DELETE' });
    expect(remoteCancel.status, remoteCancel.text).toBe(200);
    expect(remoteCancel.body).toMatchObject({ jobId, status: 'cancelled' });
    expect(remoteCancel.body.finishedAt).toEqual(expect.any(Number));
    const onA = await view(a, jobId);
    expect(onA.body.status).toBe('cancelled');
    // A held the job: its in-flight call was aborted and counted nowhere.
    const providers = await request(`${a.url}/v1/providers`);
    const claude = (
      providers.body.providers as { id: string; breaker: { consecutiveFailures: number } }[]
    ).find((p) => p.id === 'claude');
    expect(claude?.breaker.consecutiveFailures).toBe(0);
    const done = await stream.waitFor((event) => event.event === 'done');
    expect(JSON.parse(done.at(-1)?.data ?? '{}')).toEqual({ status: 'cancelled' });
    stream.close();

    // A second DELETE, on either instance, answers the finished job as it is.
    expect((await request(`${b.url}/v1/jobs/${jobId}`, { method: 'DELETE' })).body.status).toBe('cancelled');
    expect((await request(`${a.url}/v1/jobs/${jobId}`, { method: 'DELETE' })).body.status).toBe('cancelled');
    expect((await request(`${b.url}/v1/jobs/no-such-job`)).status).toBe(404);
    expect((await request(`${b.url}/v1/jobs/no-such-job`, { method: 'DELETE' })).status).toBe(404);
  });

  it('a DELETE on the instance that runs the job answers cancelled there, and the other instance sees it', async () => {
    const { a, b } = await twoInstances('jobs-local-cancel');
    a.fault({ provider: 'claude', fault: 'slow', ms: 5000 });
    const jobId = await startJob(a);
    await until(b, jobId, 'running');
    const cancel = await request(`${a.url}/v1/jobs/${jobId}`, { method: 'DELETE' });
    expect(cancel.body).toMatchObject({ jobId, status: 'cancelled' });
    const cancelled = await until(b, jobId, 'cancelled');
    expect(cancelled.finishedAt).toEqual(expect.any(Number));
  });
});

describe('job status while Redis is down', () => {
  it('answers a job this process holds, refuses (never 404s) one it does not, and writes back what it held once Redis is back', async () => {
    const redis = await ownRedis();
    await redis.start();
    const prefix = uniquePrefix('jobs-outage');
    const fleet = await connectFleet({
      url: redis.url,
      prefix,
      breaker: { threshold: 3, recoveryMs: 60_000 },
      providerTimeoutMs: 1000,
    });
    // A short grace: how long a Redis that came back empty answers a missing record 503 (JOB_LEASE_MS).
    const store = fleet.jobStatusStore({ ttlSeconds: 60, maxJobs: 10, leaseMs: 300 });
    const job = (status: JobView['status']): JobView => ({
      jobId: 'job-1',
      status,
      progress: status === 'succeeded' ? 100 : 10,
      stage: status === 'succeeded' ? 'done' : 'notes',
      createdAt: 1,
    });
    const lease = { holder: 'holder-1', leaseMs: 60_000 };
    try {
      await expect(store.put(job('running'), lease)).resolves.toBe('written');
      await redis.stop();
      await waitFor(() => !fleet.store.isUp(), 2000);
      // The job finishes during the outage: held in memory, and this process still answers it.
      await expect(store.put({ ...job('succeeded'), finishedAt: 2 }, { ...lease, ttlMs: 60_000 })).resolves.toBe('deferred');
      expect((await store.get('job-1'))?.status).toBe('succeeded');
      // A job this process holds no copy of may exist: unavailable, not unknown.
      await expect(store.get('job-2')).rejects.toBeInstanceOf(JobStoreUnavailableError);

      // Redis back, empty (no persistence): the held record is written back without another write.
      await redis.start();
      await waitFor(() => fleet.store.isUp(), 5000);
      const reader = new Redis(redis.url);
      try {
        const deadline = Date.now() + 5000;
        let text: string | null = null;
        while (text === null && Date.now() < deadline) {
          text = await reader.get(`${prefix}job:job-1`);
          if (text === null) await new Promise((resolve) => setTimeout(resolve, 20));
        }
        expect(JSON.parse(text ?? '{}')).toMatchObject({ jobId: 'job-1', status: 'succeeded', finishedAt: 2 });
        expect(await reader.pttl(`${prefix}job:job-1`)).toBeGreaterThan(0);
        // A final record releases its lease.
        expect(await reader.exists(`${prefix}job:job-1:lease`)).toBe(0);
        await reader.del(`${prefix}job:job-1`);
      } finally {
        reader.disconnect();
      }
      // Redis came back empty: a missing record may be one a runner has yet to write again, so it is 503
      // within the grace, and unknown (404) after it.
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await store.get('job-1')).toBeUndefined();
    } finally {
      await store.close?.();
      await fleet.close();
      await redis.stop();
    }
  });
});
