/**
 * Event streams are bounded per client and per instance: each holds a socket and up to
 * its 64 KiB buffer, so one client opening hundreds would take them from everyone. Real sockets.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig } from '../http/support.js';

const apps: FastifyInstance[] = [];
const controllers: AbortController[] = [];

afterEach(async () => {
  for (const controller of controllers.splice(0)) controller.abort();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function listen(env: NodeJS.ProcessEnv): Promise<string> {
  const app = await buildApp({ config: testConfig(env), gateway: staticGateway(), documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }), processMetrics: false });
  apps.push(app);
  return app.listen({ port: 0, host: '127.0.0.1' });
}

/** Opens the providers stream; a stream that is refused answers JSON, read whole. */
async function open(url: string): Promise<{ status: number; retryAfter: string | null; body: string; close: () => void }> {
  const controller = new AbortController();
  controllers.push(controller);
  const response = await fetch(`${url}/v1/providers/events`, { signal: controller.signal });
  const body = response.status === 200 ? '' : await response.text();
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body, close: () => controller.abort() };
}

describe('event streams per client and per instance (SSE_MAX_STREAMS_PER_CLIENT, SSE_MAX_STREAMS)', () => {
  it('refuses a client its streams past its share with 429 TOO_MANY_REQUESTS and Retry-After, and frees a slot when a stream closes', async () => {
    const url = await listen({ SSE_MAX_STREAMS_PER_CLIENT: '2', SSE_MAX_STREAMS: '100' });
    const first = await open(url);
    const second = await open(url);
    expect([first.status, second.status]).toEqual([200, 200]);
    const third = await open(url);
    expect(third.status).toBe(429);
    expect(third.retryAfter).toBe('5');
    const body = JSON.parse(third.body) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('TOO_MANY_REQUESTS');
    expect(body.error.message).toContain('SSE_MAX_STREAMS_PER_CLIENT');
    first.close();
    // The server sees the close and gives the slot back.
    let again = await open(url);
    for (let turn = 0; turn < 100 && again.status !== 200; turn += 1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      again = await open(url);
    }
    expect(again.status).toBe(200);
  });

  it('refuses every client past the instance bound with 503 SERVER_BUSY and Retry-After', async () => {
    const url = await listen({ SSE_MAX_STREAMS_PER_CLIENT: '10', SSE_MAX_STREAMS: '2' });
    expect((await open(url)).status).toBe(200);
    expect((await open(url)).status).toBe(200);
    const refused = await open(url);
    expect(refused.status).toBe(503);
    expect(refused.retryAfter).toBe('5');
    expect((JSON.parse(refused.body) as { error: { code: string } }).error.code).toBe('SERVER_BUSY');
    // Requests other than streams are served as before.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });

  it('reads the bounds from the environment: 8 per client and 1000 per instance by default', () => {
    const defaults = testConfig({}).server;
    expect([defaults.sseMaxStreamsPerClient, defaults.sseMaxStreams]).toEqual([8, 1000]);
  });
});
