/**
 * GET floods of the operational documents: 64 connections asking for `/metrics` or `/openapi.json` ~1,100
 * times a second raised another client's p99 by ~240 ms, each answer built afresh. The OpenAPI document is
 * serialized once; while the instance is busy, scrapes of `/metrics` within a second share one rendering
 * (an idle instance renders each afresh).
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig, type StaticGateway } from '../http/support.js';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(busy: () => boolean): Promise<{ app: FastifyInstance; gateway: StaticGateway }> {
  const gateway = staticGateway();
  const app = await buildApp({ config: testConfig(), gateway, documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }), processMetrics: false, busy });
  apps.push(app);
  return { app, gateway };
}

/** The fallbacks counted from Claude to GPT in a scrape. */
const fallbacks = (text: string): string | undefined => /studyhelper_fallbacks_total\{from="claude",to="gpt"\} (\d+)/.exec(text)?.[1];

describe('/metrics under a flood', () => {
  it('serves the scrapes of a busy instance within a second from one rendering, then renders afresh', async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    let busy = true;
    const { app, gateway } = await start(() => busy);
    const scrape = async (): Promise<string> => (await app.inject({ method: 'GET', url: '/metrics' })).body;
    gateway.emitFallback('claude', 'gpt');
    expect(fallbacks(await scrape())).toBe('1');
    gateway.emitFallback('claude', 'gpt');
    vi.advanceTimersByTime(999);
    // Within the second: the same rendering.
    expect(fallbacks(await scrape())).toBe('1');
    vi.advanceTimersByTime(1);
    expect(fallbacks(await scrape())).toBe('2');
    // Idle: every scrape renders afresh.
    busy = false;
    gateway.emitFallback('claude', 'gpt');
    expect(fallbacks(await scrape())).toBe('3');
  });
});

describe('/openapi.json under a flood', () => {
  it('serializes the document once and serves that text after, at /openapi.json and /docs/json alike', async () => {
    const { app } = await start(() => false);
    const first = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(first.statusCode).toBe(200);
    expect(first.headers['content-type']).toContain('application/json');
    expect(first.json().info.title).toBe('study-helper');
    // The document object changes after the first answer: the answers after it are the text built then.
    (app.swagger() as { info: { title: string } }).info.title = 'changed after the first request';
    const second = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(second.body).toBe(first.body);
    // The UI's copy is the same text, not the object serialized again.
    const ui = await app.inject({ method: 'GET', url: '/docs/json' });
    expect(ui.statusCode).toBe(200);
    expect(ui.headers['content-type']).toContain('application/json');
    expect(ui.body).toBe(first.body);
  });
});
