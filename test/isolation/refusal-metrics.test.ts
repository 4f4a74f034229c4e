/**
 * `studyhelper_refusals_total{limit, what}` in `/metrics`: each refusal by one of the service's bounds is
 * counted once under the bound that made it, through the HTTP API (docs/operations.md "Metrics"). The
 * expected counts are this test's own: the refusals it provokes, one by one.
 */
import { connect, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig, type StaticGateway } from '../http/support.js';

const apps: FastifyInstance[] = [];
const releases: (() => void)[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const release of releases.splice(0)) release();
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(env: NodeJS.ProcessEnv, busy?: () => boolean): Promise<{ app: FastifyInstance; gateway: StaticGateway }> {
  const gateway = staticGateway();
  gateway.hold = new Promise<void>((resolve) => releases.push(resolve));
  const app = await buildApp({
    config: testConfig({ REFUSAL_DELAY_MS: '0', RATE_LIMIT_GENERATIONS: '0', ...env }),
    gateway,
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
    ...(busy === undefined ? {} : { busy }),
  });
  apps.push(app);
  return { app, gateway };
}

/** Every `studyhelper_refusals_total` sample of `/metrics`, as `limit/what` → count. */
async function refusals(app: FastifyInstance): Promise<Record<string, number>> {
  const body = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const counts: Record<string, number> = {};
  for (const match of body.matchAll(/^studyhelper_refusals_total\{limit="([a-z_]+)",what="([a-z_]+)"\} (\d+)$/gm)) {
    counts[`${match[1]}/${match[2]}`] = Number(match[3]);
  }
  return counts;
}

async function until(check: () => boolean): Promise<void> {
  for (let turn = 0; turn < 2000 && !check(); turn += 1) await new Promise((resolve) => setImmediate(resolve));
  expect(check()).toBe(true);
}

const generate = (app: FastifyInstance, remoteAddress: string, key: string) =>
  app.inject({
    method: 'POST',
    url: '/v1/generate',
    remoteAddress,
    headers: { 'content-type': 'application/json', 'x-gpt-key': key },
    payload: { task: 'notes', text: 'Photosynthesis.' },
  });

it('counts nothing before anything is refused', async () => {
  const { app } = await start({});
  expect(await refusals(app)).toEqual({});
  expect((await app.inject({ method: 'GET', url: '/metrics' })).body).toContain('# TYPE studyhelper_refusals_total counter');
});

it("counts the generation refusals under the bound that made each: a client's share, then the instance's", async () => {
  const { app, gateway } = await start({ MAX_INFLIGHT_GENERATIONS: '2', MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '1' });
  const held = [generate(app, '203.0.113.7', 'gpt-key-client-0001')];
  await until(() => gateway.generateCalls.length === 1);
  // The same key again: over its client's one slot.
  expect((await generate(app, '203.0.113.7', 'gpt-key-client-0001')).statusCode).toBe(429);
  expect((await generate(app, '203.0.113.7', 'gpt-key-client-0001')).statusCode).toBe(429);
  held.push(generate(app, '198.51.100.9', 'gpt-key-client-0002'));
  await until(() => gateway.generateCalls.length === 2);
  // A third client: both of the instance's slots are taken.
  expect((await generate(app, '192.0.2.1', 'gpt-key-client-0003')).statusCode).toBe(503);
  expect(await refusals(app)).toEqual({ 'client_share/generations': 2, 'instance/generations': 1 });
  void held;
});

it('counts the equal-share refusals while busy apart from the others', async () => {
  const { app, gateway } = await start({ MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '8' }, () => true);
  const held = [];
  // Two addresses hold slots; the first is held to its equal share of what is in flight (never below 2).
  held.push(generate(app, '198.51.100.9', 'gpt-key-victim-0001'));
  for (let n = 0; n < 2; n += 1) held.push(generate(app, '203.0.113.7', 'gpt-key-busy-0001'));
  await until(() => gateway.generateCalls.length === 3);
  expect((await generate(app, '203.0.113.7', 'gpt-key-busy-0001')).statusCode).toBe(429);
  expect(await refusals(app)).toEqual({ 'busy_share/generations': 1 });
  void held;
});

it('counts a rate refusal under the route it rates', async () => {
  const { app } = await start({ RATE_LIMIT_KEY_STATUS: '1' });
  const status = () => app.inject({ method: 'GET', url: '/v1/keys/status', remoteAddress: '203.0.113.7', headers: { 'x-gpt-key': 'gpt-key-status-0001' } });
  expect((await status()).statusCode).toBe(200);
  expect((await status()).statusCode).toBe(429);
  expect(await refusals(app)).toEqual({ 'rate/key_status_lookups': 1 });
});

/** Opens a TCP connection to `address` (the app listening on loopback). */
function open(address: URL): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(address.port), address.hostname, () => resolve(socket));
    socket.once('error', reject);
    sockets.push(socket);
  });
}

it.each([
  ['MAX_CONNECTIONS_PER_ADDRESS', 'address_share/connections'],
  ['MAX_CONNECTIONS', 'instance/connections'],
])('counts a connection refused over %s (2) under %s, before a byte of it is read', async (setting, counted) => {
  const { app } = await start({ [setting]: '2' });
  const address = new URL(await app.listen({ port: 0, host: '127.0.0.1' }));
  await open(address);
  await open(address);
  const third = await open(address);
  await new Promise((resolve) => third.once('close', resolve));
  expect(await refusals(app)).toEqual({ [counted]: 1 });
});
