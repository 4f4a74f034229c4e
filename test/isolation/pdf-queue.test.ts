/**
 * The PDF wait queue by address: 18 slow PDFs from one address would fill the one worker
 * and its 16-slot queue, and every other address would get 503 PDF_EXTRACTOR_BUSY for a minute. So each
 * address (IPv6 by /64) holds a share of the queue and addresses are served in turn.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { sharedContentStreamPdf } from '../fixtures/pdf/hostile.js';
import { staticGateway, testConfig } from '../http/support.js';

const apps: FastifyInstance[] = [];

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function upload(app: FastifyInstance, bytes: Uint8Array, remoteAddress: string) {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)], { type: 'application/pdf' }), 'upload.pdf');
  const request = new Request('http://localhost/', { method: 'POST', body: form });
  const response = await app.inject({
    method: 'POST',
    url: '/v1/documents',
    remoteAddress,
    payload: Buffer.from(await request.arrayBuffer()),
    headers: { 'content-type': request.headers.get('content-type') ?? '' },
  });
  return { status: response.statusCode, code: (response.json() as { error?: { code: string } }).error?.code, at: performance.now() };
}

describe('the PDF queue is shared by address', () => {
  for (const [family, attackerAddress] of [
    ['IPv4', (_: number) => '203.0.113.7'],
    // Eighteen addresses of one /64: one share.
    ['IPv6, one /64', (index: number) => `2001:db8:7:7::${(index + 1).toString(16)}`],
  ] as const) {
    it(`serves another address's upload while one address (${family}) floods the queue with 18 slow PDFs`, async () => {
      const app = await buildApp({
        // One worker: 16 uploads may wait for it.
        config: testConfig({ PDF_WORKERS: '1', PDF_TIMEOUT_MS: '120000', RATE_LIMIT_UPLOADS: '1000' }),
        gateway: staticGateway(),
        documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
        processMetrics: false,
      });
      apps.push(app);
      // Each takes pdf.js a second or more and succeeds: the worker is busy, never killed.
      const slow = sharedContentStreamPdf(20, 2_000);
      const benign = await englishTextPdf(2);
      let refusedSoFar = 0;
      let firstRefusal!: () => void;
      const refused = new Promise<void>((resolve) => (firstRefusal = resolve));
      const flood = Array.from({ length: 18 }, (_, index) =>
        upload(app, slow, attackerAddress(index)).then((answer) => {
          if (answer.status === 503) {
            refusedSoFar += 1;
            firstRefusal();
          }
          return answer;
        }),
      );
      // Once the flood is refused, the queue holds all of it that it will hold.
      await refused;
      const victim = await upload(app, benign, '198.51.100.2');
      const answers = await Promise.all(flood);
      expect(victim.status).toBe(201);
      // Round robin: the victim waits for at most the flood's running upload and its next one, not for
      // all it has queued: some of the flood's accepted uploads finish after the victim's.
      const accepted = answers.filter((answer) => answer.status === 201);
      expect(accepted.filter((answer) => answer.at > victim.at).length).toBeGreaterThanOrEqual(1);
      // The flood had the worker and the whole queue (1 + 16; the 18th refused); the victim took the
      // place of its newest upload, which was refused instead.
      expect(accepted).toHaveLength(16);
      expect(refusedSoFar).toBe(2);
      expect(answers.filter((answer) => answer.status === 503).every((answer) => answer.code === 'PDF_EXTRACTOR_BUSY')).toBe(true);
    }, 300_000);
  }
});
