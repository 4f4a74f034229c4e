/**
 * `/v1/jobs` end to end: the real service and the provider emulator on loopback, PDFs uploaded through
 * `POST /v1/documents`, progress read over SSE with fetch.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { validateStudyValue } from '../../src/study/index.js';
import type { NotesResult } from '../../src/study/index.js';
import { englishTextPdf, koreanTextPdf } from '../fixtures/pdf/generate.js';
import {
  dataOf,
  keys,
  openEvents,
  pollJob,
  postJson,
  request,
  startJobsHarness,
  uploadPdf,
} from './support.js';
import type { Harness, SseEvent } from './support.js';

let harness: Harness;
let englishDocument: { documentId: string; sha256: string; pageCount: number; pagesUsed: number };

beforeAll(async () => {
  harness = await startJobsHarness();
  englishDocument = await uploadPdf(harness, await englishTextPdf(60), 'biology-60.pdf');
});

afterAll(async () => {
  await harness.close();
});

beforeEach(async () => {
  await harness.reset();
});

interface Progress {
  progress: number;
  stage: string;
  part?: number;
  parts?: number;
}

async function startJob(body: unknown, headers: Record<string, string> = keys): Promise<string> {
  const result = await postJson(`${harness.url}/v1/jobs`, body, headers);
  expect(result.status, result.text).toBe(202);
  expect(result.body).toEqual({ jobId: expect.any(String), status: 'queued' });
  return result.body.jobId as string;
}

function eventsUrl(jobId: string): string {
  return `${harness.url}/v1/jobs/${jobId}/events`;
}

function expectNoKeys(text: string): void {
  for (const key of Object.values(keys)) {
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(0, 12));
  }
}

function progressOf(events: readonly SseEvent[]): Progress[] {
  return events.filter((event) => event.event === 'progress').map((event) => dataOf<Progress>(event));
}

function expectQualityResult(
  result: { notes: unknown; mcq: unknown; fill: unknown },
  counts: { mcq: number; fill: number },
): NotesResult {
  const notes = validateStudyValue('notes', result.notes);
  expect(notes.ok, JSON.stringify(notes)).toBe(true);
  if (!notes.ok) throw new Error('notes invalid');
  const conceptIds = notes.value.keyConcepts.map((concept) => concept.id);
  const mcq = validateStudyValue('mcq', result.mcq, { count: counts.mcq, conceptIds });
  expect(mcq.ok, JSON.stringify(mcq)).toBe(true);
  const fill = validateStudyValue('fill', result.fill, { count: counts.fill, conceptIds });
  expect(fill.ok, JSON.stringify(fill)).toBe(true);
  return notes.value;
}

describe('a job over a 60-page PDF', () => {
  it.each([
    ['en', () => englishTextPdf(60), /[A-Za-z]/],
    ['ko', () => koreanTextPdf(60), /[\uac00-\ud7a3]/],
  ] as const)(
    'goes through notes, mcq and fill in parts with monotonic progress to 100 over SSE (%s)',
    async (lang, makePdf, script) => {
      const document =
        lang === 'en' ? englishDocument : await uploadPdf(harness, await makePdf(), 'ko-60.pdf');
      expect(document.pageCount).toBe(60);
      expect(document.pagesUsed).toBe(60);
      // Six questions of each kind, spread over the document's parts: the emulator varies its questions
      // per part, so the quality checks (no near-duplicates) hold across parts.
      const jobId = await startJob({
        documentId: document.documentId,
        providers: ['claude', 'gpt'],
        options: { lang, mcqCount: 6, fillCount: 6 },
      });
      const stream = await openEvents(eventsUrl(jobId));
      expect(stream.status).toBe(200);
      expect(stream.contentType).toContain('text/event-stream');
      const events = await stream.events;

      const done = events.filter((event) => event.event === 'done');
      expect(done).toHaveLength(1);
      expect(events.at(-1)?.event).toBe('done');
      expect(dataOf(done[0] as SseEvent)).toEqual({ status: 'succeeded' });

      const progress = progressOf(events);
      const values = progress.map((item) => item.progress);
      for (let index = 1; index < values.length; index += 1)
        expect(values[index]).toBeGreaterThanOrEqual(values[index - 1] ?? 0);
      expect(values.at(-1)).toBe(100);
      expect(values.every((value) => value >= 0 && value <= 100)).toBe(true);
      // The document is over the part budget: notes and questions were made in parts.
      const notesParts = progress.filter((item) => item.stage === 'notes' && item.parts !== undefined);
      expect(Math.max(...notesParts.map((item) => item.parts ?? 0))).toBeGreaterThan(2);
      expect(new Set(progress.map((item) => item.stage))).toEqual(new Set(['notes', 'mcq', 'fill', 'done']));

      const attempts = events
        .filter((event) => event.event === 'attempt')
        .map((event) => dataOf<{ task: string; outcome: string; provider: string }>(event));
      expect(new Set(attempts.map((attempt) => attempt.task))).toEqual(new Set(['notes', 'mcq', 'fill']));
      expect(
        attempts.every((attempt) => attempt.outcome === 'succeeded' && attempt.provider === 'claude'),
      ).toBe(true);
      // The questions were spread over several parts (one call per part that asks for some).
      expect(attempts.filter((attempt) => attempt.task === 'mcq').length).toBeGreaterThan(1);
      expect(attempts.filter((attempt) => attempt.task === 'fill').length).toBeGreaterThan(1);
      // mcq and fill are grounded on the job's notes: no notes call after the notes stage.
      const firstQuestion = attempts.findIndex((attempt) => attempt.task !== 'notes');
      expect(attempts.slice(firstQuestion).every((attempt) => attempt.task !== 'notes')).toBe(true);

      const job = await request(`${harness.url}/v1/jobs/${jobId}`);
      expect(job.status).toBe(200);
      expect(job.body).toMatchObject({ jobId, status: 'succeeded', progress: 100, stage: 'done' });
      const notes = expectQualityResult(job.body.result, { mcq: 6, fill: 6 });
      expect(notes.keyConcepts.map((concept) => concept.term).join(' ')).toMatch(script);
      for (const stage of ['notes', 'mcq', 'fill']) {
        expect(job.body.meta.stages[stage]).toMatchObject({
          provider: 'claude',
          model: expect.any(String),
          fallback: false,
          cached: false,
        });
        expect(job.body.meta.stages[stage].attempts.length).toBeGreaterThan(0);
        expect(typeof job.body.meta.stages[stage].usage.inputTokens).toBe('number');
      }
      expect(job.body.meta.attempts).toHaveLength(attempts.length);
      // Each stage's items (after its last reset) are exactly its result's elements, in order.
      for (const stage of ['notes', 'mcq', 'fill']) {
        const stageEvents = events.filter((event) => (event.event === 'item' || event.event === 'reset') && dataOf<{ task: string }>(event).task === stage);
        const lastReset = stageEvents.map((event) => event.event).lastIndexOf('reset');
        const items = stageEvents.slice(lastReset + 1).map((event) => dataOf<{ kind: string; value: unknown }>(event));
        const result = job.body.result[stage];
        const expected =
          stage === 'notes'
            ? [
                ...result.keyConcepts.map((value: unknown) => ({ kind: 'keyConcept', value })),
                ...result.sections.map((value: unknown) => ({ kind: 'section', value })),
                ...result.glossary.map((value: unknown) => ({ kind: 'glossaryEntry', value })),
              ]
            : result.questions.map((value: unknown) => ({ kind: 'question', value }));
        expect(items.map(({ kind, value }) => ({ kind, value }))).toEqual(expected);
      }

      expectNoKeys(stream.raw());
      expectNoKeys(job.text);
    },
  );
});

describe('the results cache', () => {
  it('serves a second identical job without a provider call', async () => {
    const document = await uploadPdf(harness, await englishTextPdf(12), 'cache-12.pdf');
    const body = {
      documentId: document.documentId,
      providers: ['gpt'],
      options: { lang: 'en', mcqCount: 2, fillCount: 2 },
    };
    const first = await startJob(body);
    expect(
      (await pollJob(harness, first, (job) => job.status !== 'queued' && job.status !== 'running')).body
        .status,
    ).toBe('succeeded');
    const before = harness.emulator.stats();
    expect(before.gpt.calls).toBeGreaterThan(0);

    const second = await startJob(body);
    const stream = await openEvents(eventsUrl(second));
    const events = await stream.events;
    expect(dataOf(events.at(-1) as SseEvent)).toEqual({ status: 'succeeded' });
    expect(events.filter((event) => event.event === 'attempt')).toEqual([]);
    expect(harness.emulator.stats()).toEqual(before);

    const job = await request(`${harness.url}/v1/jobs/${second}`);
    expect(job.body.status).toBe('succeeded');
    for (const stage of ['notes', 'mcq', 'fill'])
      expect(job.body.meta.stages[stage]).toMatchObject({ cached: true, attempts: [] });
    expectQualityResult(job.body.result, { mcq: 2, fill: 2 });
    const firstJob = await request(`${harness.url}/v1/jobs/${first}`);
    expect(job.body.result).toEqual(firstJob.body.result);
  });

  it('never serves a result paid with one key to a request without that key', async () => {
    const pdf = await englishTextPdf(4);
    const body = (documentId: string) => ({ documentId, providers: ['claude'], options: { lang: 'en', mcqCount: 1, fillCount: 1 } });
    // User A, with a working Claude key: the job succeeds and its results are cached.
    const documentA = await uploadPdf(harness, pdf, 'shared-a.pdf');
    const jobA = await startJob(body(documentA.documentId), { 'x-claude-key': keys['x-claude-key'] });
    expect((await pollJob(harness, jobA, (job) => job.status !== 'queued' && job.status !== 'running')).body.status).toBe('succeeded');

    // User B uploads the same bytes (same sha256) with only a key the provider refuses.
    const documentB = await uploadPdf(harness, pdf, 'shared-b.pdf');
    expect(documentB.sha256).toBe(documentA.sha256);
    const refusedKey = { 'x-claude-key': 'emu-bad-someone-else-0003' };
    const jobB = await startJob(body(documentB.documentId), refusedKey);
    const viewB = await pollJob(harness, jobB, (job) => job.status !== 'queued' && job.status !== 'running');
    // B's job fails as its key dictates: no material of A's, an attempt that really called Claude.
    expect(viewB.body).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_AUTH_FAILED' } });
    expect(viewB.body.result).toBeUndefined();
    expect(viewB.body.meta?.stages ?? {}).not.toHaveProperty('notes');
    expect(viewB.body.error.attempts[0]).toMatchObject({ provider: 'claude', errorClass: 'auth' });
    // Nor through POST /v1/generate on the same document.
    const generated = await postJson(`${harness.url}/v1/generate`, { task: 'notes', documentId: documentB.documentId, providers: ['claude'], options: { lang: 'en' } }, refusedKey);
    expect([generated.status, generated.body.error?.code]).toEqual([401, 'PROVIDER_AUTH_FAILED']);

    // A again, with the key that paid: served from the cache.
    const againA = await startJob(body(documentB.documentId), { 'x-claude-key': keys['x-claude-key'] });
    const viewA = await pollJob(harness, againA, (job) => job.status !== 'queued' && job.status !== 'running');
    expect(viewA.body.meta.stages.notes).toMatchObject({ cached: true });
  });

  it('pays again for other options', async () => {
    const document = await uploadPdf(harness, await englishTextPdf(3), 'cache-3.pdf');
    const first = await startJob({
      documentId: document.documentId,
      providers: ['gpt'],
      options: { lang: 'en', mcqCount: 2, fillCount: 2 },
    });
    await pollJob(harness, first, (job) => job.status === 'succeeded');
    const before = harness.emulator.stats().gpt.calls;
    const second = await startJob({
      documentId: document.documentId,
      providers: ['gpt'],
      options: { lang: 'en', mcqCount: 3, fillCount: 2 },
    });
    const job = await pollJob(harness, second, (body) => body.status === 'succeeded');
    // Notes and fill come from the cache; only mcq (another count) is asked for.
    expect(harness.emulator.stats().gpt.calls).toBe(before + 1);
    expect(job.body.meta.stages).toMatchObject({
      notes: { cached: true },
      mcq: { cached: false },
      fill: { cached: true },
    });
  });
});

async function claudeIgnored(): Promise<number> {
  const providers = await request(`${harness.url}/v1/providers`);
  return (
    (providers.body.providers as { id: string; stats: { ignored: number } }[]).find(
      (provider) => provider.id === 'claude',
    )?.stats.ignored ?? -1
  );
}

describe('cancelling a job', () => {
  it('aborts the calls in flight, ends cancelled, and leaves every breaker untouched', async () => {
    // A document no other test in this file runs a job on: a cached notes stage would make no call to cancel.
    const document = await uploadPdf(harness, await englishTextPdf(7), 'cancel-7.pdf');
    harness.fault({ provider: 'claude', fault: 'slow', ms: 2000 });
    const callsBefore = harness.emulator.stats().claude.calls;
    const ignoredBefore = await claudeIgnored();
    const jobId = await startJob({
      documentId: document.documentId,
      providers: ['claude'],
      options: { lang: 'en', mcqCount: 2, fillCount: 2 },
    });
    const stream = await openEvents(eventsUrl(jobId));
    await stream.waitFor((event) => event.event === 'progress' && dataOf<Progress>(event).stage === 'notes');
    // A call is in flight at the emulator (it answers only after 2 s).
    for (;;) {
      if (harness.emulator.stats().claude.calls > callsBefore) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }

    const cancelled = await request(`${harness.url}/v1/jobs/${jobId}`, { method: 'DELETE' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ jobId, status: 'cancelled', stage: 'notes' });
    expect(cancelled.body.result).toBeUndefined();
    const events = await stream.events;
    expect(dataOf(events.at(-1) as SseEvent)).toEqual({ status: 'cancelled' });
    expect(events.filter((event) => event.event === 'done')).toHaveLength(1);

    // Another job through the same provider afterwards: by its end the aborted call has long been settled.
    harness.emulator.resetFaults();
    const next = await startJob({
      documentId: englishDocument.documentId,
      providers: ['claude'],
      options: { lang: 'en', mcqCount: 1, fillCount: 1 },
    });
    expect(
      (await pollJob(harness, next, (job) => job.status !== 'queued' && job.status !== 'running')).body
        .status,
    ).toBe('succeeded');
    const providers = await request(`${harness.url}/v1/providers`);
    for (const provider of providers.body.providers as {
      id: string;
      breaker: { state: string; consecutiveFailures: number };
      stats: { failures: number };
    }[]) {
      expect(provider.breaker, provider.id).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
      expect(provider.stats.failures, provider.id).toBe(0);
    }
    // The aborted call reached the provider actor as a cancel: recorded as ignored, nothing else.
    expect(await claudeIgnored()).toBeGreaterThan(ignoredBefore);
    // The cancelled job stays cancelled, and a second cancel changes nothing.
    const again = await request(`${harness.url}/v1/jobs/${jobId}`, { method: 'DELETE' });
    expect(again.status).toBe(200);
    expect(again.body.status).toBe('cancelled');
  });
});

describe('the event stream', () => {
  it('gives a client that connects after the end the progress and done at once', async () => {
    const document = await uploadPdf(harness, await englishTextPdf(2), 'late-2.pdf');
    const jobId = await startJob({
      documentId: document.documentId,
      providers: ['claude'],
      options: { lang: 'en', mcqCount: 1, fillCount: 1 },
    });
    await pollJob(harness, jobId, (job) => job.status === 'succeeded');
    const stream = await openEvents(eventsUrl(jobId));
    const events = await stream.events;
    expect(events.map((event) => event.event)).toEqual(['progress', 'done']);
    expect(dataOf(events[0] as SseEvent)).toEqual({ progress: 100, stage: 'done' });
    expect(dataOf(events[1] as SseEvent)).toEqual({ status: 'succeeded' });
  });

  it('answers 404 JOB_NOT_FOUND for an unknown job', async () => {
    const response = await fetch(eventsUrl('no-such-job'));
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('JOB_NOT_FOUND');
  });
});

describe('a job every provider fails', () => {
  it('ends failed with the contract error body and what is known in meta, without the key', async () => {
    const badKey = 'emu-bad-test-claude-key-0002';
    // A document of its own: a cached result would be served whatever the key.
    const document = await uploadPdf(harness, await englishTextPdf(5), 'failing-5.pdf');
    const jobId = await startJob(
      {
        documentId: document.documentId,
        providers: ['claude'],
        options: { lang: 'en', mcqCount: 1, fillCount: 1 },
      },
      { 'x-claude-key': badKey },
    );
    const stream = await openEvents(eventsUrl(jobId));
    const events = await stream.events;
    expect(dataOf(events.at(-1) as SseEvent)).toEqual({ status: 'failed' });
    const job = await request(`${harness.url}/v1/jobs/${jobId}`);
    expect(job.body).toMatchObject({
      status: 'failed',
      stage: 'notes',
      error: { code: 'PROVIDER_AUTH_FAILED', message: expect.any(String) },
    });
    expect(job.body.error.attempts.length).toBeGreaterThan(0);
    expect(job.body.error.attempts[0]).toMatchObject({
      provider: 'claude',
      outcome: 'failed',
      errorClass: 'auth',
      countedByBreaker: false,
      task: 'notes',
    });
    expect(job.body.meta).toMatchObject({ failedStage: 'notes', stages: {} });
    expect(job.body.result).toBeUndefined();
    for (const text of [job.text, stream.raw()]) {
      expect(text).not.toContain(badKey);
      expect(text).not.toContain(badKey.slice(-12));
    }
  });
});

describe('job expiry', () => {
  it('forgets a finished job after JOB_TTL_SECONDS (default 3600)', async () => {
    const jobId = await startJob({
      documentId: englishDocument.documentId,
      providers: ['claude'],
      options: { lang: 'en', mcqCount: 1, fillCount: 1 },
    });
    await pollJob(harness, jobId, (job) => job.status === 'succeeded');
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 3_599_000);
      expect((await request(`${harness.url}/v1/jobs/${jobId}`)).status).toBe(200);
      vi.setSystemTime(Date.now() + 2_000);
      const gone = await request(`${harness.url}/v1/jobs/${jobId}`);
      expect(gone.status).toBe(404);
      expect(gone.body.error.code).toBe('JOB_NOT_FOUND');
      expect((await request(`${harness.url}/v1/jobs/${jobId}`, { method: 'DELETE' })).status).toBe(404);
      expect((await fetch(eventsUrl(jobId))).status).toBe(404);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('POST /v1/jobs refuses', () => {
  it('an unknown document with 404 DOCUMENT_NOT_FOUND', async () => {
    const result = await postJson(`${harness.url}/v1/jobs`, { documentId: 'missing-doc' }, keys);
    expect(result.status).toBe(404);
    expect(result.body.error.code).toBe('DOCUMENT_NOT_FOUND');
  });

  it('a request without a key for any requested provider with 400 NO_PROVIDER_KEY', async () => {
    const result = await postJson(
      `${harness.url}/v1/jobs`,
      { documentId: englishDocument.documentId, providers: ['timelygpt'] },
      keys,
    );
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe('NO_PROVIDER_KEY');
  });

  it.each([
    ['an extra field', { documentId: 'd', extra: 1 }],
    ['an extra option', { documentId: 'd', options: { count: 3 } }],
    ['a count of 0', { documentId: 'd', options: { mcqCount: 0 } }],
    ['an unknown language', { documentId: 'd', options: { lang: 'fr' } }],
    ['no documentId', { options: { lang: 'en' } }],
  ])('%s with 400 INVALID_REQUEST', async (_name, body) => {
    const result = await postJson(`${harness.url}/v1/jobs`, body, keys);
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe('INVALID_REQUEST');
  });

  it('answers GET and DELETE of an unknown job with 404 JOB_NOT_FOUND', async () => {
    for (const method of ['GET', 'DELETE']) {
      const result = await request(`${harness.url}/v1/jobs/no-such-job`, { method });
      expect(result.status).toBe(404);
      expect(result.body.error.code).toBe('JOB_NOT_FOUND');
    }
  });
});
