/**
 * The job registry over the real actor system (gateway + adapters) and the provider emulator:
 * bounded concurrency, bounded number of jobs, expiry, shutdown.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Gateway } from '../../src/actors/index.js';
import { startEmulator } from '../../src/emulator/index.js';
import type { Emulator } from '../../src/emulator/index.js';
import { createJobRegistry, JobCapacityError } from '../../src/jobs/index.js';
import type {
  JobRegistry,
  JobRegistryOptions,
  JobSpec,
  JobStreamEvent,
  JobView,
} from '../../src/jobs/index.js';
import { createResultCache } from '../../src/study/index.js';
import { Secret } from '../../src/security/secret.js';
import { gatewayOnEmulator } from './support.js';

let emulator: Emulator;
let gateway: Gateway;
const registries: JobRegistry[] = [];

beforeAll(async () => {
  emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
  gateway = gatewayOnEmulator(emulator);
});

afterEach(async () => {
  await Promise.all(registries.splice(0).map((registry) => registry.stop()));
  emulator.resetFaults();
});

afterAll(async () => {
  await gateway.stop();
  await emulator.close();
});

function registry(options: Partial<JobRegistryOptions> = {}): JobRegistry {
  const created = createJobRegistry({
    gateway,
    policy: 'retry-then-fallback',
    concurrency: 2,
    maxJobs: 10,
    ttlSeconds: 60,
    ...options,
  });
  registries.push(created);
  return created;
}

let documentNumber = 0;

/** A small job over a document of its own (so no two jobs share cache entries). */
function spec(): JobSpec {
  documentNumber += 1;
  return {
    text: `Document ${documentNumber}. Photosynthesis converts light energy into chemical energy stored in glucose. Chlorophyll absorbs red and blue light.`,
    cacheKey: `document-${documentNumber}`,
    documentId: `document-${documentNumber}`,
    lang: 'en',
    mcqCount: 1,
    fillCount: 1,
    chain: [{ provider: 'gpt', apiKey: new Secret('test-gpt-key-0001-registry') }],
  };
}

/** Resolves with the job's final status (from its `done` event). */
async function finished(jobs: JobRegistry, jobId: string, seen: JobStreamEvent[] = []): Promise<string> {
  return new Promise((resolve, reject) => {
    void jobs
      .subscribe(jobId, (event) => {
        seen.push(event);
        if (event.type === 'done') resolve(event.data.status);
      })
      .then((unsubscribe) => {
        if (unsubscribe === undefined) reject(new Error(`unknown job ${jobId}`));
      });
  });
}

describe('job registry', () => {
  it('runs at most `concurrency` jobs; the others wait queued, in order', async () => {
    const jobs = registry({ concurrency: 1 });
    const order: string[] = [];
    const first = jobs.create(spec());
    const second = jobs.create(spec());
    expect(first.status).toBe('queued');
    expect(second.status).toBe('queued');
    await Promise.resolve();
    expect(jobs.counts()).toMatchObject({ queued: 1, running: 1 });
    expect((await jobs.get(second.jobId))?.status).toBe('queued');
    const track = (jobId: string, name: string) =>
      jobs.subscribe(jobId, (event) => {
        if (event.type === 'attempt') order.push(`${name}:attempt`);
        if (event.type === 'done') order.push(`${name}:done`);
      });
    await track(first.jobId, 'first');
    await track(second.jobId, 'second');
    await expect(finished(jobs, second.jobId)).resolves.toBe('succeeded');
    expect(order.indexOf('first:done')).toBeGreaterThanOrEqual(0);
    expect(order.indexOf('first:done')).toBeLessThan(order.indexOf('second:attempt'));
    expect(jobs.counts()).toEqual({ queued: 0, running: 0, subscribers: 0 });
  });

  it('refuses a job past `maxJobs` live ones, and takes one again when a slot frees', async () => {
    emulator.setFault({ provider: 'gpt', fault: 'slow', ms: 2_000 });
    const jobs = registry({ concurrency: 1, maxJobs: 2 });
    const first = jobs.create(spec());
    jobs.create(spec());
    expect(() => jobs.create(spec())).toThrow(JobCapacityError);
    expect((await jobs.cancel(first.jobId))?.status).toBe('cancelled');
    expect(jobs.create(spec()).status).toBe('queued');
  });

  it('forgets a finished job after the TTL, and keeps a live one however old', async () => {
    const jobs = registry({ ttlSeconds: 60 });
    const done = jobs.create(spec());
    await expect(finished(jobs, done.jobId)).resolves.toBe('succeeded');
    emulator.setFault({ provider: 'gpt', fault: 'slow', ms: 2_000 });
    const slow = jobs.create(spec());
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 59_000);
      expect((await jobs.get(done.jobId))?.status).toBe('succeeded');
      vi.setSystemTime(Date.now() + 2_000);
      expect(await jobs.get(done.jobId)).toBeUndefined();
      expect(await jobs.subscribe(done.jobId, () => undefined)).toBeUndefined();
      expect((await jobs.get(slow.jobId))?.status).toBe('running');
    } finally {
      vi.useRealTimers();
    }
  });

  it('interrupts (never cancels) every live job on stop', async () => {
    emulator.setFault({ provider: 'gpt', fault: 'slow', ms: 2_000 });
    const jobs = registry({ concurrency: 1 });
    const running = jobs.create(spec());
    const queued = jobs.create(spec());
    await Promise.resolve();
    const endings = Promise.all([finished(jobs, running.jobId), finished(jobs, queued.jobId)]);
    await jobs.stop();
    await expect(endings).resolves.toEqual(['interrupted', 'interrupted']);
    expect(() => jobs.create(spec())).toThrow(/stopped/);
  });

  it('streams the current progress first, then the job as it happens', async () => {
    const jobs = registry();
    const job = jobs.create(spec());
    const events: JobStreamEvent[] = [];
    await expect(finished(jobs, job.jobId, events)).resolves.toBe('succeeded');
    expect(events[0]).toEqual({ type: 'progress', data: { progress: 0, stage: 'queued' } });
    expect(events.filter((event) => event.type === 'attempt').length).toBe(3);
    expect(events.at(-2)).toEqual({ type: 'progress', data: { progress: 100, stage: 'done' } });
  });

  it('shares the results cache: a second job over the same document calls no provider', async () => {
    const cache = createResultCache();
    const jobs = registry({ cache });
    const same = spec();
    const first = jobs.create(same);
    await finished(jobs, first.jobId);
    const calls = emulator.stats().gpt.calls;
    const second = jobs.create(same);
    await expect(finished(jobs, second.jobId)).resolves.toBe('succeeded');
    expect(emulator.stats().gpt.calls).toBe(calls);
    const view = (await jobs.get(second.jobId)) as JobView;
    expect(view.meta?.stages.notes?.cached).toBe(true);
    expect(view.result).toEqual((await jobs.get(first.jobId))?.result);
  });
});

describe('interrupted jobs and their resume', () => {
  /** A long text: many parts under a 64-token budget, so the job is many provider steps. */
  function longSpec(tag: string): JobSpec {
    const sentences = Array.from(
      { length: 12 },
      (_, index) => `Section ${index + 1} (${tag}). Photosynthesis converts light energy into chemical energy stored in glucose; chlorophyll absorbs red and blue light.`,
    );
    return { ...spec(), text: sentences.join('\n\n'), cacheKey: `long-${tag}`, documentId: `long-${tag}` };
  }

  async function callsOf(run: () => Promise<unknown>): Promise<number> {
    const before = emulator.stats().gpt.calls;
    await run();
    return emulator.stats().gpt.calls - before;
  }

  it('a drained job reads interrupted; resumed in another registry on the same store, it asks no finished part again', async () => {
    const { createMemoryJobStatusStore } = await import('../../src/jobs/index.js');
    // The whole job uninterrupted, on a text of its own: how many provider steps it takes.
    const reference = registry({ budgetTokens: 64 });
    const referenceJob = reference.create(longSpec('reference'));
    const total = await callsOf(() => finished(reference, referenceJob.jobId));
    expect(total).toBeGreaterThan(6);

    const store = createMemoryJobStatusStore({ maxEntries: 10 });
    const first = registry({ budgetTokens: 64, store });
    const job = first.create(longSpec('interrupted'));
    const kept = 3;
    const beforeFirst = emulator.stats().gpt.calls;
    // Stopped once `kept` notes parts have reported done (each is stored before its progress is reported).
    await new Promise<void>((resolve) => {
      void first.subscribe(job.jobId, (event) => {
        if (event.type === 'progress' && event.data.stage === 'notes' && (event.data.part ?? 0) >= kept) resolve();
      });
    });
    await first.drain(0);
    const askedOfFirst = emulator.stats().gpt.calls - beforeFirst;
    const interrupted = await first.get(job.jobId);
    expect(interrupted).toMatchObject({ status: 'interrupted', resumable: true, error: { code: 'JOB_INTERRUPTED' } });

    const second = registry({ budgetTokens: 64, store });
    const record = await second.record(job.jobId);
    expect(record?.status).toBe('interrupted');
    const askedOfSecond = await callsOf(async () => {
      await expect(second.resume(record!, longSpec('interrupted'))).resolves.toMatchObject({ status: 'queued' });
      await expect(finished(second, job.jobId)).resolves.toBe('succeeded');
    });
    // At least `kept` steps were kept: the resume asks at most the rest of the job's steps.
    expect(askedOfSecond).toBeLessThanOrEqual(total - kept);
    expect(askedOfFirst).toBeGreaterThanOrEqual(kept);
    const done = await second.get(job.jobId);
    expect(done?.status).toBe('succeeded');
    // The first run's attempts stay in the record, before the resumer's.
    expect(done?.meta?.attempts.length).toBeGreaterThanOrEqual(askedOfSecond + kept);
    // A second resume of a job that is no longer interrupted is refused.
    await expect(second.resume(record!, longSpec('interrupted'))).rejects.toThrow(/not interrupted/);
  });
});

describe('a job followed through the store from another registry (another instance)', () => {
  it('its stream ends with done even when its record is gone for good (never left open without an end)', async () => {
    const { createMemoryJobStatusStore } = await import('../../src/jobs/index.js');
    const store = createMemoryJobStatusStore({ maxEntries: 10 });
    // A runs the job (each call 2 s: it stays running); B shares the store and only follows it.
    emulator.setFault({ provider: 'gpt', fault: 'slow', ms: 2000 });
    const a = registry({ store });
    const b = registry({ store, remotePollMs: 20 });
    const job = a.create(spec());
    const seen: JobStreamEvent[] = [];
    const ended = finished(b, job.jobId, seen);
    // The record vanishes (expired, or lost with a store that came back empty and nobody wrote it again).
    await new Promise((resolve) => setTimeout(resolve, 100));
    await store.delete(job.jobId);
    // The rule: the follower's last event is `done`; with no record left, the job is no longer run anywhere it can see.
    await expect(ended).resolves.toBe('interrupted');
    expect(seen[seen.length - 1]).toEqual({ type: 'done', data: { status: 'interrupted' } });
  });
});
