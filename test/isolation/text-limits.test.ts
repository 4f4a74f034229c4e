import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig } from '../http/support.js';
import type { StaticGateway } from '../http/support.js';

const apps: FastifyInstance[] = [];

async function start(env: NodeJS.ProcessEnv = {}): Promise<{ app: FastifyInstance; gateway: StaticGateway }> {
  const gateway = staticGateway();
  const app = await buildApp({ config: testConfig(env), gateway, documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }), processMetrics: false });
  apps.push(app);
  return { app, gateway };
}

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

const headers = { 'content-type': 'application/json', 'x-gpt-key': 'junk-gpt-key-000000001' };

describe('text limits on POST /v1/generate', () => {
  it('answers a text over MAX_TEXT_CHARS with 413 TEXT_TOO_LONG and calls no provider', async () => {
    const { app, gateway } = await start({ MAX_TEXT_CHARS: '1000' });
    const response = await app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text: 'a'.repeat(1001) } });
    expect(response.statusCode).toBe(413);
    expect(response.json().error.code).toBe('TEXT_TOO_LONG');
    expect(response.json().error.message).toContain('1000');
    expect(gateway.generateCalls).toHaveLength(0);
    // At the limit it is accepted (and goes to the gateway).
    const atLimit = await app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text: 'a'.repeat(1000) } });
    expect(atLimit.statusCode).toBe(503);
    expect(gateway.generateCalls).toHaveLength(1);
  });

  it('defaults MAX_TEXT_CHARS to 200 000: a 100 KB unspaced text is taken, a 10 MB one is cut before it is parsed', async () => {
    const { app, gateway } = await start();
    const unspaced = await app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text: 'a'.repeat(100_000) } });
    // 100 000 `a` are 12 500 tokens: two parts of at most 6000 tokens plus a merge would follow; the
    // static gateway fails the first call, so exactly the calls of the first wave are made.
    expect(unspaced.statusCode).toBe(503);
    expect(gateway.generateCalls.length).toBeGreaterThan(0);
    const before = gateway.generateCalls.length;
    const huge = await app.inject({ method: 'POST', url: '/v1/generate', headers, payload: JSON.stringify({ task: 'notes', text: 'a'.repeat(10_000_000) }) });
    expect(huge.statusCode).toBe(413);
    expect(huge.json().error.code).toBe('REQUEST_TOO_LARGE');
    const justOver = await app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text: 'a'.repeat(200_001) } });
    expect(justOver.statusCode).toBe(413);
    expect(justOver.json().error.code).toBe('TEXT_TOO_LONG');
    expect(gateway.generateCalls.length).toBe(before);
  });

  it('answers a text that needs more than MAX_TEXT_PARTS parts with 413 TOO_MANY_PARTS before any provider call', async () => {
    const { app, gateway } = await start({ MAX_TEXT_PARTS: '3' });
    // Four paragraphs of ~5000 tokens each ("word " is one token): four parts at 6000 tokens a part.
    const text = Array.from({ length: 4 }, () => 'word '.repeat(5000).trim()).join('\n\n');
    const response = await app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text } });
    expect(response.statusCode).toBe(413);
    expect(response.json().error.code).toBe('TOO_MANY_PARTS');
    expect(response.json().error.message).toContain('MAX_TEXT_PARTS');
    expect(gateway.generateCalls).toHaveLength(0);
    // Three such paragraphs are allowed.
    const three = Array.from({ length: 3 }, () => 'word '.repeat(5000).trim()).join('\n\n');
    const allowed = await app.inject({ method: 'POST', url: '/v1/generate', headers, payload: { task: 'notes', text: three } });
    expect(allowed.statusCode).toBe(503);
    expect(gateway.generateCalls.length).toBeGreaterThan(0);
  });
});
