/**
 * Deeply nested JSON: a 2 MB body of `[[[[…` would stall the event loop in JSON.parse on every
 * request. A body nested deeper than 32 levels is refused (400 INVALID_REQUEST, saying so) before it is
 * parsed; brackets inside strings do not count. Each route's body is capped to what it needs: 16 KiB for
 * job creation and breaker control, MAX_TEXT_CHARS and the longest notes answer (64 Ki characters),
 * 6 bytes each, plus 4 KiB for generate.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig, type StaticGateway } from '../http/support.js';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(env: NodeJS.ProcessEnv = {}): Promise<{ app: FastifyInstance; gateway: StaticGateway }> {
  const gateway = staticGateway();
  const app = await buildApp({
    config: testConfig({ REFUSAL_DELAY_MS: '0', ADMIN_TOKEN: 'test-admin-token-0001', ...env }),
    gateway,
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
  });
  apps.push(app);
  return { app, gateway };
}

const post = (app: FastifyInstance, url: string, payload: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json', 'x-gpt-key': 'test-gpt-key-0001', ...headers } });

describe('JSON nesting depth', () => {
  it('refuses a body nested 33 deep, and 2 MB of `[`, before parsing, with a message that says so', async () => {
    const { app, gateway } = await start();
    const deep = `{"task":"notes","text":"x","options":{"notes":${'['.repeat(31)}${']'.repeat(31)}}}`;
    const answer = await post(app, '/v1/generate', deep);
    expect(answer.statusCode).toBe(400);
    expect(answer.json().error).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(answer.json().error.message).toContain('deeper than 32');
    const flood = await post(app, '/v1/generate', '['.repeat(1_000_000));
    expect(flood.statusCode).toBe(400);
    expect(flood.json().error.message).toContain('deeper than 32');
    expect(gateway.generateCalls).toHaveLength(0);
  });

  it('lets 32 levels through to the schema, and ignores brackets inside strings', async () => {
    const { app, gateway } = await start();
    const atLimit = `{"task":"notes","text":"x","options":{"notes":${'['.repeat(30)}${']'.repeat(30)}}}`;
    const answer = await post(app, '/v1/generate', atLimit);
    expect(answer.statusCode).toBe(400);
    expect(answer.json().error.message).not.toContain('deeper');
    const quoted = JSON.stringify({ task: 'notes', text: `Brackets in prose: ${'[{'.repeat(5000)} and an escaped quote \\" [[[` });
    expect((await post(app, '/v1/generate', quoted)).statusCode).toBe(503);
    expect(gateway.generateCalls).toHaveLength(1);
  });
});

describe('JSON body size per route', () => {
  it('caps job creation and breaker control at 16 KiB', async () => {
    const { app } = await start();
    const padding = ' '.repeat(16 * 1024);
    const job = await post(app, '/v1/jobs', `{"documentId":"d"}${padding}`);
    expect(job.statusCode).toBe(413);
    expect(job.json().error.code).toBe('REQUEST_TOO_LARGE');
    const breaker = await post(app, '/v1/providers/gpt/breaker', `{"action":"reset"}${padding}`, { authorization: 'Bearer test-admin-token-0001' });
    expect(breaker.statusCode).toBe(413);
    // Just under the cap, the same bodies reach their routes.
    expect((await post(app, '/v1/providers/gpt/breaker', `{"action":"reset"}${' '.repeat(1024)}`, { authorization: 'Bearer test-admin-token-0001' })).statusCode).toBe(200);
  });

  it('caps generate at (MAX_TEXT_CHARS + 65536) × 6 + 4096 bytes', async () => {
    const { app } = await start({ MAX_TEXT_CHARS: '1000' });
    const limit = (1000 + 65_536) * 6 + 4096;
    const over = JSON.stringify({ task: 'notes', text: 'x' }).replace('}', `${' '.repeat(limit)}}`);
    expect((await post(app, '/v1/generate', over)).statusCode).toBe(413);
    const under = JSON.stringify({ task: 'notes', text: 'x' }).replace('}', `${' '.repeat(limit - 100)}}`);
    expect((await post(app, '/v1/generate', under)).statusCode).toBe(503);
  });
});
