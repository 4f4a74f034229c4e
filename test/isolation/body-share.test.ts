/**
 * Each address's share of the JSON body bytes the event loop parses (JSON_BODY_MB_PER_SECOND,
 * JSON_BODY_BURST_MB). One address sending 1.4 MB bodies that are refused 400 only once read kept the loop
 * on ~90 MB/s of them within its request rate, and every other client's latency rose. The rule
 * tested here, through real HTTP from distinct loopback addresses: an address's bucket holds at least the
 * largest body a route takes (here MAX_UPLOAD_MB caps `POST /v1/generate` at 0.1 MiB = 104 857 bytes) and
 * refills at 1 KiB a second (0.001 MB); a body, declared or chunked, takes its bytes from it before it is
 * parsed; a body the bucket cannot cover is refused 429 TOO_MANY_REQUESTS with Retry-After, unparsed; the
 * bucket of another address is its own.
 */
import type { AddressInfo } from 'node:net';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { createBodyShare } from '../../src/http/body-share.js';
import { staticGateway, testConfig, type StaticGateway } from '../http/support.js';

/** `POST /v1/generate`'s body limit with MAX_UPLOAD_MB 0.1: 0.1 MiB. */
const routeLimit = Math.floor(0.1 * 1024 * 1024);
/** JSON_BODY_MB_PER_SECOND 0.001, in bytes a second. */
const refillPerSecond = 0.001 * 1024 * 1024;

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function listen(env: NodeJS.ProcessEnv = {}): Promise<{ port: number; gateway: StaticGateway; app: FastifyInstance }> {
  const gateway = staticGateway();
  const app = await buildApp({
    // A burst asked below the route's limit: the service raises it to that limit.
    config: testConfig({ REFUSAL_DELAY_MS: '0', MAX_UPLOAD_MB: '0.1', JSON_BODY_MB_PER_SECOND: '0.001', JSON_BODY_BURST_MB: '0.01', RATE_LIMIT_GENERATIONS: '0', ...env }),
    gateway,
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
  });
  apps.push(app);
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { port: (app.server.address() as AddressInfo).port, gateway, app };
}

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: { error?: { code?: string; message?: string; retryAfterSeconds?: number } };
}

/**
 * `POST /v1/generate` from `from` (a loopback address) with `body`: declared by content-length, or sent
 * chunked (no length) in pieces of 16 KiB. Resolves with the answer, even if the server closes the socket
 * before the whole body went out.
 */
function post(port: number, from: string, body: string, sending: 'declared' | 'chunked' = 'declared', path = '/v1/generate'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-gpt-key': 'test-gpt-key-0001' };
    if (sending === 'declared') headers['content-length'] = String(Buffer.byteLength(body));
    const call = httpRequest({ host: '127.0.0.1', port, localAddress: from, method: 'POST', path, headers, agent: false }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (piece: string) => {
        text += piece;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: JSON.parse(text) as Answer['body'] }));
      response.on('error', reject);
    });
    // The server may answer and close while the body is still going out: the answer is what counts.
    call.on('error', () => {});
    if (sending === 'declared') call.end(body);
    else {
      for (let at = 0; at < body.length; at += 16 * 1024) call.write(body.slice(at, at + 16 * 1024));
      call.end();
    }
  });
}

/** A body of exactly `bytes` bytes that the schema refuses (400: an unknown field), once it is parsed. */
function refusedOnceParsed(bytes: number): string {
  const head = '{"task":"notes","text":"Photosynthesis.","padding":"';
  return `${head}${'a'.repeat(bytes - head.length - 2)}"}`;
}

/** A valid body of exactly `bytes` bytes (a long text). */
function valid(bytes: number): string {
  const head = '{"task":"notes","text":"';
  return `${head}${'a'.repeat(bytes - head.length - 2)}"}`;
}

describe("an address's share of JSON body bytes", () => {
  it('refuses an address past its share 429 before its body is parsed, while another address is served at the same time', async () => {
    const { port, gateway, app } = await listen();
    const body = refusedOnceParsed(100_000);
    // Within the bucket (104 857 bytes): parsed, and refused by the schema.
    const first = await post(port, '127.0.0.2', body);
    expect(first.status).toBe(400);
    expect(first.body.error?.code).toBe('INVALID_REQUEST');
    // The same body again: 4 857 bytes left, so it is refused on its declared length, never parsed (else 400).
    const [again, other, otherValid] = await Promise.all([
      post(port, '127.0.0.2', body),
      post(port, '127.0.0.3', body),
      post(port, '127.0.0.3', valid(500)),
    ]);
    expect(again.status).toBe(429);
    expect(again.body.error?.code).toBe('TOO_MANY_REQUESTS');
    expect(again.body.error?.message).toContain('JSON_BODY_MB_PER_SECOND');
    // Retry-After: when 1 KiB a second will have refilled what the bucket lacks (100 000 - 4 857 bytes: 91 s).
    const lacking = 100_000 - (routeLimit - 100_000);
    expect(again.body.error?.retryAfterSeconds).toBeLessThanOrEqual(Math.ceil(lacking / refillPerSecond));
    expect(again.body.error?.retryAfterSeconds).toBeGreaterThan(Math.ceil(lacking / refillPerSecond) - 5);
    expect(again.headers['retry-after']).toBe(String(again.body.error?.retryAfterSeconds));
    // The other address has a bucket of its own: its bodies are parsed (400) and run (the gateway is called).
    expect(other.status).toBe(400);
    expect(other.body.error?.code).toBe('INVALID_REQUEST');
    expect(otherValid.status).toBe(503);
    expect(gateway.generateCalls).toHaveLength(1);
    // Counted once, under its own bound, in `studyhelper_refusals_total`.
    const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/^studyhelper_refusals_total\{limit="rate",what="json_body_bytes"\} 1$/mu);
  });

  it('counts a chunked body (no content-length) as it streams, and refuses one once it is over the share', async () => {
    const { port } = await listen();
    const body = refusedOnceParsed(60_000);
    const first = await post(port, '127.0.0.4', body, 'chunked');
    expect(first.status).toBe(400);
    // The chunked body took its 60 000 bytes: 44 857 are left, not enough for the same body declared…
    const declared = await post(port, '127.0.0.4', body);
    expect(declared.status).toBe(429);
    expect(declared.body.error?.code).toBe('TOO_MANY_REQUESTS');
    // …nor sent chunked: refused once its bytes pass what is left, never parsed (else 400).
    const chunked = await post(port, '127.0.0.4', body, 'chunked');
    expect(chunked.status).toBe(429);
    expect(chunked.body.error?.code).toBe('TOO_MANY_REQUESTS');
    expect(chunked.headers['retry-after']).toBeDefined();
  });

  it("lets one maximal honest body through (the bucket holds at least the route's largest body), and takes all of it", async () => {
    const { port, gateway } = await listen();
    const maximal = valid(routeLimit);
    const first = await post(port, '127.0.0.5', maximal);
    expect(first.status).toBe(503);
    const calls = gateway.generateCalls.length;
    expect(calls).toBeGreaterThan(0);
    // The bucket is empty now: a 10 KB body waits ~10 s for the refill.
    const next = await post(port, '127.0.0.5', valid(10_000));
    expect(next.status).toBe(429);
    expect(gateway.generateCalls).toHaveLength(calls);
  });
});

describe('every JSON route draws on the one share', () => {
  it('refuses a job creation from an address that spent its share on generations, and not from another', async () => {
    const { port } = await listen();
    // 10 KB, within the 16 KiB of POST /v1/jobs, refused 400 once parsed (an unknown field).
    const job = `{"documentId":"doc-1","padding":"${'a'.repeat(10_000)}"}`;
    expect((await post(port, '127.0.0.6', valid(routeLimit))).status).toBe(503);
    const [spent, fresh] = await Promise.all([
      post(port, '127.0.0.6', job, 'declared', '/v1/jobs'),
      post(port, '127.0.0.7', job, 'declared', '/v1/jobs'),
    ]);
    expect(spent.status).toBe(429);
    expect(spent.body.error?.message).toContain('JSON_BODY_MB_PER_SECOND');
    expect(fresh.status).toBe(400);
  });
});

describe('the buckets held', () => {
  it('forgets a bucket once it has refilled, and holds at most 10 000 addresses, the least recently seen forgotten first', () => {
    let now = 0;
    // 1 000 bytes a second, 10 000 deep: an emptied bucket is full again after 10 s.
    const share = createBodyShare({ bytesPerSecond: 1_000, burstBytes: 10_000, now: () => now });
    for (let n = 0; n < 10_001; n += 1) expect(share.take(`198.51.${Math.floor(n / 256)}.${n % 256}`, 10_000)).toBe(0);
    expect(share.size()).toBe(10_000);
    // The second address is still held: its bucket is empty, and needs 10 s for 10 000 bytes.
    expect(share.take('198.51.0.1', 10_000)).toBe(10);
    // The first was forgotten: it starts again from a full bucket.
    expect(share.take('198.51.0.0', 10_000)).toBe(0);
    // 10 s later every bucket has refilled: the next request finds only its own.
    now = 10_000;
    expect(share.take('203.0.113.1', 1)).toBe(0);
    expect(share.size()).toBe(1);
  });
});

describe('a chunked body refused for its size before its share runs out', () => {
  it('is answered 413 and the share that runs out on its later chunks takes nothing down', async () => {
    // The route's limit (1,000 bytes) is reached while the bucket (1,500) still covers the body; Fastify
    // answers 413 and stops reading, and the chunks already on their way then run the bucket out.
    const { default: Fastify } = await import('fastify');
    const { registerBodyShare } = await import('../../src/http/body-share.js');
    const app = Fastify({ bodyLimit: 1000 });
    apps.push(app);
    registerBodyShare(app, { bytesPerSecond: 1, burstBytes: 1500 });
    app.post('/echo', async (request) => request.body);
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as AddressInfo).port;
    const uncaught: unknown[] = [];
    const keep = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', keep);
    try {
      // Ten chunks of 400 bytes in one write: the server parses them in one read, one `data` event each.
      const chunks = Array.from({ length: 10 }, () => `190\r\n${'x'.repeat(400)}\r\n`).join('');
      const head = 'POST /echo HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port }, () => socket.end(`${head}${chunks}0\r\n\r\n`));
        let text = '';
        socket.on('data', (data: Buffer) => {
          text += data.toString('latin1');
        });
        socket.on('error', reject);
        socket.on('close', () => resolve(text));
      });
      const status = Number(answer.split(' ')[1]);
      expect(status).toBe(413);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', keep);
    }
  });
});
