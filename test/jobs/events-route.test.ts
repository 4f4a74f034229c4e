/**
 * The SSE route's housekeeping, on the jobs plugin alone (so the test can read its registry): heartbeat
 * comments, and the listener dropped when the client goes away while the job goes on.
 */
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/actors/index.js';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import type { DocumentStore } from '../../src/documents/index.js';
import { startEmulator } from '../../src/emulator/index.js';
import type { Emulator } from '../../src/emulator/index.js';
import { errorHandler } from '../../src/http/error-handler.js';
import { jobsRoutes } from '../../src/http/routes/jobs.js';
import type { JobRegistry } from '../../src/jobs/index.js';
import { gatewayOnEmulator, openEvents, postJson, request } from './support.js';

let emulator: Emulator;
let gateway: Gateway;
let documents: DocumentStore;
let app: FastifyInstance;
let url: string;
let registry: JobRegistry | undefined;

beforeAll(async () => {
  emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
  gateway = gatewayOnEmulator(emulator);
  documents = createMemoryDocumentStore({ ttlSeconds: 60 });
  await documents.put({
    documentId: 'doc-1',
    sha256: 'sha-doc-1',
    fileName: 'doc.pdf',
    pageCount: 1,
    pagesUsed: 1,
    wordCount: 20,
    charCount: 120,
    warnings: [],
    text: 'Photosynthesis converts light energy into chemical energy stored in glucose. Chlorophyll absorbs red and blue light.',
    createdAt: Date.now(),
  });
  app = Fastify().withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler(errorHandler);
  await app.register(jobsRoutes, {
    gateway,
    documentStore: documents,
    defaultOrder: ['claude', 'gpt', 'timelygpt'],
    fallbackMode: 'retry-then-fallback',
    jobs: { ttlSeconds: 60, concurrency: 2, maxJobs: 10, partBudgetTokens: 6000 },
    heartbeatMs: 20,
    onRegistry: (created) => {
      registry = created;
    },
  });
  url = await app.listen({ port: 0, host: '127.0.0.1' });
});

afterAll(async () => {
  emulator.resetFaults();
  await app.close();
  await gateway.stop();
  await emulator.close();
});

describe('GET /v1/jobs/:id/events', () => {
  it('sends heartbeat comments, and drops its listener when the client goes away', async () => {
    emulator.setFault({ provider: 'claude', fault: 'slow', ms: 3_000 });
    const created = await postJson(
      `${url}/v1/jobs`,
      { documentId: 'doc-1', options: { mcqCount: 1, fillCount: 1 } },
      { 'x-claude-key': 'test-claude-key-0001-events' },
    );
    expect(created.status, created.text).toBe(202);
    const jobId = created.body.jobId as string;
    const stream = await openEvents(`${url}/v1/jobs/${jobId}/events`);
    await stream.waitFor((event) => event.event === 'progress');
    expect(registry?.counts().subscribers).toBe(1);
    // Heartbeats are comments: they reach the client but are no events.
    for (;;) {
      if (stream.raw().includes(': heartbeat\n\n')) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(stream.raw()).not.toContain('test-claude-key');
    stream.close();
    for (;;) {
      if (registry?.counts().subscribers === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // The job goes on without its client.
    expect((await request(`${url}/v1/jobs/${jobId}`)).body.status).toBe('running');
    const cancelled = await request(`${url}/v1/jobs/${jobId}`, { method: 'DELETE' });
    expect(cancelled.body.status).toBe('cancelled');
  });

  it('ends every open stream when the app closes (the jobs are interrupted, not cancelled)', async () => {
    emulator.setFault({ provider: 'claude', fault: 'slow', ms: 3_000 });
    const other = Fastify().withTypeProvider<ZodTypeProvider>();
    other.setValidatorCompiler(validatorCompiler);
    other.setSerializerCompiler(serializerCompiler);
    await other.register(jobsRoutes, {
      gateway,
      documentStore: documents,
      defaultOrder: ['claude'],
      fallbackMode: 'retry-then-fallback',
      jobs: { ttlSeconds: 60, concurrency: 1, maxJobs: 10, partBudgetTokens: 6000 },
    });
    const otherUrl = await other.listen({ port: 0, host: '127.0.0.1' });
    const created = await postJson(
      `${otherUrl}/v1/jobs`,
      { documentId: 'doc-1' },
      { 'x-claude-key': 'test-claude-key-0001-events' },
    );
    const stream = await openEvents(`${otherUrl}/v1/jobs/${created.body.jobId as string}/events`);
    await stream.waitFor((event) => event.event === 'progress');
    await other.close();
    const events = await stream.events;
    expect(events.at(-1)).toEqual({ event: 'done', data: '{"status":"interrupted"}' });
  });
});
