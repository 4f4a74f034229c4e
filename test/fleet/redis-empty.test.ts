/**
 * Redis restarted empty (no persistence; a failover to an empty replica looks the same): two instances on
 * a redis-server of the test's own, killed and started again with nothing in it while a job runs on A.
 * - B never answers the running job 404 (503 `JOB_STORE_UNAVAILABLE` at most) while A runs it: A writes its
 *   record again as soon as Redis answers, and until every runner could have, a missing record is 503;
 * - B's event stream, following the job through the store, ends with `done` when the job ends;
 * - an instance started after the restart uses the fleet's key fingerprint salt, not a new one: the
 *   instances that use it put it back;
 * - a document uploaded while Redis was down is written back when it returns: B finds it.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { connectFleet } from '../../src/fleet/index.js';
import { JobStoreUnavailableError } from '../../src/jobs/index.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { postJson, request, startHarness, type Harness, type HttpResult } from '../http/blackbox-support.js';
import { dataOf, openEvents } from '../jobs/support.js';
import { ownRedis, uniquePrefix, type OwnRedis } from './support.js';

const keys = { 'x-claude-key': 'test-claude-key-fleet-empty-0001' } as const;
const harnesses: Harness[] = [];
const servers: OwnRedis[] = [];

afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((harness) => harness.close()));
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

async function upload(harness: Harness): Promise<HttpResult> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(await englishTextPdf(2))], { type: 'application/pdf' }), 'cells.pdf');
  return request(`${harness.url}/v1/documents`, { method: 'POST', body: form });
}

async function readKey(url: string, key: string): Promise<string | null> {
  const client = new Redis(url);
  try {
    return await client.get(key);
  } finally {
    client.disconnect();
  }
}

async function reachable(harness: Harness): Promise<boolean> {
  return (await request(`${harness.url}/readyz`)).body.storeReachable === true;
}

async function until(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('Redis restarted empty', { timeout: 120_000 }, () => {
  it('a running job never reads 404 on the other instance, its followed stream ends with done, and a new instance keeps the salt', async () => {
    const redis = await ownRedis();
    servers.push(redis);
    await redis.start();
    const prefix = uniquePrefix('redis-empty');
    // The default lease (15 s): the runner's renewal comes every 5 s, far later than the reconnection.
    const env = { REDIS_URL: redis.url, REDIS_PREFIX: prefix, PROVIDER_TIMEOUT_MS: '10000', LOG_LEVEL: 'warn' };
    const [a, b] = await Promise.all([startHarness(env), startHarness(env)]);
    harnesses.push(a, b);
    const salt = await readKey(redis.url, `${prefix}keys:salt`);
    expect(salt).not.toBeNull();

    // Every call of A's provider takes 1.5 s: the job runs for several seconds.
    a.fault({ provider: 'claude', fault: 'slow', ms: 1500 });
    const uploaded = await upload(a);
    expect(uploaded.status, uploaded.text).toBe(201);
    const created = await postJson(`${a.url}/v1/jobs`, { documentId: uploaded.body.documentId, providers: ['claude'], options: { lang: 'en', mcqCount: 2, fillCount: 2 } }, keys);
    expect(created.status, created.text).toBe(202);
    const jobId = created.body.jobId as string;
    expect(await until(async () => (await request(`${b.url}/v1/jobs/${jobId}`)).body.status === 'running', 10_000)).toBe(true);
    const stream = await openEvents(`${b.url}/v1/jobs/${jobId}/events`);
    expect(stream.status).toBe(200);
    // Read below; a failure before that must not leave its rejection unhandled.
    stream.events.catch(() => undefined);

    await redis.stop();
    await redis.start();
    // From the moment Redis answers again, empty, B is asked until the job has ended: never 404.
    const seen: number[] = [];
    let final: HttpResult | undefined;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const read = await request(`${b.url}/v1/jobs/${jobId}`);
      seen.push(read.status);
      if (read.status === 200 && ['succeeded', 'failed', 'cancelled', 'interrupted'].includes(read.body.status as string)) {
        final = read;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(seen).not.toContain(404);
    expect(final?.body.status).toBe('succeeded');

    // The stream B followed through the store ends with done, and closes.
    const events = await Promise.race([stream.events, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the stream did not end')), 10_000))]);
    const last = events[events.length - 1];
    expect(last?.event).toBe('done');
    expect(last === undefined ? undefined : dataOf<{ status: string }>(last)).toEqual({ status: 'succeeded' });

    // The instances using the salt put it back; one started now adopts it, it does not make another.
    expect(await until(async () => (await reachable(a)) && (await reachable(b)), 10_000)).toBe(true);
    await until(async () => (await readKey(redis.url, `${prefix}keys:salt`)) !== null, 6_000);
    const c = await startHarness(env);
    harnesses.push(c);
    expect(await readKey(redis.url, `${prefix}keys:salt`)).toBe(salt);
  });

  it('a document uploaded while Redis is down is written back when it returns: the other instance finds it', async () => {
    const redis = await ownRedis();
    servers.push(redis);
    await redis.start();
    const env = { REDIS_URL: redis.url, REDIS_PREFIX: uniquePrefix('redis-empty-docs'), LOG_LEVEL: 'warn' };
    const [a, b] = await Promise.all([startHarness(env), startHarness(env)]);
    harnesses.push(a, b);
    await redis.stop();
    expect(await until(async () => !(await reachable(a)), 10_000)).toBe(true);
    const uploaded = await upload(a);
    expect(uploaded.status, uploaded.text).toBe(201);
    const documentId = uploaded.body.documentId as string;

    await redis.start();
    expect(await until(async () => (await reachable(a)) && (await reachable(b)), 10_000)).toBe(true);
    // Asked on B until the store answers: found, not 404 DOCUMENT_NOT_FOUND.
    let answer: HttpResult | undefined;
    await until(async () => {
      answer = await postJson(`${b.url}/v1/generate`, { task: 'notes', documentId, providers: ['claude'], options: { lang: 'en' } }, keys);
      return answer.status !== 503;
    }, 10_000);
    expect(answer?.status, answer?.text).toBe(200);
  });

  it('a flushed Redis (no reconnection at all): a missing record is 503 for the grace, then unknown', async () => {
    const redis = await ownRedis();
    servers.push(redis);
    await redis.start();
    const fleet = await connectFleet({ url: redis.url, prefix: uniquePrefix('redis-flushed'), breaker: { threshold: 3, recoveryMs: 60_000 }, providerTimeoutMs: 1000 });
    const store = fleet.jobStatusStore({ ttlSeconds: 60, maxJobs: 10, leaseMs: 600 });
    try {
      const running = { jobId: 'job-flushed', status: 'running' as const, progress: 40, stage: 'notes' as const, createdAt: 1 };
      expect(await store.put(running, { holder: 'runner-1', leaseMs: 60_000 })).toBe('written');
      // Before the loss an unknown job is unknown (404).
      expect(await store.get('job-never-made')).toBeUndefined();
      const client = new Redis(redis.url);
      await client.flushall();
      client.disconnect();
      // Its runner has not written it again yet: unavailable (503), never unknown.
      await expect(store.get('job-flushed')).rejects.toBeInstanceOf(JobStoreUnavailableError);
      // The runner's renewal finds it missing (the registry then writes it whole): readable again.
      expect(await store.renew('job-flushed', 'runner-1', 60_000)).toBe('missing');
      expect(await store.put(running, { holder: 'runner-1', leaseMs: 60_000 })).toBe('written');
      expect((await store.get('job-flushed'))?.status).toBe('running');
      // Past the grace, a record nobody wrote again is unknown.
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect(await store.get('job-never-made')).toBeUndefined();
    } finally {
      await store.close?.();
      await fleet.close();
    }
  });
});
