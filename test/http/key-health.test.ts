/**
 * End to end: the real service over HTTP, the real SDK adapters and the emulator.
 * The rules, written out:
 * - a key out of quota is quarantined for KEY_QUARANTINE_MS (here 60 s): the job's later stages skip it
 *   at once (`key_quarantined`, class `quota_exhausted`) and fall back, without another upstream call;
 * - `GET /v1/keys/status` shows the caller's own key quarantined, its class and `until`, never the key;
 * - another caller's key, and a different key for the same provider, are unaffected and still called;
 * - a rate-limited key cools until the upstream's `Retry-After` (the emulator's 7 s);
 * - `GET /v1/providers` and `/metrics` show how many keys are refused, never which.
 * A second service with KEY_QUARANTINE_MS=300 shows the key's probe: one call goes out once the
 * quarantine has ended.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJson, request, startHarness, studyText, textPdf } from './blackbox-support.js';
import type { Harness } from './blackbox-support.js';

let harness: Harness;

beforeAll(async () => {
  harness = await startHarness({ KEY_QUARANTINE_MS: '60000', RETRY_MAX: '0', LOG_LEVEL: 'warn' });
});

afterAll(async () => {
  await harness.close();
});

/** Obviously fake emulator keys: `emu-quota-` answers Anthropic's credit-balance 400. */
const quotaClaudeKey = 'emu-quota-claude-keyhealth-0001';
const workingGptKey = 'test-gpt-key-keyhealth-0002';
const otherUsersClaudeKey = 'test-claude-key-keyhealth-0003';
const rateLimitedGptKey = 'emu-ratelimit-gpt-keyhealth-0004';

interface AttemptView {
  readonly provider: string;
  readonly outcome: string;
  readonly errorClass?: string;
  readonly reason?: string;
}

const claudeCalls = (key: string): number =>
  harness.emulator.stats().claude.byKey[harness.emulator.fingerprint(key)] ?? 0;

async function finishedJob(
  headers: Record<string, string>,
): Promise<{ status: string; meta: { attempts: AttemptView[] } }> {
  const form = new FormData();
  const pdf = await textPdf(studyText.split('. '));
  form.append('file', new Blob([new Uint8Array(pdf)], { type: 'application/pdf' }), 'notes.pdf');
  const uploaded = await request(`${harness.url}/v1/documents`, { method: 'POST', body: form });
  expect(uploaded.status, uploaded.text).toBe(201);
  const created = await postJson(
    `${harness.url}/v1/jobs`,
    { documentId: uploaded.body.documentId, providers: ['claude', 'gpt'], options: { lang: 'en' } },
    headers,
  );
  expect(created.status, created.text).toBe(202);
  for (;;) {
    const job = await request(`${harness.url}/v1/jobs/${created.body.jobId as string}`);
    if (['succeeded', 'failed', 'cancelled'].includes(job.body.status as string)) return job.body;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('per-key health over HTTP', () => {
  it("a job's later stages skip the claude key that ran out of quota, and fall back to gpt at once", async () => {
    const job = await finishedJob({ 'x-claude-key': quotaClaudeKey, 'x-gpt-key': workingGptKey });
    expect(job.status, JSON.stringify(job)).toBe('succeeded');
    const trail = job.meta.attempts.map((attempt) =>
      [attempt.provider, attempt.outcome, attempt.errorClass ?? '', attempt.reason ?? ''].join(' ').trim(),
    );
    // Was: claude quota, gpt ok, claude quota, gpt ok, claude quota, gpt ok.
    expect(trail).toEqual([
      'claude failed quota_exhausted',
      'gpt succeeded',
      'claude skipped quota_exhausted key_quarantined',
      'gpt succeeded',
      'claude skipped quota_exhausted key_quarantined',
      'gpt succeeded',
    ]);
    expect(claudeCalls(quotaClaudeKey)).toBe(1);
  });

  it('shows the owner their key quarantined, with its class and until, and never the key', async () => {
    const before = Date.now();
    const status = await request(`${harness.url}/v1/keys/status`, {
      headers: { 'x-claude-key': quotaClaudeKey, 'x-gpt-key': workingGptKey },
    });
    expect(status.status).toBe(200);
    expect(status.body.providers).toEqual([
      { provider: 'claude', state: 'quarantined', errorClass: 'quota_exhausted', until: expect.any(String) },
      { provider: 'gpt', state: 'healthy' },
    ]);
    const until = Date.parse(status.body.providers[0].until as string);
    // Quarantined for KEY_QUARANTINE_MS from the failure, which came before this request.
    expect(until).toBeGreaterThan(before);
    expect(until).toBeLessThanOrEqual(before + 60_000);
    expect(status.text).not.toContain('keyhealth');
  });

  it("leaves other callers' keys alone: a different claude key is healthy and still called", async () => {
    const status = await request(`${harness.url}/v1/keys/status`, {
      headers: { 'x-claude-key': otherUsersClaudeKey },
    });
    expect(status.body).toEqual({ providers: [{ provider: 'claude', state: 'healthy' }] });
    const answer = await postJson(
      `${harness.url}/v1/generate`,
      { task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en' } },
      { 'x-claude-key': otherUsersClaudeKey },
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.meta.attempts).toEqual([
      expect.objectContaining({ provider: 'claude', outcome: 'succeeded' }),
    ]);
    expect(claudeCalls(otherUsersClaudeKey)).toBe(1);
  });

  it('answers a quarantined-only request with the class that refused the key (402), without an upstream call', async () => {
    const answer = await postJson(
      `${harness.url}/v1/generate`,
      { task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en' } },
      { 'x-claude-key': quotaClaudeKey },
    );
    expect(answer.status).toBe(402);
    expect(answer.body.error.code).toBe('PROVIDER_QUOTA_EXHAUSTED');
    expect(answer.body.error.attempts).toEqual([
      expect.objectContaining({
        outcome: 'skipped',
        reason: 'key_quarantined',
        errorClass: 'quota_exhausted',
        countedByBreaker: false,
      }),
    ]);
    expect(claudeCalls(quotaClaudeKey)).toBe(1);
  });

  it("cools a rate-limited key until the upstream's Retry-After, and answers 429 with it", async () => {
    const generate = () =>
      postJson(
        `${harness.url}/v1/generate`,
        { task: 'notes', text: studyText, providers: ['gpt'], options: { lang: 'en' } },
        { 'x-gpt-key': rateLimitedGptKey },
      );
    const first = await generate();
    expect(first.status).toBe(429);
    const before = Date.now();
    const second = await generate();
    expect(second.status).toBe(429);
    expect(second.body.error.attempts).toEqual([
      expect.objectContaining({
        provider: 'gpt',
        outcome: 'skipped',
        reason: 'key_cooling',
        errorClass: 'rate_limited',
      }),
    ]);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(second.headers.get('retry-after'))).toBeLessThanOrEqual(7);
    const status = await request(`${harness.url}/v1/keys/status`, {
      headers: { 'x-gpt-key': rateLimitedGptKey },
    });
    expect(status.body.providers[0]).toMatchObject({
      provider: 'gpt',
      state: 'cooling',
      errorClass: 'rate_limited',
    });
    expect(Date.parse(status.body.providers[0].until as string)).toBeLessThanOrEqual(before + 7_000);
  });

  it('counts refused keys in GET /v1/providers and /metrics, never naming one', async () => {
    const providers = await request(`${harness.url}/v1/providers`);
    const byId = Object.fromEntries(
      (providers.body.providers as { id: string; keys: unknown }[]).map((item) => [item.id, item.keys]),
    );
    expect(byId).toEqual({
      claude: { quarantined: 1, cooling: 0 },
      gpt: { quarantined: 0, cooling: 1 },
      timelygpt: { quarantined: 0, cooling: 0 },
    });
    const metrics = await request(`${harness.url}/metrics`);
    expect(metrics.text).toContain('studyhelper_keys_refused{provider="claude",state="quarantined"} 1');
    expect(metrics.text).toContain('studyhelper_keys_refused{provider="gpt",state="cooling"} 1');
    expect(metrics.text).not.toContain('keyhealth');
  });

  it('answers 400 NO_PROVIDER_KEY without a key header', async () => {
    const status = await request(`${harness.url}/v1/keys/status`);
    expect(status.status).toBe(400);
    expect(status.body.error.code).toBe('NO_PROVIDER_KEY');
  });
});

describe('the key probe when the quarantine ends', () => {
  let short: Harness;

  beforeAll(async () => {
    short = await startHarness({ KEY_QUARANTINE_MS: '300', RETRY_MAX: '0', LOG_LEVEL: 'warn' });
  });

  afterAll(async () => {
    await short.close();
  });

  it('lets one call out once the quarantine has ended, and quarantines again when it fails', async () => {
    const key = 'emu-bad-claude-keyhealth-probe-0005';
    const calls = () => short.emulator.stats().claude.byKey[short.emulator.fingerprint(key)] ?? 0;
    const generate = () =>
      postJson(
        `${short.url}/v1/generate`,
        { task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en' } },
        { 'x-claude-key': key },
      );
    expect((await generate()).status).toBe(401);
    expect(calls()).toBe(1);
    const status = await request(`${short.url}/v1/keys/status`, { headers: { 'x-claude-key': key } });
    const until = Date.parse(status.body.providers[0].until as string);
    // Skipped while quarantined (when the machine is slow the quarantine may already be over: then probed).
    const skipped = await generate();
    if (Date.now() < until) expect(calls()).toBe(1);
    expect(skipped.status).toBe(401);
    // Once `until` has passed, one call goes out as the key's probe; its 401 quarantines the key again.
    while (Date.now() <= until) await new Promise((resolve) => setTimeout(resolve, until - Date.now() + 20));
    const callsBefore = calls();
    const probed = await generate();
    expect(probed.status).toBe(401);
    expect(probed.body.error.attempts).toEqual([
      expect.objectContaining({ outcome: 'failed', errorClass: 'auth' }),
    ]);
    expect(calls()).toBe(callsBefore + 1);
  });
});
