/**
 * An upload the disk refuses (JOBS_DIR full; the error injected through the file store's own `writeFile`, so
 * the test runs as any user) is 503 `STORAGE_UNAVAILABLE` with Retry-After, not 500; the failure is logged
 * once with its cause, `/readyz` says `degraded` naming it, `/metrics` counts it; a write that succeeds
 * again clears it.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, expect, it } from 'vitest';
import { createFileDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { createStorageHealth } from '../../src/http/storage-health.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { logCapture, staticGateway, testConfig } from './support.js';

const cleanUps: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanUp of cleanUps.splice(0).reverse()) await cleanUp();
});

async function upload(app: FastifyInstance): Promise<{ status: number; body: Record<string, unknown>; retryAfter: unknown }> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(await englishTextPdf(1))], { type: 'application/pdf' }), 'cells.pdf');
  const request = new Request('http://local/', { method: 'POST', body: form });
  const response = await app.inject({
    method: 'POST',
    url: '/v1/documents',
    headers: { 'content-type': request.headers.get('content-type') ?? '' },
    payload: Buffer.from(await request.arrayBuffer()),
  });
  return { status: response.statusCode, body: response.json(), retryAfter: response.headers['retry-after'] };
}

it('an upload the disk refuses is 503 STORAGE_UNAVAILABLE, logged once, in /readyz and /metrics until a write succeeds', async () => {
  const directory = await mkdtemp(join(tmpdir(), 'study-helper-upload-full-'));
  cleanUps.push(() => rm(directory, { recursive: true, force: true }));
  let full = true;
  const storageHealth = createStorageHealth();
  const documentStore = createFileDocumentStore({
    directory,
    ttlSeconds: 60,
    onWrite: (error) => storageHealth.report('documents', error),
    writeFile: async (path, text) => {
      if (full) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      await writeFile(path, text);
    },
  });
  const capture = logCapture();
  const app = await buildApp({
    config: testConfig({ RATE_LIMIT_UPLOADS: '100' }),
    gateway: staticGateway(),
    documentStore,
    storageHealth,
    processMetrics: false,
    log: { level: 'info', stream: capture.stream },
  });
  cleanUps.push(() => app.close());

  for (let attempt = 0; attempt < 2; attempt += 1) {
    const refused = await upload(app);
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ error: { code: 'STORAGE_UNAVAILABLE' } });
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);
  }
  const ready = (await app.inject({ method: 'GET', url: '/readyz' })).json();
  expect(ready).toEqual({
    status: 'degraded',
    store: 'memory',
    storeReachable: true,
    failures: [{ store: 'documents', reason: 'ENOSPC: no space left on device, write' }],
  });
  // Two failures, one log line naming the cause.
  expect(capture.lines.filter((line) => line.includes('a documents write failed'))).toHaveLength(1);
  expect(capture.lines.find((line) => line.includes('a documents write failed'))).toContain('ENOSPC');
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  expect(metrics).toContain('studyhelper_storage_write_failures_total{store="documents"} 2');
  expect(metrics).toContain('studyhelper_storage_failing{store="documents"} 1');

  full = false;
  expect((await upload(app)).status).toBe(201);
  expect((await app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready', store: 'memory', storeReachable: true });
  expect(capture.lines.some((line) => line.includes('documents writes succeed again'))).toBe(true);
  expect((await app.inject({ method: 'GET', url: '/metrics' })).body).toContain('studyhelper_storage_failing{store="documents"} 0');
});
