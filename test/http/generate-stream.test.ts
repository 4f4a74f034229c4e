/**
 * `POST /v1/generate` with `Accept: text/event-stream` (docs/api.md "Streaming") through the real service
 * and the provider emulator: items, attempts, exactly one terminal event carrying what the JSON API answers;
 * refusals before generation stay plain JSON; a client that goes away aborts its run, counted nowhere.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseSseBlock, type SseEvent } from '../jobs/support.js';
import { postJson, request, startHarness, studyText, type Harness } from './blackbox-support.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- event bodies are read loosely
type Json = any;

const keys = { 'x-claude-key': 'test-claude-key-0001-stream', 'x-gpt-key': 'test-gpt-key-0001-stream' } as const;

interface Posted {
  readonly status: number;
  readonly contentType: string | null;
  readonly events: Promise<SseEvent[]>;
  readonly text: Promise<string>;
  /** Resolves once an event named `name` arrived. */
  waitFor(name: string): Promise<void>;
  close(): void;
}

/** POST with `accept: text/event-stream`, read with the same small parser as the job streams. */
async function postStream(url: string, body: unknown, headers: Record<string, string> = keys): Promise<Posted> {
  const controller = new AbortController();
  const response = await fetch(`${url}/v1/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  const received: SseEvent[] = [];
  const waiters: { name: string; resolve: () => void }[] = [];
  let all = '';
  const done = (async () => {
    if (response.body === null) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      const reader = response.body.getReader();
      for (;;) {
        const { done: finished, value } = await reader.read();
        if (finished) break;
        const text = decoder.decode(value, { stream: true });
        all += text;
        buffer += text;
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const parsed = parseSseBlock(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (parsed === undefined) continue;
          received.push(parsed);
          for (const waiter of waiters.filter((candidate) => candidate.name === parsed.event)) waiter.resolve();
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    }
  })();
  return {
    status: response.status,
    contentType: response.headers.get('content-type'),
    events: done.then(() => received),
    text: done.then(() => all),
    waitFor: (name) => (received.some((event) => event.event === name) ? Promise.resolve() : new Promise((resolve) => waiters.push({ name, resolve }))),
    close: () => controller.abort(),
  };
}

const data = (event: SseEvent): Json => JSON.parse(event.data);

/** The result's elements in result order, written out from the `done` body. */
function elementsOf(task: string, result: Json): { task: string; kind: string; value: unknown }[] {
  if (task === 'notes') {
    return [
      ...result.keyConcepts.map((value: unknown) => ({ task, kind: 'keyConcept', value })),
      ...result.sections.map((value: unknown) => ({ task, kind: 'section', value })),
      ...result.glossary.map((value: unknown) => ({ task, kind: 'glossaryEntry', value })),
    ];
  }
  return result.questions.map((value: unknown) => ({ task, kind: 'question', value }));
}

/** Items after the last reset: what the client holds at the end. */
function heldItems(events: readonly SseEvent[]): unknown[] {
  const names = events.map((event) => event.event);
  return events.slice(names.lastIndexOf('reset') + 1).filter((event) => event.event === 'item').map(data);
}

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ RETRY_MAX: '0', PROVIDER_TIMEOUT_MS: '5000' });
});
afterAll(async () => {
  await harness.close();
});
beforeEach(async () => {
  await harness.reset();
});

describe('POST /v1/generate as an event stream', () => {
  it.each(['notes', 'mcq', 'fill'] as const)('%s: items before one done; the items are the result; done is the JSON body', async (task) => {
    const stream = await postStream(harness.url, { task, text: studyText, options: { lang: 'en', count: 3 } });
    expect(stream.status).toBe(200);
    expect(stream.contentType).toBe('text/event-stream; charset=utf-8');
    const events = await stream.events;
    const names = events.map((event) => event.event);
    expect(names.filter((name) => name === 'done')).toHaveLength(1);
    expect(names.at(-1)).toBe('done');
    expect(names.filter((name) => name === 'error')).toHaveLength(0);
    const done = data(events.at(-1) as SseEvent);
    expect(done.task).toBe(task);
    expect(done.meta.provider).toBe('claude');
    // Each attempt is sent as it ends, and the done body's meta.attempts is those.
    expect(events.filter((event) => event.event === 'attempt').map(data)).toEqual(done.meta.attempts);
    expect(heldItems(events)).toEqual(elementsOf(task, done.result));
    expect(names.indexOf('item')).toBeLessThan(names.indexOf('done'));
  });

  it('a fallback: the failed attempt, then the next provider\'s items and done with fallback true', async () => {
    harness.fault({ provider: 'claude', fault: 'http500', count: 1 });
    const stream = await postStream(harness.url, { task: 'notes', text: studyText, options: { lang: 'en' } });
    const events = await stream.events;
    const attempts = events.filter((event) => event.event === 'attempt').map(data);
    expect(attempts.map((attempt) => [attempt.provider, attempt.outcome])).toEqual([
      ['claude', 'failed'],
      ['gpt', 'succeeded'],
    ]);
    const done = data(events.at(-1) as SseEvent);
    expect(done.meta).toMatchObject({ provider: 'gpt', fallback: true });
    expect(heldItems(events)).toEqual(elementsOf('notes', done.result));
  });

  it('every provider failing after the stream began: one error event with the status and body the JSON API answers', async () => {
    harness.fault({ provider: 'claude', fault: 'http500' });
    harness.fault({ provider: 'gpt', fault: 'http500' });
    const body = { task: 'notes', text: studyText, options: { lang: 'en' } };
    const stream = await postStream(harness.url, body);
    expect(stream.status).toBe(200);
    const events = await stream.events;
    expect(events.map((event) => event.event).filter((name) => name === 'done' || name === 'error')).toEqual(['error']);
    const streamed = data(events.at(-1) as SseEvent);
    await harness.reset();
    harness.fault({ provider: 'claude', fault: 'http500' });
    harness.fault({ provider: 'gpt', fault: 'http500' });
    const json = await postJson(`${harness.url}/v1/generate`, body, keys);
    expect(streamed.status).toBe(json.status);
    expect(Object.keys(streamed)).toEqual(['status', 'error']);
    expect(streamed.error.code).toBe(json.body.error.code);
    expect(streamed.error.attempts.map((attempt: Json) => [attempt.provider, attempt.errorClass])).toEqual(
      json.body.error.attempts.map((attempt: Json) => [attempt.provider, attempt.errorClass]),
    );
  });

  it('refusals before generation stay plain JSON errors', async () => {
    const noKey = await fetch(`${harness.url}/v1/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ task: 'notes', text: studyText }),
    });
    expect(noKey.status).toBe(400);
    expect(noKey.headers.get('content-type')).toMatch(/application\/json/);
    expect(((await noKey.json()) as Json).error.code).toBe('NO_PROVIDER_KEY');
    const badBody = await postStream(harness.url, { task: 'essay', text: studyText });
    expect(badBody.status).toBe(400);
    expect(badBody.contentType).toMatch(/application\/json/);
    const unknownDocument = await postStream(harness.url, { task: 'notes', documentId: 'no-such-document' });
    expect(unknownDocument.status).toBe(404);
    expect(JSON.parse(await unknownDocument.text).error.code).toBe('DOCUMENT_NOT_FOUND');
  });

  it('a client that goes away mid-generation aborts the run, and nothing counts toward a breaker', async () => {
    harness.fault({ provider: 'claude', fault: 'slow', ms: 3000 });
    const claude = async (): Promise<Json> => ((await request(`${harness.url}/v1/providers`)).body.providers as Json[]).find((provider) => provider.id === 'claude');
    const before = await claude();
    const stream = await postStream(harness.url, { task: 'notes', text: studyText, options: { lang: 'en' } });
    expect(stream.status).toBe(200); // committed as generation started
    stream.close();
    // The aborted attempt is recorded and never counted: the breaker and its stats stay as they were.
    for (let tries = 0; tries < 100; tries += 1) {
      const logs = harness.logs.join('\n');
      if (logs.includes('client went away: generation aborted')) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(harness.logs.join('\n')).toContain('client went away: generation aborted');
    const after = await claude();
    expect(after.breaker.consecutiveFailures).toBe(0);
    expect(after.stats.failures).toBe(before.stats.failures);
    expect(harness.emulator.stats().claude.calls).toBeGreaterThan(0);
  });

  it('a stream cut mid-answer: the fallback continues it (continuation: true), the items stand, the answer is the whole one', async () => {
    const body = { task: 'notes', text: studyText, options: { lang: 'en' } };
    // The emulator's answer is deterministic: the uncut answer is the oracle for the continued one.
    const whole = await postJson(`${harness.url}/v1/generate`, body, keys);
    expect(whole.status).toBe(200);
    await harness.reset();
    // 60 chunks of 4 characters: past the first key concept, well before the end.
    harness.fault({ provider: 'claude', fault: 'cut', after: 60, count: 1 });
    const stream = await postStream(harness.url, body);
    const events = await stream.events;
    const names = events.map((event) => event.event);
    const attempts = events.filter((event) => event.event === 'attempt').map(data);
    expect(attempts.map((attempt) => [attempt.provider, attempt.outcome, attempt.errorClass ?? null, attempt.continuation ?? false])).toEqual([
      ['claude', 'failed', 'connection', false],
      ['gpt', 'succeeded', null, true],
    ]);
    expect(attempts[0].streamed.chunks).toBeGreaterThan(0);
    const done = data(events.at(-1) as SseEvent);
    expect(done.meta.attempts).toEqual(attempts);
    expect(done.result).toEqual(whole.body.result);
    // Nothing was voided: items sent before the cut are the first of the result's elements.
    expect(names).not.toContain('reset');
    const firstAttempt = names.indexOf('attempt');
    expect(names.slice(0, firstAttempt)).toContain('item');
    expect(heldItems(events)).toEqual(elementsOf('notes', done.result));

    // The JSON API goes through the same machines: the same story in meta.attempts.
    await harness.reset();
    harness.fault({ provider: 'claude', fault: 'cut', after: 60, count: 1 });
    const json = await postJson(`${harness.url}/v1/generate`, body, keys);
    expect(json.status).toBe(200);
    expect(json.body.result).toEqual(whole.body.result);
    expect(json.body.meta.attempts.map((attempt: Json) => [attempt.provider, attempt.continuation ?? false])).toEqual([
      ['claude', false],
      ['gpt', true],
    ]);
  });

  it('a stream cut before any element is complete: a reset, then the fallback writes the whole answer', async () => {
    harness.fault({ provider: 'claude', fault: 'cut', after: 3, count: 1 });
    const stream = await postStream(harness.url, { task: 'notes', text: studyText, options: { lang: 'en' } });
    const events = await stream.events;
    const names = events.map((event) => event.event);
    const attempts = events.filter((event) => event.event === 'attempt').map(data);
    expect(attempts.map((attempt) => [attempt.provider, attempt.outcome, attempt.continuation ?? false])).toEqual([
      ['claude', 'failed', false],
      ['gpt', 'succeeded', false],
    ]);
    // The reset comes after the failed attempt and before anything of the next answer.
    expect(names.filter((name) => name === 'reset')).toHaveLength(1);
    expect(names.indexOf('reset')).toBeGreaterThan(names.indexOf('attempt'));
    expect(names.slice(0, names.indexOf('reset'))).not.toContain('item');
    expect(data(events[names.indexOf('reset')] as SseEvent)).toEqual({ provider: 'claude', reason: 'claude failed (connection); the next answer starts over' });
    const done = data(events.at(-1) as SseEvent);
    expect(heldItems(events)).toEqual(elementsOf('notes', done.result));
  });
});

/**
 * The mid-stream faults the issue names, each answered by the fallback continuing the cut answer (docs/api.md
 * "Streaming"): a stall caught by STREAM_IDLE_TIMEOUT_MS (not the call's deadline), and an in-band quota error
 * on the first provider — its key quarantined, its breaker untouched (a user-side class never counts).
 */
describe('mid-stream faults answered by the fallback, continuing the answer', () => {
  let faults: Harness;
  const body = (providers: string[]) => ({ task: 'notes', text: studyText, providers, options: { lang: 'en' } });
  beforeAll(async () => {
    faults = await startHarness({ RETRY_MAX: '0', PROVIDER_TIMEOUT_MS: '20000', STREAM_IDLE_TIMEOUT_MS: '700' });
  });
  afterAll(async () => {
    await faults.close();
  });

  it('a stall after 60 chunks: caught by the idle clock, continued by the fallback, the answer whole', async () => {
    const whole = await postJson(`${faults.url}/v1/generate`, body(['claude', 'gpt']), keys);
    faults.fault({ provider: 'claude', fault: 'stall', after: 60, count: 1 });
    const stalled = await postJson(`${faults.url}/v1/generate`, body(['claude', 'gpt']), keys);
    expect(stalled.status).toBe(200);
    const [first, second] = stalled.body.meta.attempts as Json[];
    // The idle clock's message, not the deadline's ("did not answer within 20000 ms").
    expect(first).toMatchObject({ provider: 'claude', outcome: 'failed', errorClass: 'timeout', countedByBreaker: true, message: "The provider's answer stalled for 700 ms." });
    expect(first.streamed.chunks).toBeGreaterThan(0);
    expect(second).toMatchObject({ provider: 'gpt', outcome: 'succeeded', continuation: true });
    expect(stalled.body.result).toEqual(whole.body.result);
  });

  it("an in-band quota error from GPT mid-answer: Claude continues it; GPT's key quarantined, its breaker untouched", async () => {
    await faults.reset();
    const whole = await postJson(`${faults.url}/v1/generate`, body(['gpt', 'claude']), keys);
    faults.fault({ provider: 'gpt', fault: 'streamError', error: 'quota', after: 60, count: 1 });
    const cut = await postJson(`${faults.url}/v1/generate`, body(['gpt', 'claude']), keys);
    expect(cut.status).toBe(200);
    expect(cut.body.meta.attempts.map((attempt: Json) => [attempt.provider, attempt.outcome, attempt.errorClass ?? null, attempt.countedByBreaker, attempt.continuation ?? false])).toEqual([
      ['gpt', 'failed', 'quota_exhausted', false, false],
      ['claude', 'succeeded', null, false, true],
    ]);
    expect(cut.body.result).toEqual(whole.body.result);
    const status = await request(`${faults.url}/v1/keys/status`, { headers: { 'x-gpt-key': keys['x-gpt-key'] } });
    expect(status.body.providers).toEqual([expect.objectContaining({ provider: 'gpt', state: 'quarantined', errorClass: 'quota_exhausted' })]);
    const gpt = ((await request(`${faults.url}/v1/providers`)).body.providers as Json[]).find((provider) => provider.id === 'gpt');
    expect(gpt.breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    expect(gpt.stats.failures).toBe(0);
  });
});
