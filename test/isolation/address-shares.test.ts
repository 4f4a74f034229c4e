/**
 * Shares by address, not by invented key. A client is its key set, and keys cost nothing to
 * invent: a victim's job from another address waited over a minute behind an address that sent a new key
 * per job, and 32 connections with a new bad key each drove hundreds of provider calls a second. Once an
 * address holds more than 4 distinct key sets, they count as one client (job scheduling, generation
 * slots); `/v1/generate` and `/v1/keys/status` are rated per address (an IPv6 /64), refused requests
 * included; each provider call carries the origin, a salted hash of the address (never the address).
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore, type DocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { putTestDocument, staticGateway, testConfig, type StaticGateway } from '../http/support.js';

const apps: FastifyInstance[] = [];
const releases: (() => void)[] = [];
afterEach(async () => {
  for (const release of releases.splice(0)) release();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(env: NodeJS.ProcessEnv, busy?: () => boolean): Promise<{ app: FastifyInstance; gateway: StaticGateway; store: DocumentStore }> {
  const gateway = staticGateway();
  gateway.hold = new Promise<void>((resolve) => releases.push(resolve));
  const store = createMemoryDocumentStore({ ttlSeconds: 60 });
  const app = await buildApp({ config: testConfig({ REFUSAL_DELAY_MS: '0', ...env }), gateway, documentStore: store, processMetrics: false, ...(busy === undefined ? {} : { busy }) });
  apps.push(app);
  await putTestDocument(store);
  return { app, gateway, store };
}

const keyOf = (n: number): string => `invented-gpt-key-${String(n).padStart(6, '0')}`;

async function until(check: () => boolean): Promise<void> {
  for (let turn = 0; turn < 2000 && !check(); turn += 1) await new Promise((resolve) => setImmediate(resolve));
  expect(check()).toBe(true);
}

/** `POST /v1/jobs` over the test document from `remoteAddress` with `key`. */
const createOn = (app: FastifyInstance) => (remoteAddress: string, key: string) =>
  app.inject({ method: 'POST', url: '/v1/jobs', remoteAddress, headers: { 'content-type': 'application/json', 'x-gpt-key': key }, payload: { documentId: 'doc-1' } });

/** `POST /v1/generate` of a short text from `remoteAddress` with `key`. */
const generateOn = (app: FastifyInstance) => (remoteAddress: string, key: string) =>
  app.inject({ method: 'POST', url: '/v1/generate', remoteAddress, headers: { 'content-type': 'application/json', 'x-gpt-key': key }, payload: { task: 'notes', text: 'Photosynthesis.' } });

/** The keys the gateway has been called with so far. */
const calledKeys = (gateway: StaticGateway): string[] => gateway.generateCalls.map((call) => call.chain[0]?.apiKey.reveal() ?? '');

describe('job scheduling by address', () => {
  it("starts a victim's job next, ahead of the backlog of an address that invents a key per job", async () => {
    const { app, gateway } = await start({ JOB_CONCURRENCY: '4', JOB_CONCURRENCY_PER_CLIENT: '2', RATE_LIMIT_JOBS: '0' });
    const create = createOn(app);
    for (let n = 1; n <= 12; n += 1) expect((await create('203.0.113.7', keyOf(n))).statusCode).toBe(202);
    // Its address runs at most 2 of the 4 slots (half of JOB_CONCURRENCY), whatever keys it holds.
    await until(() => gateway.generateCalls.length === 2);
    expect((await create('198.51.100.9', 'victim-gpt-key-000001')).statusCode).toBe(202);
    // The victim's job takes a free slot at once, before any of the backlog.
    await until(() => calledKeys(gateway).includes('victim-gpt-key-000001'));
    expect(calledKeys(gateway).indexOf('victim-gpt-key-000001')).toBe(2);
    // Every held call now fails at once: the jobs end, and the queue drains in the scheduler's order.
    releases.splice(0).forEach((release) => release());
    await until(() => gateway.generateCalls.length >= 6);
  });

  it("gives one address at most half of JOB_CONCURRENCY running jobs though each of its jobs has its own key set: another address's job starts at once", async () => {
    const { app, gateway } = await start({ JOB_CONCURRENCY: '4', JOB_CONCURRENCY_PER_CLIENT: '2', RATE_LIMIT_JOBS: '0' });
    const create = createOn(app);
    // Four key sets: not yet merged into one client (that takes more than 4), each within its own share.
    for (let n = 1; n <= 4; n += 1) expect((await create('203.0.113.7', keyOf(n))).statusCode).toBe(202);
    expect((await create('198.51.100.9', 'victim-gpt-key-000001')).statusCode).toBe(202);
    // The address's calls hang; the victim's job is called while they do, beside exactly 2 of them.
    await until(() => calledKeys(gateway).includes('victim-gpt-key-000001'));
    expect(calledKeys(gateway).filter((key) => key.startsWith('invented-'))).toHaveLength(2);
  });
});

describe('jobs while the instance is busy', () => {
  const invented = (gateway: StaticGateway): number => calledKeys(gateway).filter((key) => key.startsWith('invented-')).length;

  it('starts one job at a time for an address while another address is served, and two again once the instance is not busy', async () => {
    let busy = true;
    const { app, gateway } = await start({ JOB_CONCURRENCY: '4', JOB_CONCURRENCY_PER_CLIENT: '2', RATE_LIMIT_JOBS: '0', RATE_LIMIT_GENERATIONS: '0' }, () => busy);
    const create = createOn(app);
    // Another address holds a generation (held by the gateway): it is served now.
    const held = generateOn(app)('198.51.100.9', 'victim-gpt-key-000001');
    await until(() => gateway.generateCalls.length === 1);
    for (let n = 1; n <= 3; n += 1) expect((await create('203.0.113.7', keyOf(n))).statusCode).toBe(202);
    // A job of a third address starts at once: the busy rule holds back only an address already running one.
    expect((await create('192.0.2.44', 'other-gpt-key-000001')).statusCode).toBe(202);
    await until(() => calledKeys(gateway).includes('other-gpt-key-000001'));
    expect(invented(gateway)).toBe(1);
    // No longer busy: the next pass of the queue starts the address's second job (its share, half of 4).
    busy = false;
    expect((await create('203.0.113.7', keyOf(4))).statusCode).toBe(202);
    await until(() => invented(gateway) === 2);
    void held;
  });

  it("counts another address's job as served: busy, the address starts one job beside it", async () => {
    const { app, gateway } = await start({ JOB_CONCURRENCY: '4', JOB_CONCURRENCY_PER_CLIENT: '2', RATE_LIMIT_JOBS: '0' }, () => true);
    const create = createOn(app);
    expect((await create('192.0.2.44', 'other-gpt-key-000001')).statusCode).toBe(202);
    await until(() => gateway.generateCalls.length === 1);
    for (let n = 1; n <= 3; n += 1) expect((await create('203.0.113.7', keyOf(n))).statusCode).toBe(202);
    await until(() => invented(gateway) === 1);
    // A job of a third address is the sync point: by its call, every pass of the queue has run.
    expect((await create('198.51.100.9', 'victim-gpt-key-000001')).statusCode).toBe(202);
    await until(() => calledKeys(gateway).includes('victim-gpt-key-000001'));
    expect(invented(gateway)).toBe(1);
  });

  it('never holds back an address that is alone: busy, its two jobs run', async () => {
    const { app, gateway } = await start({ JOB_CONCURRENCY: '4', JOB_CONCURRENCY_PER_CLIENT: '2', RATE_LIMIT_JOBS: '0' }, () => true);
    const create = createOn(app);
    for (let n = 1; n <= 3; n += 1) expect((await create('203.0.113.7', keyOf(n))).statusCode).toBe(202);
    await until(() => invented(gateway) === 2);
  });
});

describe('generation slots by address', () => {
  it('gives an address holding more than 4 key sets one client\'s slots (MAX_INFLIGHT_GENERATIONS_PER_CLIENT)', async () => {
    const { app, gateway } = await start({ MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '2', RATE_LIMIT_GENERATIONS: '0' });
    const generate = (remoteAddress: string, key: string) =>
      app.inject({ method: 'POST', url: '/v1/generate', remoteAddress, headers: { 'content-type': 'application/json', 'x-gpt-key': key }, payload: { task: 'notes', text: 'Photosynthesis.' } });
    const held = [];
    // Five key sets of one address each get in on their own (a household behind one address).
    for (let n = 1; n <= 5; n += 1) held.push(generate('203.0.113.7', keyOf(n)));
    await until(() => gateway.generateCalls.length === 5);
    // Past that, the address's new keys share one client's 2 slots.
    held.push(generate('203.0.113.7', keyOf(6)), generate('203.0.113.7', keyOf(7)));
    await until(() => gateway.generateCalls.length === 7);
    const refused = await generate('203.0.113.7', keyOf(8));
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error.message).toContain('MAX_INFLIGHT_GENERATIONS_PER_CLIENT');
    // Another address is not affected.
    held.push(generate('198.51.100.9', 'victim-gpt-key-000001'));
    await until(() => gateway.generateCalls.length === 8);
    void held;
  });
});

describe('equal shares while the instance is busy', () => {
  it('holds an address to an equal share of the slots in flight while busy, never below 2, and lets it use what is idle otherwise', async () => {
    let busy = false;
    const { app, gateway } = await start({ RATE_LIMIT_GENERATIONS: '0' }, () => busy);
    const generate = generateOn(app);
    const held: Promise<unknown>[] = [];
    // Not busy: one address alone takes 6 slots with one key (its client's share is 8).
    for (let n = 0; n < 6; n += 1) held.push(generate('203.0.113.7', 'hostile-gpt-key-000001'));
    await until(() => gateway.generateCalls.length === 6);
    busy = true;
    // Busy, and alone: nobody else is waiting for the CPU, so it still gets its 7th.
    held.push(generate('203.0.113.7', 'hostile-gpt-key-000001'));
    await until(() => gateway.generateCalls.length === 7);
    // A second address arrives: it gets its 2 however much the first holds.
    held.push(generate('198.51.100.9', 'victim-gpt-key-000001'), generate('198.51.100.9', 'victim-gpt-key-000001'));
    await until(() => gateway.generateCalls.length === 9);
    // The first now holds 7 of 9 slots from 2 addresses: past an equal share (5), it is refused.
    const refused = await generate('203.0.113.7', 'hostile-gpt-key-000001');
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error.message).toContain('busy');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // The second, holding 2 of 9, is under its share (5): its third goes in.
    held.push(generate('198.51.100.9', 'victim-gpt-key-000001'));
    await until(() => gateway.generateCalls.length === 10);
    expect((await app.inject({ method: 'GET', url: '/metrics' })).body).toMatch(/^studyhelper_busy 1$/m);
    // No longer busy: the first uses what is idle again, up to its client's 8.
    busy = false;
    expect((await app.inject({ method: 'GET', url: '/metrics' })).body).toMatch(/^studyhelper_busy 0$/m);
    held.push(generate('203.0.113.7', 'hostile-gpt-key-000001'));
    await until(() => gateway.generateCalls.length === 11);
    void held;
  });

  /** A busy instance where 198.51.100.9 holds 2 generations, held by the gateway. */
  const busyWithTwoHeld = async () => {
    const { app, gateway } = await start({ RATE_LIMIT_GENERATIONS: '0' }, () => true);
    const generate = generateOn(app);
    const held: Promise<unknown>[] = [generate('198.51.100.9', 'victim-gpt-key-000001'), generate('198.51.100.9', 'victim-gpt-key-000001')];
    await until(() => gateway.generateCalls.length === 2);
    return { app, gateway, generate, held };
  };

  it('rounds the equal share down: against an address holding 2, another holds 2, never a third', async () => {
    const { gateway, generate, held } = await busyWithTwoHeld();
    held.push(generate('203.0.113.7', 'hostile-gpt-key-000001'), generate('203.0.113.7', 'hostile-gpt-key-000001'));
    await until(() => gateway.generateCalls.length === 4);
    // 2 and 2 in flight from 2 addresses: a third for either is 5 / 2 = 2.5 each, rounded down to 2.
    const third = await generate('203.0.113.7', 'hostile-gpt-key-000001');
    expect(third.statusCode).toBe(429);
    expect(third.json().error.message).toContain('busy');
    expect((await generate('198.51.100.9', 'victim-gpt-key-000001')).statusCode).toBe(429);
    expect(gateway.generateCalls).toHaveLength(4);
    void held;
  });

  it('never refuses an address holding nothing, however many slots its text needs', async () => {
    const { app, gateway, generate, held } = await busyWithTwoHeld();
    // 60,000 characters take 3 slots (one per 25,000): past an equal share of 2 + 3 from 2 addresses (2, rounded down).
    const long = { task: 'notes', text: 'Photosynthesis turns light into energy. '.repeat(1_500) };
    let longStatus: number | undefined;
    held.push(
      app
        .inject({ method: 'POST', url: '/v1/generate', remoteAddress: '203.0.113.7', headers: { 'content-type': 'application/json', 'x-gpt-key': 'newcomer-gpt-key-000001' }, payload: long })
        .then((answer) => (longStatus = answer.statusCode)),
    );
    // Admitted, its parts reach the gateway (after their tokens are counted, off the event loop); refused, it is answered.
    for (let tries = 0; tries < 500 && gateway.generateCalls.length === 2 && longStatus === undefined; tries += 1)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(longStatus).toBeUndefined();
    expect(gateway.generateCalls.length).toBeGreaterThan(2);
    // It holds 3 now: its next, one slot, would be 4 of 6 against an equal share of 3.
    const next = await generate('203.0.113.7', 'newcomer-gpt-key-000001');
    expect(next.statusCode).toBe(429);
    void held;
  });

  it("shows the instance's own load and whether it is busy in /metrics", async () => {
    const { app } = await start({});
    const body = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(body).toMatch(/^studyhelper_busy [01]$/m);
    const load = Number(/^studyhelper_load (\S+)$/m.exec(body)?.[1]);
    expect(load).toBeGreaterThanOrEqual(0);
    expect(load).toBeLessThanOrEqual(1);
  });

  it('still counts an address between its requests (it gave a slot back within 2 s)', async () => {
    const { app, gateway } = await start({ RATE_LIMIT_GENERATIONS: '0' }, () => true);
    const generate = generateOn(app);
    // The victim's one request comes and goes (held calls are released, the gateway then answers).
    const victim = generate('198.51.100.9', 'victim-gpt-key-000001');
    await until(() => gateway.generateCalls.length === 1);
    releases.splice(0).forEach((release) => release());
    await victim;
    gateway.hold = new Promise<void>((resolve) => releases.push(resolve));
    // The victim holds nothing now, but sent a request a moment ago: the hostile address gets 2, not all 8.
    const held = [generate('203.0.113.7', 'hostile-gpt-key-000001'), generate('203.0.113.7', 'hostile-gpt-key-000001')];
    await until(() => gateway.generateCalls.length === 3);
    expect((await generate('203.0.113.7', 'hostile-gpt-key-000001')).statusCode).toBe(429);
    void held;
  });
});

describe('rates per address', () => {
  it('rates POST /v1/generate per address whatever the keys, counting refused bodies (RATE_LIMIT_GENERATIONS)', async () => {
    const { app } = await start({ RATE_LIMIT_GENERATIONS: '3' });
    const send = (remoteAddress: string, n: number, payload: string) =>
      app.inject({ method: 'POST', url: '/v1/generate', remoteAddress, headers: { 'content-type': 'application/json', 'x-gpt-key': keyOf(n) }, payload });
    expect((await send('203.0.113.7', 1, '['.repeat(100))).statusCode).toBe(400);
    expect((await send('203.0.113.7', 2, '{"task":')).statusCode).toBe(400);
    expect((await send('203.0.113.7', 3, '{}')).statusCode).toBe(400);
    const fourth = await send('203.0.113.7', 4, '{"task":"notes","text":"x"}');
    expect(fourth.statusCode).toBe(429);
    expect(fourth.json().error.message).toContain('RATE_LIMIT_GENERATIONS');
    expect(Number(fourth.headers['retry-after'])).toBeGreaterThan(0);
    expect((await send('198.51.100.9', 5, '{}')).statusCode).toBe(400);
  });

  it('rates GET /v1/keys/status per address (RATE_LIMIT_KEY_STATUS), an IPv6 /64 as one address', async () => {
    const { app } = await start({ RATE_LIMIT_KEY_STATUS: '2' });
    const status = (remoteAddress: string, n: number) =>
      app.inject({ method: 'GET', url: '/v1/keys/status', remoteAddress, headers: { 'x-gpt-key': keyOf(n) } });
    expect((await status('2001:db8:1:2::1', 1)).statusCode).toBe(200);
    expect((await status('2001:db8:1:2::ffff:2', 2)).statusCode).toBe(200);
    const third = await status('2001:db8:1:2:aaaa::3', 3);
    expect(third.statusCode).toBe(429);
    expect(third.json().error.message).toContain('RATE_LIMIT_KEY_STATUS');
    expect((await status('2001:db8:1:3::1', 4)).statusCode).toBe(200);
  });

  it('has defaults of 3000 generations and 60 key lookups per address per window', () => {
    expect(testConfig({}).rateLimit).toMatchObject({ generations: 3000, keyStatus: 60, windowSeconds: 60 });
  });
});

describe('origin', () => {
  it('hands the gateway one opaque origin per address (an IPv6 /64), never the address', async () => {
    const { app, gateway } = await start({});
    const generate = (remoteAddress: string, n: number) =>
      void app.inject({ method: 'POST', url: '/v1/generate', remoteAddress, headers: { 'content-type': 'application/json', 'x-gpt-key': keyOf(n) }, payload: { task: 'notes', text: 'Photosynthesis.' } });
    generate('203.0.113.7', 1);
    generate('203.0.113.7', 2);
    generate('2001:db8:1:2::1', 3);
    generate('2001:db8:1:2::9', 4);
    generate('2001:db8:1:3::1', 5);
    await until(() => gateway.generateCalls.length === 5);
    const origins = gateway.generateCalls.map((call) => (call as { origin?: string }).origin ?? '');
    expect(origins[0]).toMatch(/^[0-9a-f]{32}$/);
    expect(origins[0]).toBe(origins[1]);
    expect(origins[2]).toBe(origins[3]);
    expect(new Set(origins).size).toBe(3);
    for (const origin of origins) expect(origin).not.toContain('203.0.113');
  });

  it("hands a job's provider calls the origin of the request that created it", async () => {
    const { app, gateway } = await start({});
    void app.inject({ method: 'POST', url: '/v1/generate', remoteAddress: '203.0.113.7', headers: { 'content-type': 'application/json', 'x-gpt-key': keyOf(1) }, payload: { task: 'notes', text: 'Photosynthesis.' } });
    await until(() => gateway.generateCalls.length === 1);
    const job = await app.inject({ method: 'POST', url: '/v1/jobs', remoteAddress: '203.0.113.7', headers: { 'content-type': 'application/json', 'x-gpt-key': keyOf(2) }, payload: { documentId: 'doc-1' } });
    expect(job.statusCode).toBe(202);
    await until(() => gateway.generateCalls.length === 2);
    const [first, second] = gateway.generateCalls.map((call) => (call as { origin?: string }).origin);
    expect(first).toMatch(/^[0-9a-f]{32}$/);
    expect(second).toBe(first);
  });
});
