/**
 * TRUST_PROXY: behind a proxy every client has the proxy's address, so the per-address shares
 * would be one share for everyone; with TRUST_PROXY the client's address is read from X-Forwarded-For, and
 * only when the request comes from a trusted proxy. Judged by the per-address generation share (1 slot
 * here): two clients behind the proxy both get in when their addresses are read from the header, and only
 * one when they are not.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig, withLimits, type StaticGateway } from '../http/support.js';

const apps: FastifyInstance[] = [];
const releases: (() => void)[] = [];
afterEach(async () => {
  for (const release of releases.splice(0)) release();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(trustProxy: string): Promise<{ app: FastifyInstance; gateway: StaticGateway }> {
  const gateway = staticGateway();
  gateway.hold = new Promise<void>((resolve) => releases.push(resolve));
  const app = await buildApp({
    // One slot per address: a second request from the same client address is refused.
    config: withLimits(testConfig({ TRUST_PROXY: trustProxy, REFUSAL_DELAY_MS: '0' }), { admission: { maxPerAddress: 1 } }),
    gateway,
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
  });
  apps.push(app);
  return { app, gateway };
}

/** A generation held in flight, from `remoteAddress` claiming to forward for `forwardedFor`. */
function generate(app: FastifyInstance, remoteAddress: string, forwardedFor: string, n: number) {
  return app.inject({
    method: 'POST',
    url: '/v1/generate',
    remoteAddress,
    headers: {
      'content-type': 'application/json',
      'x-forwarded-for': forwardedFor,
      'x-gpt-key': `proxied-gpt-key-${String(n).padStart(6, '0')}`,
    },
    payload: { task: 'notes', text: `Photosynthesis, request ${n}.` },
  });
}

async function until(check: () => boolean): Promise<void> {
  for (let turn = 0; turn < 1000 && !check(); turn += 1) await new Promise((resolve) => setImmediate(resolve));
  expect(check()).toBe(true);
}

describe('TRUST_PROXY', () => {
  it('off (the default): every client behind the proxy has the proxy address, one share for all', async () => {
    const { app, gateway } = await start('false');
    void generate(app, '10.0.0.1', '203.0.113.1', 1);
    await until(() => gateway.generateCalls.length === 1);
    const second = await generate(app, '10.0.0.1', '203.0.113.2', 2);
    expect(second.statusCode).toBe(429);
    expect(second.json().error.message).toContain('per-address share');
  });

  it("naming the proxy: each client's own address from X-Forwarded-For, a share each", async () => {
    const { app, gateway } = await start('10.0.0.1');
    void generate(app, '10.0.0.1', '203.0.113.1', 1);
    await until(() => gateway.generateCalls.length === 1);
    void generate(app, '10.0.0.1', '203.0.113.2', 2);
    await until(() => gateway.generateCalls.length === 2);
    // The same forwarded client again is over its address's share.
    expect((await generate(app, '10.0.0.1', '203.0.113.2', 3)).statusCode).toBe(429);
  });

  it('ignores X-Forwarded-For from a client that is not a trusted proxy (no choosing its own address)', async () => {
    const { app, gateway } = await start('10.0.0.1');
    void generate(app, '198.51.100.7', '203.0.113.1', 1);
    await until(() => gateway.generateCalls.length === 1);
    expect((await generate(app, '198.51.100.7', '203.0.113.2', 2)).statusCode).toBe(429);
  });

  it('counts hops: with 1, the nearest address in the header is the client', async () => {
    const { app, gateway } = await start('1');
    void generate(app, '10.0.0.1', '203.0.113.1', 1);
    await until(() => gateway.generateCalls.length === 1);
    void generate(app, '10.0.0.9', '203.0.113.2', 2);
    await until(() => gateway.generateCalls.length === 2);
    // A client that forwards a made-up chain: only the nearest hop is believed.
    expect((await generate(app, '10.0.0.1', '192.0.2.50, 203.0.113.2', 3)).statusCode).toBe(429);
  });

  it('with a hop count, believes X-Forwarded-For only from a proxy on a private address, not from a public client', async () => {
    const { app, gateway } = await start('1');
    // A direct client on a public address claiming to forward for two others: both keep its own address.
    void generate(app, '198.51.100.7', '203.0.113.1', 1);
    await until(() => gateway.generateCalls.length === 1);
    const second = await generate(app, '198.51.100.7', '203.0.113.2', 2);
    expect(second.statusCode).toBe(429);
    expect(second.json().error.message).toContain('per-address share');
    // A proxy on a private address is believed.
    void generate(app, '192.168.1.5', '203.0.113.3', 3);
    await until(() => gateway.generateCalls.length === 2);
  });

  it('reads false by default, true, a hop count, or proxy addresses and CIDR ranges; refuses anything else', () => {
    expect(loadConfig({}).server.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'true' }).server.trustProxy).toBe(true);
    expect(loadConfig({ TRUST_PROXY: '2' }).server.trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.1, 10.1.0.0/16,::1' }).server.trustProxy).toEqual(['10.0.0.1', '10.1.0.0/16', '::1']);
    for (const bad of ['10.0.0.300', '10.0.0.0/33', 'proxy.example', '10.0.0.1/8/2']) {
      expect(() => loadConfig({ TRUST_PROXY: bad })).toThrow(/TRUST_PROXY/);
    }
  });
});
