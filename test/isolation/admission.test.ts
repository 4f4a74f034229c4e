import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import type { DocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig } from '../http/support.js';
import type { StaticGateway } from '../http/support.js';

const apps: FastifyInstance[] = [];

interface Started {
  app: FastifyInstance;
  gateway: StaticGateway;
  store: DocumentStore;
  releaseHold: () => void;
}

/** An app whose gateway holds every provider call until `releaseHold()` (then fails it: 503). */
async function start(env: NodeJS.ProcessEnv): Promise<Started> {
  const gateway = staticGateway();
  let releaseHold = (): void => undefined;
  gateway.hold = new Promise<void>((resolve) => {
    releaseHold = resolve;
  });
  const store = createMemoryDocumentStore({ ttlSeconds: 60 });
  const app = await buildApp({ config: testConfig(env), gateway, documentStore: store, processMetrics: false });
  apps.push(app);
  return { app, gateway, store, releaseHold };
}

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

describe('admission of POST /v1/generate (issue 12)', () => {
  it('gives each client a share of the in-flight slots and the instance a bound; every refusal has Retry-After', async () => {
    const { app, gateway, releaseHold } = await start({
      MAX_INFLIGHT_GENERATIONS: '3',
      MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '2',
      ADMISSION_RETRY_AFTER_SECONDS: '7',
    });
    const generate = (headers: Record<string, string>, n: number) =>
      app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text: `Photosynthesis, request ${n}.` } });
    const held = [generate(clientA, 1), generate(clientA, 2)];
    await until(() => gateway.generateCalls.length === 2);

    // A third from client A: over its share of 2.
    const third = await generate(clientA, 3);
    expect(third.statusCode).toBe(429);
    expect(third.json().error.code).toBe('TOO_MANY_REQUESTS');
    expect(third.headers['retry-after']).toBe('7');
    expect(third.json().error.retryAfterSeconds).toBe(7);

    // The same keys in another header order are the same client; another client still gets in.
    held.push(generate(clientB, 4));
    await until(() => gateway.generateCalls.length === 3);

    // The instance is full (3): client C is refused with 503 SERVER_BUSY.
    const full = await generate(clientC, 5);
    expect(full.statusCode).toBe(503);
    expect(full.json().error.code).toBe('SERVER_BUSY');
    expect(full.headers['retry-after']).toBe('7');
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

describe('admission of POST /v1/jobs (issue 12)', () => {
  async function withDocument(store: DocumentStore): Promise<string> {
    await store.put({
      documentId: 'doc-1',
      sha256: 'f'.repeat(64),
      fileName: 'a.pdf',
      pageCount: 1,
      pagesUsed: 1,
      wordCount: 5,
      charCount: 40,
      warnings: [],
      text: 'Photosynthesis turns light into glucose.',
      createdAt: Date.now(),
    });
    return 'doc-1';
  }

  it('answers a full instance with 503 TOO_MANY_JOBS and Retry-After', async () => {
    const { app, store } = await start({ JOB_MAX_JOBS: '2', JOB_MAX_JOBS_PER_CLIENT: '5', ADMISSION_RETRY_AFTER_SECONDS: '9' });
    const documentId = await withDocument(store);
    const create = (headers: Record<string, string>) => app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: { documentId } });
    expect((await create(clientA)).statusCode).toBe(202);
    expect((await create(clientB)).statusCode).toBe(202);
    const refused = await create(clientC);
    expect(refused.statusCode).toBe(503);
    expect(refused.json().error.code).toBe('TOO_MANY_JOBS');
    expect(refused.headers['retry-after']).toBe('9');
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
