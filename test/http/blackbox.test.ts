/**
 * Every row of docs/api.md against the real service and the provider emulator, both on loopback.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { adminToken, postJson, request, startHarness, studyText, textPdf } from './blackbox-support.js';
import type { Harness, HttpResult } from './blackbox-support.js';

let harness: Harness;

beforeAll(async () => {
  // One emulator key opens the breakers here: the quorum of distinct keys is off (the old rule).
  harness = await startHarness({ BREAKER_MIN_DISTINCT_KEYS: '1' });
});

afterAll(async () => {
  await harness.close();
});

beforeEach(async () => {
  await harness.reset();
});

const keys = {
  claude: { 'x-claude-key': 'test-claude-key-0001' },
  gpt: { 'x-gpt-key': 'test-gpt-key-0001' },
  timelygpt: { 'x-timelygpt-key': 'test-timelygpt-key-0001' },
};
const allKeys = { ...keys.claude, ...keys.gpt, ...keys.timelygpt };

function generate(body: unknown, headers: Record<string, string>, signal?: AbortSignal): Promise<HttpResult> {
  return postJson(`${harness.url}/v1/generate`, body, headers, signal);
}

interface AttemptBody {
  provider: string;
  outcome: string;
  errorClass?: string;
  countedByBreaker: boolean;
  retry: number;
  reason?: string;
  task?: string;
  durationMs: number;
  model: string;
}

function expectError(result: HttpResult, status: number, code: string): void {
  expect(result.status, result.text).toBe(status);
  expect(result.body?.error?.code, result.text).toBe(code);
  expect(typeof result.body?.error?.message).toBe('string');
}

async function providers(): Promise<Record<string, { breaker: { state: string; consecutiveFailures: number; retryAt: string | null }; stats: Record<string, number> }>> {
  const result = await request(`${harness.url}/v1/providers`);
  expect(result.status).toBe(200);
  return Object.fromEntries((result.body.providers as { id: string }[]).map((p) => [p.id, p])) as never;
}

describe('POST /v1/generate succeeds', () => {
  it('answers notes from the first provider with meta', async () => {
    const result = await generate({ task: 'notes', text: studyText, options: { lang: 'en' } }, allKeys);
    expect(result.status, result.text).toBe(200);
    expect(result.body.task).toBe('notes');
    expect(result.body.result.keyConcepts.length).toBeGreaterThan(0);
    expect(Array.isArray(result.body.result.sections)).toBe(true);
    expect(Array.isArray(result.body.result.glossary)).toBe(true);
    expect(result.body.meta).toMatchObject({ provider: 'claude', fallback: false });
    expect(typeof result.body.meta.model).toBe('string');
    expect(result.body.meta.attempts).toHaveLength(1);
    expect(result.body.meta.attempts[0]).toMatchObject({ provider: 'claude', outcome: 'succeeded', countedByBreaker: false, retry: 0, task: 'notes' });
    expect(typeof result.body.meta.usage.inputTokens).toBe('number');
    expect(typeof result.body.meta.usage.outputTokens).toBe('number');
  });

  it('generates notes first for mcq without notes, and at most count questions', async () => {
    const result = await generate({ task: 'mcq', text: studyText, options: { lang: 'en', count: 3 } }, keys.gpt);
    expect(result.status, result.text).toBe(200);
    const tasks = (result.body.meta.attempts as AttemptBody[]).map((a) => a.task);
    expect(tasks).toEqual(['notes', 'mcq']);
    expect(result.body.result.questions.length).toBeGreaterThan(0);
    expect(result.body.result.questions.length).toBeLessThanOrEqual(3);
    for (const question of result.body.result.questions) {
      expect(Object.keys(question.options).sort()).toEqual(['A', 'B', 'C', 'D']);
      expect(['A', 'B', 'C', 'D']).toContain(question.answer);
    }
  });

  it('grounds fill on the given notes without generating notes again', async () => {
    const notes = await generate({ task: 'notes', text: studyText, options: { lang: 'en' } }, keys.claude);
    expect(notes.status).toBe(200);
    const fill = await generate({ task: 'fill', text: studyText, options: { lang: 'en', count: 2, notes: notes.body.result } }, keys.claude);
    expect(fill.status, fill.text).toBe(200);
    expect((fill.body.meta.attempts as AttemptBody[]).map((a) => a.task)).toEqual(['fill']);
    const conceptIds = new Set((notes.body.result.keyConcepts as { id: string }[]).map((c) => c.id));
    for (const question of fill.body.result.questions) {
      expect(question.sentence.split('___')).toHaveLength(2);
      expect(conceptIds.has(question.conceptId)).toBe(true);
    }
  });

  it('answers in Korean when asked', async () => {
    const result = await generate({ task: 'notes', text: '광합성은 빛 에너지를 포도당에 저장된 화학 에너지로 바꾼다. 엽록소는 빛을 흡수한다.', options: { lang: 'ko' } }, keys.timelygpt);
    expect(result.status, result.text).toBe(200);
    expect(result.body.meta.provider).toBe('timelygpt');
    expect(JSON.stringify(result.body.result)).toMatch(/[\uac00-\ud7a3]/);
  });

  it('generates from an uploaded document', async () => {
    const pdf = await textPdf(['Photosynthesis converts light energy into chemical energy.', 'Chlorophyll absorbs red and blue light.']);
    const form = new FormData();
    form.append('file', new Blob([Buffer.from(pdf)], { type: 'application/pdf' }), 'bio.pdf');
    const upload = await request(`${harness.url}/v1/documents`, { method: 'POST', body: form });
    expect(upload.status, upload.text).toBe(201);
    const result = await generate({ task: 'notes', documentId: upload.body.documentId, options: { lang: 'en' } }, keys.claude);
    expect(result.status, result.text).toBe(200);
    expect(JSON.stringify(result.body.result).toLowerCase()).toContain('photosynthesis');
  });

  it('answers 404 DOCUMENT_NOT_FOUND for an unknown documentId', async () => {
    expectError(await generate({ task: 'notes', documentId: '00000000-0000-0000-0000-000000000000' }, keys.claude), 404, 'DOCUMENT_NOT_FOUND');
  });

  it('follows the requested provider order and leaves out providers without a key', async () => {
    const ordered = await generate({ task: 'notes', text: studyText, providers: ['gpt', 'claude'] }, allKeys);
    expect(ordered.body.meta.provider).toBe('gpt');
    const keyless = await generate({ task: 'notes', text: studyText, providers: ['claude', 'timelygpt'] }, keys.timelygpt);
    expect(keyless.status).toBe(200);
    expect((keyless.body.meta.attempts as AttemptBody[]).map((a) => a.provider)).toEqual(['timelygpt']);
    expect(keyless.body.meta.fallback).toBe(false);
  });
});

describe('retry and fallback', () => {
  it('retries a provider-side failure, then falls back (meta.fallback, ordered attempts)', async () => {
    harness.fault({ provider: 'claude', fault: 'http500' });
    const result = await generate({ task: 'notes', text: studyText }, { ...keys.claude, ...keys.gpt });
    expect(result.status, result.text).toBe(200);
    expect(result.body.meta).toMatchObject({ provider: 'gpt', fallback: true });
    const attempts = result.body.meta.attempts as AttemptBody[];
    expect(attempts.map((a) => [a.provider, a.outcome, a.errorClass, a.countedByBreaker, a.retry])).toEqual([
      ['claude', 'failed', 'server_error', true, 0],
      ['claude', 'failed', 'server_error', true, 1],
      ['claude', 'failed', 'server_error', true, 2],
      ['gpt', 'succeeded', undefined, false, 0],
    ]);
    expect(attempts[0]?.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('counts a timeout toward the breaker and retries it', async () => {
    harness.fault({ provider: 'claude', fault: 'hang', count: 1 });
    const result = await generate({ task: 'notes', text: studyText }, keys.claude);
    expect(result.status, result.text).toBe(200);
    const attempts = result.body.meta.attempts as AttemptBody[];
    expect(attempts[0]).toMatchObject({ provider: 'claude', outcome: 'failed', errorClass: 'timeout', countedByBreaker: true, retry: 0 });
    expect(attempts[1]).toMatchObject({ provider: 'claude', outcome: 'succeeded', retry: 1 });
  });

  it('opens the breaker after the threshold, then skips the provider at once', async () => {
    harness.fault({ provider: 'claude', fault: 'http503' });
    await generate({ task: 'notes', text: studyText }, { ...keys.claude, ...keys.gpt });
    const status = await providers();
    expect(status.claude?.breaker.state).toBe('open');
    expect(status.claude?.breaker.retryAt).not.toBeNull();

    const skipped = await generate({ task: 'notes', text: studyText }, { ...keys.claude, ...keys.gpt });
    expect(skipped.status).toBe(200);
    const attempts = skipped.body.meta.attempts as AttemptBody[];
    expect(attempts[0]).toMatchObject({ provider: 'claude', outcome: 'skipped', reason: 'circuit_open', countedByBreaker: false });
    expect(attempts[1]).toMatchObject({ provider: 'gpt', outcome: 'succeeded' });

    const metrics = await request(`${harness.url}/metrics`);
    expect(metrics.text).toContain('studyhelper_breaker_state{provider="claude"} 1');
    expect(metrics.text).toMatch(/studyhelper_breaker_transitions_total\{provider="claude",from="closed",to="open"\} [1-9]/);
    expect(metrics.text).toMatch(/studyhelper_fallbacks_total\{from="claude",to="gpt"\} [1-9]/);
    expect(metrics.text).toMatch(/studyhelper_provider_calls_total\{provider="claude",outcome="failed",error_class="server_error"\} [1-9]/);
    expect(metrics.text).toMatch(/studyhelper_attempt_duration_seconds_count\{provider="gpt"\} [1-9]/);
    expect(metrics.text).toMatch(/studyhelper_tokens_total\{provider="gpt",direction="output"\} [1-9]/);
  });

  it('never counts 401 or 429 toward a breaker', async () => {
    for (let i = 0; i < 4; i += 1) {
      await generate({ task: 'notes', text: studyText }, { 'x-claude-key': 'emu-bad-test-0001', 'x-gpt-key': 'emu-ratelimit-test-0001' });
    }
    const status = await providers();
    expect(status.claude?.breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    expect(status.gpt?.breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
  });

  it('aborts the run when the client goes away, and the abort counts nowhere', async () => {
    harness.fault({ provider: 'claude', fault: 'slow', ms: 400 });
    const before = (await providers()).claude;
    const upstreamCallsBefore = harness.emulator.stats().claude.calls;
    const controller = new AbortController();
    const pending = generate({ task: 'notes', text: studyText }, keys.claude, controller.signal).catch((error: unknown) => error);
    await expect.poll(() => harness.emulator.stats().claude.calls, { timeout: 2000, interval: 5 }).toBeGreaterThan(upstreamCallsBefore);
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    await expect.poll(() => harness.logs.some((line) => line.includes('generation aborted')), { timeout: 2000 }).toBe(true);
    const after = (await providers()).claude;
    expect(after?.breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    expect(after?.stats.failures).toBe(before?.stats.failures);
    expect(after?.stats.successes).toBe(before?.stats.successes);
  });
});

describe('when every provider fails', () => {
  const bad = (prefix: string) => ({
    'x-claude-key': `${prefix}claude-0001`,
    'x-gpt-key': `${prefix}gpt-0001`,
    'x-timelygpt-key': `${prefix}timelygpt-0001`,
  });

  it.each([
    ['auth', 'emu-bad-', 401, 'PROVIDER_AUTH_FAILED'],
    ['permission', 'emu-forbidden-', 403, 'PROVIDER_PERMISSION_DENIED'],
    ['quota_exhausted', 'emu-quota-', 402, 'PROVIDER_QUOTA_EXHAUSTED'],
    ['rate_limited', 'emu-ratelimit-', 429, 'PROVIDER_RATE_LIMITED'],
  ])('every attempt %s → %s %s with every attempt in order', async (errorClass, prefix, status, code) => {
    const result = await generate({ task: 'notes', text: studyText }, bad(prefix));
    expectError(result, status, code);
    const attempts = result.body.error.attempts as AttemptBody[];
    expect(attempts.map((a) => a.provider)).toEqual(['claude', 'gpt', 'timelygpt']);
    for (const attempt of attempts) expect(attempt).toMatchObject({ outcome: 'failed', errorClass, countedByBreaker: false, retry: 0 });
    if (code === 'PROVIDER_RATE_LIMITED') {
      expect(result.headers.get('retry-after')).toBe('7');
      expect(result.body.error.retryAfterSeconds).toBe(7);
    }
  });

  it('every attempt invalid_output → 502 INVALID_PROVIDER_OUTPUT after one re-ask each', async () => {
    for (const provider of ['claude', 'gpt', 'timelygpt'] as const) harness.fault({ provider, fault: 'invalidOutput' });
    const result = await generate({ task: 'notes', text: studyText }, allKeys);
    expectError(result, 502, 'INVALID_PROVIDER_OUTPUT');
    const attempts = result.body.error.attempts as AttemptBody[];
    expect(attempts.map((a) => [a.provider, a.errorClass, a.retry, a.countedByBreaker])).toEqual([
      ['claude', 'invalid_output', 0, false],
      ['claude', 'invalid_output', 1, false],
      ['gpt', 'invalid_output', 0, false],
      ['gpt', 'invalid_output', 1, false],
      ['timelygpt', 'invalid_output', 0, false],
      ['timelygpt', 'invalid_output', 1, false],
    ]);
  });

  it('a provider-side class in the mix → 503 PROVIDERS_UNAVAILABLE', async () => {
    harness.fault({ provider: 'claude', fault: 'http500' });
    const result = await generate({ task: 'notes', text: studyText, providers: ['claude', 'gpt'] }, { ...keys.claude, 'x-gpt-key': 'emu-bad-gpt-0001' });
    expectError(result, 503, 'PROVIDERS_UNAVAILABLE');
    expect((result.body.error.attempts as AttemptBody[]).map((a) => a.errorClass)).toEqual(['server_error', 'server_error', 'server_error', 'auth']);
  });

  it('any other mix → the status of the first provider’s class', async () => {
    const result = await generate({ task: 'notes', text: studyText, providers: ['gpt', 'claude'] }, { 'x-gpt-key': 'emu-quota-gpt-0001', 'x-claude-key': 'emu-bad-claude-0001' });
    expectError(result, 402, 'PROVIDER_QUOTA_EXHAUSTED');
  });

  it('every provider skipped with circuit_open → 503 PROVIDERS_UNAVAILABLE with Retry-After to the earliest half-open', async () => {
    for (const provider of ['claude', 'gpt', 'timelygpt'] as const) harness.fault({ provider, fault: 'http500' });
    const opening = await generate({ task: 'notes', text: studyText }, allKeys);
    expectError(opening, 503, 'PROVIDERS_UNAVAILABLE');
    const result = await generate({ task: 'notes', text: studyText }, allKeys);
    expectError(result, 503, 'PROVIDERS_UNAVAILABLE');
    const attempts = result.body.error.attempts as AttemptBody[];
    expect(attempts.map((a) => [a.provider, a.outcome, a.reason])).toEqual([
      ['claude', 'skipped', 'circuit_open'],
      ['gpt', 'skipped', 'circuit_open'],
      ['timelygpt', 'skipped', 'circuit_open'],
    ]);
    const retryAfter = Number(result.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(result.body.error.retryAfterSeconds).toBe(retryAfter);
  });

  // A forced-open breaker has no time at which it would probe: it waits for an operator's release, so
  // it adds no Retry-After hint (docs/api.md: "where known"; docs/errors.md says so).
  it('every provider forced open → 503 PROVIDERS_UNAVAILABLE without Retry-After (no probe is due)', async () => {
    for (const provider of ['claude', 'gpt', 'timelygpt'] as const) {
      const forced = await postJson(`${harness.url}/v1/providers/${provider}/breaker`, { action: 'forceOpen' }, { authorization: `Bearer ${adminToken}` });
      expect(forced.status, forced.text).toBe(200);
    }
    const result = await generate({ task: 'notes', text: studyText }, allKeys);
    expectError(result, 503, 'PROVIDERS_UNAVAILABLE');
    expect((result.body.error.attempts as AttemptBody[]).map((a) => [a.provider, a.outcome, a.reason])).toEqual([
      ['claude', 'skipped', 'circuit_open'],
      ['gpt', 'skipped', 'circuit_open'],
      ['timelygpt', 'skipped', 'circuit_open'],
    ]);
    expect(result.headers.get('retry-after')).toBeNull();
    expect(result.body.error).not.toHaveProperty('retryAfterSeconds');
  });

  it('one forced open, one opened by failures → Retry-After to the latter\'s half-open', async () => {
    harness.fault({ provider: 'gpt', fault: 'http500' });
    expectError(await generate({ task: 'notes', text: studyText, providers: ['gpt'] }, allKeys), 503, 'PROVIDERS_UNAVAILABLE');
    const forced = await postJson(`${harness.url}/v1/providers/claude/breaker`, { action: 'forceOpen' }, { authorization: `Bearer ${adminToken}` });
    expect(forced.status, forced.text).toBe(200);
    const providers = await request(`${harness.url}/v1/providers`);
    const gpt = (providers.body.providers as { id: string; breaker: { state: string; retryAt: string } }[]).find((p) => p.id === 'gpt');
    expect(gpt?.breaker.state).toBe('open');
    const result = await generate({ task: 'notes', text: studyText, providers: ['claude', 'gpt'] }, allKeys);
    expectError(result, 503, 'PROVIDERS_UNAVAILABLE');
    const retryAfter = Number(result.headers.get('retry-after'));
    // Seconds to GPT's half-open, rounded up: at most what was left when /v1/providers answered.
    const leftThen = Math.ceil((Date.parse(gpt?.breaker.retryAt ?? '') - Date.now()) / 1000);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(leftThen + 1);
    expect(retryAfter).toBeGreaterThanOrEqual(leftThen - 1);
    expect(result.body.error.retryAfterSeconds).toBe(retryAfter);
  });
});

describe('every provider fails with context_too_long', () => {
  let small: Harness;
  beforeAll(async () => {
    small = await startHarness({}, { maxInputChars: 10 });
  });
  afterAll(async () => {
    await small.close();
  });

  it('→ 413 DOCUMENT_TOO_LONG', async () => {
    const result = await postJson(`${small.url}/v1/generate`, { task: 'notes', text: studyText }, allKeys);
    expectError(result, 413, 'DOCUMENT_TOO_LONG');
    expect((result.body.error.attempts as AttemptBody[]).every((a) => a.errorClass === 'context_too_long')).toBe(true);
  });
});

describe('providers and operator control', () => {
  const auth = { authorization: `Bearer ${adminToken}` };

  it('forceOpen holds a breaker open until release', async () => {
    const forced = await postJson(`${harness.url}/v1/providers/gpt/breaker`, { action: 'forceOpen' }, auth);
    expect(forced.status, forced.text).toBe(200);
    expect(forced.body.breaker.state).toBe('open');
    const skipped = await generate({ task: 'notes', text: studyText, providers: ['gpt', 'claude'] }, allKeys);
    expect(skipped.body.meta.attempts[0]).toMatchObject({ provider: 'gpt', outcome: 'skipped', reason: 'circuit_open' });
    const released = await postJson(`${harness.url}/v1/providers/gpt/breaker`, { action: 'release' }, auth);
    expect(released.body.breaker.state).toBe('closed');
  });

  it('answers the admin errors of docs/api.md', async () => {
    expectError(await postJson(`${harness.url}/v1/providers/gpt/breaker`, { action: 'reset' }), 401, 'ADMIN_AUTH_REQUIRED');
    expectError(await postJson(`${harness.url}/v1/providers/gemini/breaker`, { action: 'reset' }, auth), 404, 'PROVIDER_NOT_FOUND');
    expectError(await postJson(`${harness.url}/v1/providers/gpt/breaker`, { action: 'melt' }, auth), 400, 'INVALID_REQUEST');
  });

  it('serves health, readiness, OpenAPI and the docs UI', async () => {
    expect((await request(`${harness.url}/healthz`)).status).toBe(200);
    expect((await request(`${harness.url}/readyz`)).body).toMatchObject({ status: 'ready', store: 'memory' });
    expect((await request(`${harness.url}/openapi.json`)).body.openapi).toMatch(/^3\./);
    expect((await request(`${harness.url}/docs/`)).status).toBe(200);
    expectError(await request(`${harness.url}/v1/nothing-here`), 404, 'NOT_FOUND');
  });
});
