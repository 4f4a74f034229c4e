/**
 * Per-client rates of uploads and job creations, and the refusals made before a body is
 * read. The rule, written out: a client (uploads: its remote address; jobs: its key headers) may make
 * RATE_LIMIT_UPLOADS uploads and RATE_LIMIT_JOBS job creations per RATE_LIMIT_WINDOW_SECONDS; past it
 * 429 TOO_MANY_REQUESTS with Retry-After (the seconds left in its window, 1..window) and the same number
 * in `retryAfterSeconds`; other clients are not touched.
 */
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import type { DocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { putTestDocument, staticGateway, testConfig } from '../http/support.js';

const apps: FastifyInstance[] = [];

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(env: NodeJS.ProcessEnv): Promise<{ app: FastifyInstance; store: DocumentStore }> {
  const store = createMemoryDocumentStore({ ttlSeconds: 60 });
  const app = await buildApp({ config: testConfig(env), gateway: staticGateway(), documentStore: store, processMetrics: false });
  apps.push(app);
  return { app, store };
}

async function multipart(bytes: Uint8Array): Promise<{ payload: Buffer; contentType: string }> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)], { type: 'application/pdf' }), 'a.pdf');
  const request = new Request('http://localhost/', { method: 'POST', body: form });
  return { payload: Buffer.from(await request.arrayBuffer()), contentType: request.headers.get('content-type') ?? '' };
}

function expectRateRefusal(response: Awaited<ReturnType<FastifyInstance['inject']>>, windowSeconds: number): void {
  expect(response.statusCode).toBe(429);
  const error = response.json().error;
  expect(error.code).toBe('TOO_MANY_REQUESTS');
  const retryAfter = Number(response.headers['retry-after']);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(windowSeconds);
  expect(error.retryAfterSeconds).toBe(retryAfter);
}

const clientA = { 'content-type': 'application/json', 'x-gpt-key': 'client-a-gpt-key-000001' };
const clientB = { 'content-type': 'application/json', 'x-claude-key': 'client-b-claude-key-0001' };

describe('per-client rate of uploads (RATE_LIMIT_UPLOADS)', () => {
  it('refuses the upload past the rate with 429 before reading it; another address still uploads', async () => {
    const { app } = await start({ RATE_LIMIT_UPLOADS: '2', RATE_LIMIT_WINDOW_SECONDS: '30' });
    const pdf = await multipart(await englishTextPdf(1));
    const upload = (remoteAddress: string, payload: Buffer = pdf.payload) =>
      app.inject({ method: 'POST', url: '/v1/documents', remoteAddress, headers: { 'content-type': pdf.contentType }, payload });
    expect((await upload('10.0.0.1')).statusCode).toBe(201);
    expect((await upload('10.0.0.1')).statusCode).toBe(201);
    // The third from the same address: refused before the body is read (bytes that are no PDF at all
    // would otherwise be 415).
    const third = await upload('10.0.0.1', Buffer.from('not a multipart body'));
    expectRateRefusal(third, 30);
    expect(third.json().error.message).toContain('RATE_LIMIT_UPLOADS');
    // Key headers do not make a new client for uploads: they are counted by address.
    const withKey = await app.inject({
      method: 'POST',
      url: '/v1/documents',
      remoteAddress: '10.0.0.1',
      headers: { 'content-type': pdf.contentType, 'x-gpt-key': 'invented-key-0000000001' },
      payload: pdf.payload,
    });
    expectRateRefusal(withKey, 30);
    // Nothing lost for the others: another address uploads.
    const other = await upload('10.0.0.2');
    expect(other.statusCode).toBe(201);
    expect(other.json()).toMatchObject({ pageCount: 1 });
  });

  it('RATE_LIMIT_UPLOADS=0 turns the limit off', async () => {
    const { app } = await start({ RATE_LIMIT_UPLOADS: '0' });
    const pdf = await multipart(await englishTextPdf(1));
    for (let index = 0; index < 4; index += 1) {
      const response = await app.inject({ method: 'POST', url: '/v1/documents', headers: { 'content-type': pdf.contentType }, payload: pdf.payload });
      expect(response.statusCode).toBe(201);
    }
  });
});

describe('per-client rate of job creations (RATE_LIMIT_JOBS)', () => {
  it('refuses the job past the rate with 429 and Retry-After; another client (keys) still starts jobs', async () => {
    const { app, store } = await start({ RATE_LIMIT_JOBS: '2', RATE_LIMIT_WINDOW_SECONDS: '45', JOB_MAX_JOBS_PER_CLIENT: '10' });
    await putTestDocument(store);
    const create = (headers: Record<string, string>, payload: unknown = { documentId: 'doc-1' }) =>
      app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: JSON.stringify(payload) });
    const accepted = [await create(clientA), await create(clientA)];
    for (const response of accepted) expect(response.statusCode).toBe(202);
    // Past the rate, even a body that breaks the schema is refused by the rate first.
    const third = await create(clientA, { documentId: 'doc-1', extra: true });
    expectRateRefusal(third, 45);
    expect(third.json().error.message).toContain('RATE_LIMIT_JOBS');
    const b = await create(clientB);
    expect(b.statusCode).toBe(202);
    // The accepted jobs are all there (nothing lost to the refusal).
    for (const response of accepted) {
      const view = await app.inject({ method: 'GET', url: `/v1/jobs/${response.json().jobId as string}` });
      expect(view.statusCode).toBe(200);
    }
  });
});

describe('POST /v1/generate: a body declared over the limit (Fastify checks content-length before reading)', () => {
  it('is answered 413 REQUEST_TOO_LARGE on its headers alone, and the connection is closed', async () => {
    const { app } = await start({ MAX_TEXT_CHARS: '1000' });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    // 1000 × 6 bytes + 1 MiB is the limit; the header claims more and no byte of the body is sent.
    const answer = await new Promise<{ text: string; closed: boolean }>((resolve, reject) => {
      const socket = connect(address.port, '127.0.0.1');
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('latin1');
      });
      socket.on('close', () => resolve({ text, closed: true }));
      socket.on('error', reject);
      socket.write(
        'POST /v1/generate HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\nx-gpt-key: junk-gpt-key-000000001\r\ncontent-length: 5000000\r\n\r\n',
      );
      setTimeout(() => {
        socket.destroy();
        resolve({ text, closed: false });
      }, 10_000).unref();
    });
    expect(answer.closed).toBe(true);
    expect(answer.text).toMatch(/^HTTP\/1\.1 413 /u);
    expect(answer.text.toLowerCase()).toContain('connection: close');
    expect(answer.text).toContain('"code":"REQUEST_TOO_LARGE"');
  });
});
