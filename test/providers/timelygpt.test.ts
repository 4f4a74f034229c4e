import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import type { ErrorClass } from '../../src/errors/index.js';
import { createTimelyGptAdapter, type TimelyGptAdapter } from '../../src/providers/index.js';
import { TokenCache } from '../../src/providers/timelygpt/index.js';
import { postFault, rejectionOf } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';
import { Secret } from '../../src/security/secret.js';

const ttlMs = 3_300_000;

function timelyBody(statusCode: number, error: string, message: string): unknown {
  return { success: false, error, message, statusCode };
}

/** docs/api.md's TimelyGPT wire rows, served at llm-completion. */
const rows: readonly [string, number, unknown, Record<string, string>, ErrorClass, number | undefined][] = [
  ['402 quota', 402, timelyBody(402, 'Payment Required', 'Insufficient credits'), {}, 'quota_exhausted', undefined],
  ['403 permission', 403, timelyBody(403, 'Forbidden', 'Forbidden'), {}, 'permission', undefined],
  ['429 rate limit', 429, timelyBody(429, 'Too Many Requests', 'Slow down'), { 'retry-after': '7' }, 'rate_limited', 7000],
  ['400 bad request', 400, timelyBody(400, 'Bad Request', 'messages must be an array'), {}, 'bad_request', undefined],
  ['404 unknown model', 404, timelyBody(404, 'Not Found', 'Model not found'), {}, 'not_found', undefined],
  ['413 too long', 413, timelyBody(413, 'Payload Too Large', 'Input is too long'), {}, 'context_too_long', undefined],
  ['500', 500, timelyBody(500, 'Internal Server Error', 'boom'), {}, 'server_error', undefined],
  ['502', 502, timelyBody(502, 'Bad Gateway', 'bad gateway'), {}, 'server_error', undefined],
  ['503', 503, timelyBody(503, 'Service Unavailable', 'unavailable'), {}, 'server_error', undefined],
  ['2xx {"type":"error"}', 200, { type: 'error', error: 'The model failed to answer' }, {}, 'server_error', undefined],
];

describe('TimelyGPT over the wire', () => {
  let emulator: Emulator;
  let adapter: TimelyGptAdapter;
  const key = 'test-timely-key-0001';

  beforeAll(async () => {
    emulator = await startEmulator();
  });
  afterAll(async () => {
    await emulator.close();
  });
  beforeEach(() => {
    emulator.resetFaults();
    emulator.resetStats();
    adapter = createTimelyGptAdapter({ baseUrl: emulator.timelygptBaseUrl, model: 'timely-emu-1', tokenTtlMs: ttlMs });
  });

  it.each(rows)('%s → its class', async (_label, status, body, headers, expected, retryAfterMs) => {
    await postFault(emulator, { provider: 'timelygpt', fault: 'respond', count: 1, status, body, headers });
    const failure = adapter.classify(await rejectionOf(adapter.generate(studyRequest(), new Secret(key), openSignal())));
    expect(failure.errorClass).toBe(expected);
    expect(failure.httpStatus).toBe(status);
    expect(failure.retryAfterMs).toBe(retryAfterMs);
  });

  it('401 from authenticate is auth, with no completion call', async () => {
    const failure = adapter.classify(await rejectionOf(adapter.generate(studyRequest(), new Secret('emu-bad-timely-0001'), openSignal())));
    expect(failure).toMatchObject({ errorClass: 'auth', httpStatus: 401 });
    expect(emulator.stats().timelygpt).toMatchObject({ authCalls: 1, calls: 0 });
  });

  it('sends output_type JSON and answers study JSON with null usage', async () => {
    const answer = await adapter.generate(studyRequest('mcq', { count: 4, lang: 'ko' }), new Secret(key), openSignal());
    expect((JSON.parse(answer.text) as { questions: unknown[] }).questions).toHaveLength(4);
    expect(answer.model).toBe('timely-emu-1');
    expect(answer.usage).toEqual({ inputTokens: null, outputTokens: null });
  });

  it('reuses the cached token for the same key', async () => {
    await adapter.generate(studyRequest(), new Secret(key), openSignal());
    await adapter.generate(studyRequest(), new Secret(key), openSignal());
    expect(emulator.stats().timelygpt).toMatchObject({ authCalls: 1, calls: 2 });
  });

  it('concurrent calls with the same key share one token exchange', async () => {
    await Promise.all(Array.from({ length: 6 }, () => adapter.generate(studyRequest(), new Secret(key), openSignal())));
    expect(emulator.stats().timelygpt).toMatchObject({ authCalls: 1, calls: 6 });
    expect(adapter.tokenCache.exchanges).toBe(1);
  });

  it('different keys get their own tokens', async () => {
    await Promise.all([adapter.generate(studyRequest(), new Secret(key), openSignal()), adapter.generate(studyRequest(), new Secret('test-timely-key-0002'), openSignal())]);
    expect(emulator.stats().timelygpt.authCalls).toBe(2);
  });

  it('an expired token (401 from llm-completion) is evicted, re-authenticated and retried once, automatically', async () => {
    await adapter.generate(studyRequest(), new Secret(key), openSignal());
    await postFault(emulator, { provider: 'timelygpt', fault: 'tokenExpired', count: 1 });
    const answer = await adapter.generate(studyRequest(), new Secret(key), openSignal());
    expect(answer.text.length).toBeGreaterThan(0);
    expect(emulator.stats().timelygpt).toMatchObject({ authCalls: 2, calls: 3 });
  });

  it('a second 401 after re-authentication is auth, and there is no third call', async () => {
    await postFault(emulator, { provider: 'timelygpt', fault: 'tokenExpired', count: 2 });
    const failure = adapter.classify(await rejectionOf(adapter.generate(studyRequest(), new Secret(key), openSignal())));
    expect(failure).toMatchObject({ errorClass: 'auth', httpStatus: 401 });
    expect(emulator.stats().timelygpt).toMatchObject({ authCalls: 2, calls: 2 });
  });

  it('a token past its TTL is exchanged again (injected clock)', async () => {
    let now = 1_000_000;
    const clocked = createTimelyGptAdapter({ baseUrl: emulator.timelygptBaseUrl, model: 'timely-emu-1', tokenTtlMs: ttlMs, now: () => now });
    await clocked.generate(studyRequest(), new Secret(key), openSignal());
    now += ttlMs - 1;
    await clocked.generate(studyRequest(), new Secret(key), openSignal());
    expect(emulator.stats().timelygpt.authCalls).toBe(1);
    now += 2;
    await clocked.generate(studyRequest(), new Secret(key), openSignal());
    expect(emulator.stats().timelygpt.authCalls).toBe(2);
  });

  it('keeps at most maxCachedTokens tokens', async () => {
    const bounded = createTimelyGptAdapter({ baseUrl: emulator.timelygptBaseUrl, model: 'timely-emu-1', tokenTtlMs: ttlMs, maxCachedTokens: 2 });
    for (const n of [1, 2, 3]) await bounded.generate(studyRequest(), new Secret(`test-timely-key-000${n}`), openSignal());
    expect(bounded.tokenCache.size).toBe(2);
  });
});

describe('TokenCache', () => {
  it('different keys never wait on each other', async () => {
    const cache = new TokenCache({ ttlMs });
    let releaseSlow: (token: string) => void = () => undefined;
    const slow = cache.acquire('test-key-slow-0001', () => new Promise<string>((resolve) => (releaseSlow = resolve)), openSignal());
    const fast = await cache.acquire('test-key-fast-0001', async () => 'token-fast', openSignal());
    expect(fast).toBe('token-fast');
    releaseSlow('token-slow');
    expect(await slow).toBe('token-slow');
  });

  it('a waiter that aborts leaves the shared exchange running for the others', async () => {
    const cache = new TokenCache({ ttlMs });
    let release: (token: string) => void = () => undefined;
    const exchange = (): Promise<string> => new Promise<string>((resolve) => (release = resolve));
    const controller = new AbortController();
    const leaving = cache.acquire('test-key-0001', exchange, controller.signal);
    const staying = cache.acquire('test-key-0001', exchange, openSignal());
    controller.abort();
    await expect(leaving).rejects.toMatchObject({ name: 'AbortError' });
    release('token-1');
    expect(await staying).toBe('token-1');
    expect(cache.exchanges).toBe(1);
  });

  it('evicts only the token it was told about', async () => {
    const cache = new TokenCache({ ttlMs });
    await cache.acquire('test-key-0001', async () => 'token-1', openSignal());
    cache.evict('test-key-0001', 'token-0');
    expect(cache.size).toBe(1);
    cache.evict('test-key-0001', 'token-1');
    expect(cache.size).toBe(0);
  });
});
