import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig } from './support.js';
import type { StaticGateway } from './support.js';

let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function start(): Promise<{ app: FastifyInstance; gateway: StaticGateway }> {
  const gateway = staticGateway();
  app = await buildApp({ config: testConfig(), gateway, documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }) });
  return { app, gateway };
}

async function scrape(instance: FastifyInstance): Promise<string> {
  const response = await instance.inject({ method: 'GET', url: '/metrics' });
  expect(response.statusCode).toBe(200);
  expect(response.headers['content-type']).toContain('text/plain');
  return response.body;
}

describe('GET /metrics', () => {
  it('reads the breaker state of every provider at scrape time', async () => {
    const { app, gateway } = await start();
    let text = await scrape(app);
    expect(text).toContain('studyhelper_breaker_state{provider="claude"} 0');
    expect(text).toContain('studyhelper_breaker_state{provider="timelygpt"} 0');
    gateway.controlBreaker('gpt', 'forceOpen');
    text = await scrape(app);
    expect(text).toContain('studyhelper_breaker_state{provider="gpt"} 1');
    expect(text).not.toMatch(/^"/);
  });

  it('counts transitions, calls, fallbacks, durations and tokens from the gateway events', async () => {
    const { app, gateway } = await start();
    gateway.emitTransition({ provider: 'claude', from: 'closed', to: 'open', at: 1 });
    gateway.emitCall({ provider: 'claude', outcome: 'failed', errorClass: 'server_error', durationMs: 120 });
    gateway.emitCall({ provider: 'claude', outcome: 'rejected', errorClass: 'circuit_open', durationMs: 0 });
    gateway.emitCall({ provider: 'gpt', outcome: 'succeeded', durationMs: 1500, usage: { inputTokens: 100, outputTokens: 40 } });
    gateway.emitCall({ provider: 'timelygpt', outcome: 'succeeded', durationMs: 10, usage: { inputTokens: null, outputTokens: null } });
    gateway.emitFallback('claude', 'gpt');
    const text = await scrape(app);
    expect(text).toContain('studyhelper_breaker_transitions_total{provider="claude",from="closed",to="open"} 1');
    expect(text).toContain('studyhelper_provider_calls_total{provider="claude",outcome="failed",error_class="server_error"} 1');
    expect(text).toContain('studyhelper_provider_calls_total{provider="claude",outcome="rejected",error_class="circuit_open"} 1');
    expect(text).toContain('studyhelper_provider_calls_total{provider="gpt",outcome="succeeded",error_class="none"} 1');
    expect(text).toContain('studyhelper_fallbacks_total{from="claude",to="gpt"} 1');
    expect(text).toContain('studyhelper_attempt_duration_seconds_count{provider="claude"} 1');
    expect(text).toContain('studyhelper_attempt_duration_seconds_bucket{le="2.5",provider="gpt"} 1');
    expect(text).toContain('studyhelper_tokens_total{provider="gpt",direction="input"} 100');
    expect(text).toContain('studyhelper_tokens_total{provider="gpt",direction="output"} 40');
    expect(text).not.toContain('studyhelper_tokens_total{provider="timelygpt"');
    expect(text).toContain('studyhelper_process_');
  });

  it('stops listening to the gateway when the app closes', async () => {
    const { app, gateway } = await start();
    expect(gateway.listenerCount()).toBe(3);
    await app.close();
    expect(gateway.listenerCount()).toBe(0);
    expect(gateway.stopped).toBe(true);
  });
});
