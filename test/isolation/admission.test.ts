import type { FastifyInstance } from 'fastify';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import type { DocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { loadAnthropicSdk } from '../../src/providers/claude-sdk.js';
import { putTestDocument, staticGateway, testConfig, withLimits } from '../http/support.js';
import type { LimitOverrides, StaticGateway } from '../http/support.js';

const apps: FastifyInstance[] = [];

interface Started {
  app: FastifyInstance;
  gateway: StaticGateway;
  store: DocumentStore;
  releaseHold: () => void;
}

/**
 * An app whose gateway holds every provider call until `releaseHold()` (then fails it: 503); `limits` sets
 * derived limits (no variable of their own) smaller for a scenario.
 */
async function start(env: NodeJS.ProcessEnv, limits: LimitOverrides = {}): Promise<Started> {
  const gateway = staticGateway();
  let releaseHold = (): void => undefined;
  gateway.hold = new Promise<void>((resolve) => {
    releaseHold = resolve;
  });
  const store = createMemoryDocumentStore({ ttlSeconds: 60 });
  const app = await buildApp({ config: withLimits(testConfig(env), limits), gateway, documentStore: store, processMetrics: false });
  apps.push(app);
  return { app, gateway, store, releaseHold };
}

// `until` counts event-loop turns until a request reaches the gateway; a request naming Claude waits for
// the SDK's one-time import first (src/providers/claude-sdk.ts), which is not what these tests measure.
beforeAll(async () => {
  await loadAnthropicSdk();
});

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

const clientA = { 'content-type': 'application/json', 'x-gpt-key': 'client-a-gpt-key-000001' };
const clientB = { 'content-type': 'application/json', 'x-claude-key': 'client-b-claude-key-0001' };
const clientC = { 'content-type': 'application/json', 'x-claude-key': 'client-c-claude-key-0001' };

async function until(check: () => boolean): Promise<void> {
  for (let turn = 0; turn < 1000 && !check(); turn += 1) await new Promise((resolve) => setImmediate(resolve));
  expect(check()).toBe(true);
}

describe('admission of POST /v1/generate', () => {
  it('gives each client a share of the in-flight slots and the instance a bound; every refusal has Retry-After', async () => {
    const { app, gateway, releaseHold } = await start({
      MAX_INFLIGHT_GENERATIONS: '3',
      MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '2',
    });
    const generate = (headers: Record<string, string>, n: number) =>
      app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text: `Photosynthesis, request ${n}.` } });
    const held = [generate(clientA, 1), generate(clientA, 2)];
    await until(() => gateway.generateCalls.length === 2);

    // A third from client A: over its share of 2.
    const third = await generate(clientA, 3);
    expect(third.statusCode).toBe(429);
    expect(third.json().error.code).toBe('TOO_MANY_REQUESTS');
    // Every refusal for lack of room says 5 s (docs/configuration.md "Derived limits").
    expect(third.headers['retry-after']).toBe('5');
    expect(third.json().error.retryAfterSeconds).toBe(5);

    // The same keys in another header order are the same client; another client still gets in.
    held.push(generate(clientB, 4));
    await until(() => gateway.generateCalls.length === 3);

    // The instance is full (3): client C is refused with 503 SERVER_BUSY.
    const full = await generate(clientC, 5);
    expect(full.statusCode).toBe(503);
    expect(full.json().error.code).toBe('SERVER_BUSY');
    expect(full.headers['retry-after']).toBe('5');
    expect(gateway.generateCalls).toHaveLength(3);

    // Nothing lost: every admitted request gets its own answer once the provider answers.
    releaseHold();
    for (const response of await Promise.all(held)) expect(response.json().error.code).toBe('PROVIDERS_UNAVAILABLE');
    // The slots are free again.
    const again = await generate(clientC, 6);
    expect(again.json().error.code).toBe('PROVIDERS_UNAVAILABLE');
  });

  it('treats a request with the same keys as the same client whatever else differs', async () => {
    const { app, gateway } = await start({ MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '1' });
    const both = { 'content-type': 'application/json', 'x-gpt-key': 'client-d-gpt-key-000001', 'x-claude-key': 'client-d-claude-key-001' };
    void app.inject({ method: 'POST', url: '/v1/generate', headers: both, payload: { task: 'notes', text: 'One.', providers: ['gpt', 'claude'] } });
    await until(() => gateway.generateCalls.length === 1);
    const second = await app.inject({ method: 'POST', url: '/v1/generate', headers: both, payload: { task: 'notes', text: 'Two.', providers: ['claude', 'gpt'] } });
    expect(second.statusCode).toBe(429);
    expect(second.json().error.code).toBe('TOO_MANY_REQUESTS');
  });
});

describe('slots per remote address (the per-address share)', () => {
  it('bounds a client that invents a new key per request by its address; other addresses still get in', async () => {
    const { app, gateway, releaseHold } = await start(
      { MAX_INFLIGHT_GENERATIONS: '10', MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '2', REFUSAL_DELAY_MS: '0' },
      { admission: { maxPerAddress: 3 } },
    );
    const generate = (remoteAddress: string, n: number) =>
      app.inject({
        method: 'POST',
        url: '/v1/generate',
        remoteAddress,
        headers: { 'content-type': 'application/json', 'x-gpt-key': `invented-gpt-key-${String(n).padStart(6, '0')}` },
        payload: { task: 'notes', text: `Photosynthesis, request ${n}.` },
      });
    // Three requests, each with a key never seen before, from one address: three clients, one address.
    const held = [generate('203.0.113.7', 1), generate('203.0.113.7', 2), generate('203.0.113.7', 3)];
    await until(() => gateway.generateCalls.length === 3);
    const fourth = await generate('203.0.113.7', 4);
    expect(fourth.statusCode).toBe(429);
    expect(fourth.json().error.code).toBe('TOO_MANY_REQUESTS');
    expect(fourth.json().error.message).toContain('per-address share');
    expect(fourth.headers['retry-after']).toBe('5');
    expect(gateway.generateCalls).toHaveLength(3);
    // Another address is not held back by it.
    held.push(generate('198.51.100.9', 5));
    await until(() => gateway.generateCalls.length === 4);
    releaseHold();
    for (const response of await Promise.all(held)) expect(response.json().error.code).toBe('PROVIDERS_UNAVAILABLE');
    // The address's slots come back with the answers.
    expect((await generate('203.0.113.7', 6)).json().error.code).toBe('PROVIDERS_UNAVAILABLE');
  });

  it('derives the bound: half the instance, at least four clients\' shares (32 by default)', () => {
    expect(testConfig({}).admission.maxPerAddress).toBe(32);
    expect(testConfig({ MAX_INFLIGHT_GENERATIONS: '100' }).admission.maxPerAddress).toBe(50);
    expect(testConfig({ MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '10' }).admission.maxPerAddress).toBe(40);
  });
});

describe('slots weighted by the size of the text (one per 25 000 characters)', () => {
  // The rule, written out: a run takes ceil(characters / slot characters) slots, at least 1 and at most
  // MAX_INFLIGHT_GENERATIONS_PER_CLIENT; a client holds at most that share, the instance at most
  // MAX_INFLIGHT_GENERATIONS. Here a slot is 100 characters, so the texts stay short.
  const env = { MAX_INFLIGHT_GENERATIONS: '6', MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '4' };
  const limits = { admission: { slotChars: 100 } };
  const text = (chars: number): string => 'Chlorophyll absorbs light. '.repeat(Math.ceil(chars / 27)).slice(0, chars).trim().padEnd(chars, 'x');

  it('a long text takes several of its client\'s slots: fewer long texts than short ones run at once', async () => {
    const { app, gateway, releaseHold } = await start(env, limits);
    const generate = (headers: Record<string, string>, chars: number) =>
      app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text: text(chars) } });
    // 250 characters: 3 of client A's 4 slots.
    const held = [generate(clientA, 250)];
    await until(() => gateway.generateCalls.length === 1);
    // Another 250 would need 3 more: refused, with the slots it needs named.
    const long = await generate(clientA, 250);
    expect(long.statusCode).toBe(429);
    expect(long.json().error.code).toBe('TOO_MANY_REQUESTS');
    expect(long.json().error.message).toContain('hold 3 of its 4 slots');
    expect(long.json().error.message).toContain('needs 3');
    expect(long.headers['retry-after']).toBe('5');
    // 100 characters take one slot: it fits.
    held.push(generate(clientA, 100));
    await until(() => gateway.generateCalls.length === 2);
    // Client B is not held back by A's long text (instance: 4 of 6 taken, B takes 2).
    held.push(generate(clientB, 101));
    await until(() => gateway.generateCalls.length === 3);
    // The instance is full now (6): C's one-slot request is refused.
    expect((await generate(clientC, 10)).json().error.code).toBe('SERVER_BUSY');
    // Nothing lost: each admitted run gets its own answer, and every slot is free again after.
    releaseHold();
    for (const response of await Promise.all(held)) expect(response.json().error.code).toBe('PROVIDERS_UNAVAILABLE');
    // A text past share × slot characters takes the whole share (4), not more: it still runs, alone.
    const longest = await generate(clientA, 10_000);
    expect(longest.json().error.code).toBe('PROVIDERS_UNAVAILABLE');
  });

  it('refuses a client whose share is taken before reading its body (a malformed body gets 429, not 400)', async () => {
    const { app, gateway, releaseHold } = await start(env, limits);
    const held = app.inject({ method: 'POST', url: '/v1/generate', headers: clientA, payload: { task: 'notes', text: text(400) } });
    await until(() => gateway.generateCalls.length === 1);
    const refused = await app.inject({ method: 'POST', url: '/v1/generate', headers: clientA, payload: '{"task": "notes", "text": ' });
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error.code).toBe('TOO_MANY_REQUESTS');
    expect(refused.headers['retry-after']).toBe('5');
    // Another client's malformed body is read and refused as such.
    const other = await app.inject({ method: 'POST', url: '/v1/generate', headers: clientB, payload: '{"task": "notes", "text": ' });
    expect([other.statusCode, other.json().error.code]).toEqual([400, 'INVALID_REQUEST']);
    releaseHold();
    expect((await held).json().error.code).toBe('PROVIDERS_UNAVAILABLE');
  });
});

describe('admission of POST /v1/jobs', () => {
  const withDocument = (store: DocumentStore): Promise<string> => putTestDocument(store, 'f'.repeat(64));

  it('answers a full instance with 503 TOO_MANY_JOBS and Retry-After', async () => {
    const { app, store } = await start({ JOB_MAX_JOBS: '2', JOB_MAX_JOBS_PER_CLIENT: '5' });
    const documentId = await withDocument(store);
    const create = (headers: Record<string, string>) => app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: { documentId } });
    expect((await create(clientA)).statusCode).toBe(202);
    expect((await create(clientB)).statusCode).toBe(202);
    const refused = await create(clientC);
    expect(refused.statusCode).toBe(503);
    expect(refused.json().error.code).toBe('TOO_MANY_JOBS');
    expect(refused.headers['retry-after']).toBe('5');
  });

  it('caps the live jobs of one address whatever keys its clients invent (the per-address share), and no other address', async () => {
    const { app, store } = await start(
      { JOB_MAX_JOBS: '50', JOB_MAX_JOBS_PER_CLIENT: '20', RATE_LIMIT_JOBS: '0', REFUSAL_DELAY_MS: '0' },
      { jobs: { maxJobsPerAddress: 2 } },
    );
    const documentId = await withDocument(store);
    const create = (remoteAddress: string, n: number) =>
      app.inject({
        method: 'POST',
        url: '/v1/jobs',
        remoteAddress,
        headers: { 'content-type': 'application/json', 'x-gpt-key': `invented-gpt-key-${String(n).padStart(6, '0')}` },
        payload: { documentId },
      });
    expect((await create('203.0.113.7', 1)).statusCode).toBe(202);
    expect((await create('203.0.113.7', 2)).statusCode).toBe(202);
    const third = await create('203.0.113.7', 3);
    expect(third.statusCode).toBe(429);
    expect(third.json().error.code).toBe('TOO_MANY_REQUESTS');
    expect(third.json().error.message).toContain('per-address share');
    expect(third.headers['retry-after']).toBe('5');
    expect((await create('198.51.100.9', 4)).statusCode).toBe(202);
    // Derived: a tenth of JOB_MAX_JOBS, at least five clients' shares (100 by default).
    expect(testConfig({}).jobs.maxJobsPerAddress).toBe(100);
  });

  it("caps one client's live jobs (429 TOO_MANY_REQUESTS) and runs another client's job beside its backlog", async () => {
    const { app, store, gateway } = await start({ JOB_CONCURRENCY: '2', JOB_CONCURRENCY_PER_CLIENT: '1', JOB_MAX_JOBS_PER_CLIENT: '3' });
    const documentId = await withDocument(store);
    const create = async (headers: Record<string, string>): Promise<{ statusCode: number; jobId: string; response: Awaited<ReturnType<typeof app.inject>> }> => {
      const response = await app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: { documentId } });
      return { statusCode: response.statusCode, jobId: (response.json() as { jobId?: string }).jobId ?? '', response };
    };
    const a = [await create(clientA), await create(clientA), await create(clientA)];
    for (const job of a) expect(job.statusCode).toBe(202);
    const fourth = await create(clientA);
    expect(fourth.statusCode).toBe(429);
    expect(fourth.response.json().error.code).toBe('TOO_MANY_REQUESTS');
    expect(fourth.response.headers['retry-after']).toBe('5');

    // Client A's backlog does not hold client B's job back: B runs while two of A's wait.
    const b = await create(clientB);
    expect(b.statusCode).toBe(202);
    await until(() => gateway.generateCalls.length === 2);
    const status = async (jobId: string): Promise<string> => (await app.inject({ method: 'GET', url: `/v1/jobs/${jobId}` })).json().status as string;
    expect(await status(b.jobId)).toBe('running');
    expect([await status(a[0]?.jobId ?? ''), await status(a[1]?.jobId ?? ''), await status(a[2]?.jobId ?? '')]).toEqual(['running', 'queued', 'queued']);
  });
});

describe('refusals held for REFUSAL_DELAY_MS (a client looping on 429s slows down)', () => {
  it('sends a 429 TOO_MANY_REQUESTS after the delay; a 503 SERVER_BUSY and other answers at once', async () => {
    const { app, gateway, releaseHold } = await start({
      MAX_INFLIGHT_GENERATIONS: '2',
      MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '1',
      REFUSAL_DELAY_MS: '400',
    });
    const generate = (headers: Record<string, string>) =>
      app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text: 'Photosynthesis.' } });
    const held = [generate(clientA), generate(clientB)];
    await until(() => gateway.generateCalls.length === 2);
    const started = performance.now();
    const refused = await generate(clientA);
    expect(refused.json().error.code).toBe('TOO_MANY_REQUESTS');
    expect(performance.now() - started).toBeGreaterThanOrEqual(390);
    // The instance full is not the client's doing: answered without the delay (were it held like a 429
    // with a 60 s delay, this would not come back within the test's time).
    const slow = await start({ MAX_INFLIGHT_GENERATIONS: '1', REFUSAL_DELAY_MS: '60000' });
    const first = slow.app.inject({ method: 'POST', url: '/v1/generate', headers: clientA, payload: { task: 'notes', text: 'One.' } });
    await until(() => slow.gateway.generateCalls.length === 1);
    const busy = await Promise.race([
      slow.app.inject({ method: 'POST', url: '/v1/generate', headers: clientC, payload: { task: 'notes', text: 'Two.' } }),
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 10_000)),
    ]);
    expect(busy?.json().error.code).toBe('SERVER_BUSY');
    const unknown = await Promise.race([
      slow.app.inject({ method: 'GET', url: '/v1/jobs/no-such-job' }),
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 10_000)),
    ]);
    expect(unknown?.json().error.code).toBe('JOB_NOT_FOUND');
    // A body declared over the limit is the client's doing too: held like a 429.
    const oversized = await start({ REFUSAL_DELAY_MS: '400' });
    const sent = performance.now();
    const tooLarge = await oversized.app.inject({
      method: 'POST',
      url: '/v1/generate',
      headers: { ...clientA, 'content-length': String(50 * 1024 * 1024) },
      payload: '{"task":"notes","text":"x"}',
    });
    expect(tooLarge.statusCode).toBe(413);
    expect(tooLarge.json().error.code).toBe('REQUEST_TOO_LARGE');
    expect(performance.now() - sent).toBeGreaterThanOrEqual(390);
    releaseHold();
    slow.releaseHold();
    await Promise.all([...held, first]);
  }, 30_000);
});

