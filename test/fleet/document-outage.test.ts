/**
 * A document whose store is unreachable is not "not found": two instances on a redis-server of the
 * test's own (started on a free port, stopped mid-test; the shared 6379 server is never touched).
 * While it is down, a document the instance holds no copy of answers 503 DOCUMENT_STORE_UNAVAILABLE
 * with Retry-After on /v1/generate and /v1/jobs; once Redis is back (empty: no persistence), an id it
 * does not hold is 404 DOCUMENT_NOT_FOUND again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { postJson, request, startHarness, type Harness, type HttpResult } from '../http/blackbox-support.js';
import { ownRedis, uniquePrefix, type OwnRedis } from './support.js';

const keys = { 'x-claude-key': 'test-claude-key-fleet-docs-0001' } as const;
const harnesses: Harness[] = [];
const servers: OwnRedis[] = [];

afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((harness) => harness.close()));
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

async function generateFrom(harness: Harness, documentId: string): Promise<HttpResult> {
  return postJson(
    `${harness.url}/v1/generate`,
    { task: 'notes', documentId, providers: ['claude'], options: { lang: 'en' } },
    keys,
  );
}

/** Asks until the answer is not `status` any more (Redis loss is seen within a command timeout). */
async function untilNot(ask: () => Promise<HttpResult>, status: number): Promise<HttpResult> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const result = await ask();
    if (result.status !== status || Date.now() > deadline) return result;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('documents while the shared store is unreachable', () => {
  it('503 DOCUMENT_STORE_UNAVAILABLE with Retry-After, not 404; 404 again once Redis is back', async () => {
    const redis = await ownRedis();
    servers.push(redis);
    await redis.start();
    const env = { REDIS_URL: redis.url, REDIS_PREFIX: uniquePrefix('docs-outage'), LOG_LEVEL: 'warn' };
    const [a, b] = await Promise.all([startHarness(env), startHarness(env)]);
    harnesses.push(a, b);

    const form = new FormData();
    form.append(
      'file',
      new Blob([new Uint8Array(await englishTextPdf(1))], { type: 'application/pdf' }),
      'cells.pdf',
    );
    const upload = await request(`${a.url}/v1/documents`, { method: 'POST', body: form });
    expect(upload.status, upload.text).toBe(201);
    const documentId = upload.body.documentId as string;
    // Shared: B reads what A stored.
    expect((await generateFrom(b, documentId)).status).toBe(200);

    await redis.stop();
    const during = await untilNot(() => generateFrom(b, documentId), 200);
    expect(during.status, during.text).toBe(503);
    expect(during.body.error.code).toBe('DOCUMENT_STORE_UNAVAILABLE');
    expect(Number(during.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(during.body.error.retryAfterSeconds).toBe(Number(during.headers.get('retry-after')));
    // The instance that took the upload kept no copy (it reached Redis): the same answer there.
    expect((await generateFrom(a, documentId)).body.error.code).toBe('DOCUMENT_STORE_UNAVAILABLE');
    const job = await postJson(`${b.url}/v1/jobs`, { documentId, providers: ['claude'] }, keys);
    expect(job.status, job.text).toBe(503);
    expect(job.body.error.code).toBe('DOCUMENT_STORE_UNAVAILABLE');
    expect(job.headers.get('retry-after')).not.toBeNull();
    // No provider was called for any of it.
    expect(b.emulator.stats().claude.calls).toBe(1);

    // Back, and empty: the document is gone for real now.
    await redis.start();
    const after = await untilNot(() => generateFrom(b, documentId), 503);
    expect(after.status, after.text).toBe(404);
    expect(after.body.error.code).toBe('DOCUMENT_NOT_FOUND');
  });
});
