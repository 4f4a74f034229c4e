import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig, type StaticGateway } from './support.js';

/**
 * `POST /v1/generate` hands its run a signal that fires when the client goes away. The route reuses a
 * request's controller (src/actors/abort-controllers.ts) only when it never fired and the run let go of
 * its signal: a later request's run never sees an earlier client's abort.
 */
const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(
    apps.splice(0).map((app) => {
      app.server.closeAllConnections();
      return app.close();
    }),
  );
});

async function start(): Promise<{ app: FastifyInstance; gateway: StaticGateway; url: string }> {
  const gateway = staticGateway();
  const app = await buildApp({
    config: testConfig(),
    gateway,
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
  });
  apps.push(app);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, gateway, url };
}

const payload = JSON.stringify({
  task: 'notes',
  text: 'Photosynthesis converts light energy into chemical energy.',
});
const headers = { 'content-type': 'application/json', 'x-gpt-key': 'test-gpt-key-signal-0001' };

describe("a generation's abort signal", () => {
  it('is the signal of a finished request again when that one never fired', async () => {
    const { app, gateway } = await start();
    for (let index = 0; index < 2; index += 1)
      await app.inject({ method: 'POST', url: '/v1/generate', headers, payload });
    const [first, second] = gateway.generateCalls.map((input) => input.signal);
    expect(first).toBeDefined();
    expect(second).toBe(first);
    expect(second?.aborted).toBe(false);
  });

  it("fires when the client goes away, and is never handed to a later request's run", async () => {
    const { app, gateway, url } = await start();
    let release: () => void = () => undefined;
    gateway.hold = new Promise((resolve) => {
      release = resolve;
    });
    const client = new AbortController();
    const gone = fetch(`${url}/v1/generate`, {
      method: 'POST',
      headers,
      body: payload,
      signal: client.signal,
    }).catch(() => undefined);
    await expect.poll(() => gateway.generateCalls.length).toBe(1);
    client.abort();
    await gone;
    const abandoned = gateway.generateCalls[0]?.signal;
    await expect.poll(() => abandoned?.aborted).toBe(true);
    release();
    gateway.hold = undefined;
    await new Promise((resolve) => setTimeout(resolve, 50));
    await app.inject({ method: 'POST', url: '/v1/generate', headers, payload });
    const later = gateway.generateCalls[1]?.signal;
    expect(later).toBeDefined();
    expect(later).not.toBe(abandoned);
    expect(later?.aborted).toBe(false);
  });
});
