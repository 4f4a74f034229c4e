import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { flateBombPdf, lyingPageTreePdf, nestedFlateBombPdf, sharedContentStreamPdf } from '../fixtures/pdf/hostile.js';
import { staticGateway, testConfig, withLimits } from '../http/support.js';
import type { LimitOverrides } from '../http/support.js';

const apps: FastifyInstance[] = [];

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(env: NodeJS.ProcessEnv, limits: LimitOverrides = {}): Promise<FastifyInstance> {
  const store = createMemoryDocumentStore({ ttlSeconds: 60 });
  const app = await buildApp({ config: withLimits(testConfig(env), limits), gateway: staticGateway(), documentStore: store, processMetrics: false });
  apps.push(app);
  return app;
}

async function upload(app: FastifyInstance, bytes: Uint8Array, fileName: string) {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)], { type: 'application/pdf' }), fileName);
  const request = new Request('http://localhost/', { method: 'POST', body: form });
  return app.inject({
    method: 'POST',
    url: '/v1/documents',
    payload: Buffer.from(await request.arrayBuffer()),
    headers: { 'content-type': request.headers.get('content-type') ?? '' },
  });
}

describe('hostile PDFs through POST /v1/documents', () => {
  it('each hostile PDF gets 422 PDF_TOO_COMPLEX naming its limit, and the uploads beside it all succeed', async () => {
    // Real deadline (worker threads run on their own clock): 5 s is far above a 3-page PDF (~0.1 s
    // warm) and far below the shared-content-stream PDF (~25 s).
    const app = await start({ PDF_WORKERS: '2', PDF_TIMEOUT_MS: '5000' });
    const benign = await englishTextPdf(3);
    const [slow, bomb, nested, lying, ...beside] = await Promise.all([
      upload(app, sharedContentStreamPdf(50, 150_000), 'slow.pdf'),
      upload(app, await flateBombPdf(2 ** 30), 'bomb.pdf'),
      upload(app, await nestedFlateBombPdf(2 ** 28), 'nested-bomb.pdf'),
      upload(app, lyingPageTreePdf(2 ** 30), 'lying-tree.pdf'),
      upload(app, benign, 'a.pdf'),
      upload(app, benign, 'b.pdf'),
      upload(app, benign, 'c.pdf'),
    ]);
    // One contract code (docs/api.md: 422 PDF_TOO_COMPLEX), the limit each broke named.
    expect([slow.statusCode, slow.json().error.code, slow.json().error.limit]).toEqual([422, 'PDF_TOO_COMPLEX', 'time']);
    expect([bomb.statusCode, bomb.json().error.code, bomb.json().error.limit]).toEqual([422, 'PDF_TOO_COMPLEX', 'decompressed_bytes']);
    expect([nested.statusCode, nested.json().error.code, nested.json().error.limit]).toEqual([422, 'PDF_TOO_COMPLEX', 'decompressed_bytes']);
    expect([lying.statusCode, lying.json().error.code, lying.json().error.limit]).toEqual([422, 'PDF_TOO_COMPLEX', 'pages']);
    expect(lying.json().error.message).toMatch(/declares 1073741824 pages \(it holds 2 page objects\)/);
    for (const response of beside) {
      expect(response.statusCode).toBe(201);
      expect(response.json()).toMatchObject({ pageCount: 3, pagesUsed: 3 });
    }
  }, 180_000);

  it('answers 503 PDF_EXTRACTOR_BUSY with Retry-After when every worker is busy and the queue is full', async () => {
    // No upload may wait: the second is refused while the first holds the one worker.
    const app = await start({ PDF_WORKERS: '1', PDF_TIMEOUT_MS: '3000' }, { pdf: { queueMax: 0 } });
    const slow = sharedContentStreamPdf(50, 150_000);
    const answers = await Promise.all([upload(app, slow, 'one.pdf'), upload(app, slow, 'two.pdf')]);
    const busy = answers.find((response) => response.statusCode === 503);
    const stopped = answers.find((response) => response.statusCode !== 503);
    expect(busy?.json().error.code).toBe('PDF_EXTRACTOR_BUSY');
    expect(busy?.headers['retry-after']).toBe('5');
    expect([stopped?.statusCode, stopped?.json().error.code, stopped?.json().error.limit]).toEqual([422, 'PDF_TOO_COMPLEX', 'time']);
  }, 120_000);
});
