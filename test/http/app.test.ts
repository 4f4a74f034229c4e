import type { FastifyInstance } from 'fastify';
import { Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig } from './support.js';
import type { StaticGateway } from './support.js';

const apps: FastifyInstance[] = [];

async function start(env: NodeJS.ProcessEnv = {}): Promise<{ app: FastifyInstance; gateway: StaticGateway }> {
  const gateway = staticGateway();
  const app = await buildApp({
    config: testConfig(env),
    gateway,
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
  });
  apps.push(app);
  return { app, gateway };
}

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

function expectContractError(response: { statusCode: number; json: () => unknown; headers: Record<string, unknown> }, status: number, code: string): string {
  expect(response.statusCode).toBe(status);
  expect(String(response.headers['content-type'])).toContain('application/json');
  const body = response.json() as { error: { code: string; message: string } };
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error.message;
}

const key = { 'x-claude-key': 'test-claude-key-0001' };

describe('error handling', () => {
  it('answers an unknown route with 404 NOT_FOUND in the contract body', async () => {
    const { app } = await start();
    expectContractError(await app.inject({ method: 'GET', url: '/nope' }), 404, 'NOT_FOUND');
    expectContractError(await app.inject({ method: 'DELETE', url: '/v1/generate' }), 404, 'NOT_FOUND');
  });

  it('answers malformed JSON with 400 INVALID_REQUEST without quoting the body', async () => {
    const { app } = await start();
    const response = await app.inject({
      method: 'POST',
      url: '/v1/generate',
      headers: { 'content-type': 'application/json', ...key },
      payload: '{"task": "notes", "text": "secret-looking-text-here',
    });
    const message = expectContractError(response, 400, 'INVALID_REQUEST');
    expect(message).toMatch(/JSON/);
    expect(message).not.toContain('secret-looking');
  });

  it('answers an empty JSON body and a wrong content type with 400 INVALID_REQUEST', async () => {
    const { app } = await start();
    expectContractError(
      await app.inject({ method: 'POST', url: '/v1/generate', headers: { 'content-type': 'application/json', ...key }, payload: '' }),
      400,
      'INVALID_REQUEST',
    );
    const message = expectContractError(
      await app.inject({ method: 'POST', url: '/v1/generate', headers: { 'content-type': 'text/plain', ...key }, payload: 'hello' }),
      400,
      'INVALID_REQUEST',
    );
    expect(message).toContain('application/json');
    expectContractError(await app.inject({ method: 'POST', url: '/v1/generate', headers: key }), 400, 'INVALID_REQUEST');
  });

  it('answers a prototype-poisoning body with 400 INVALID_REQUEST', async () => {
    const { app } = await start();
    const response = await app.inject({
      method: 'POST',
      url: '/v1/generate',
      headers: { 'content-type': 'application/json', ...key },
      payload: '{"task":"notes","text":"x","__proto__":{"polluted":true}}',
    });
    expectContractError(response, 400, 'INVALID_REQUEST');
  });

  it('answers an oversize JSON body with 413 REQUEST_TOO_LARGE', async () => {
    const { app } = await start({ MAX_UPLOAD_MB: '0.01' });
    const response = await app.inject({
      method: 'POST',
      url: '/v1/generate',
      headers: { 'content-type': 'application/json', ...key },
      payload: JSON.stringify({ task: 'notes', text: 'a'.repeat(20_000) }),
    });
    expectContractError(response, 413, 'REQUEST_TOO_LARGE');
  });
});

describe('requests Fastify or Node cannot parse', () => {
  it('answers a malformed URL with 400 INVALID_REQUEST', async () => {
    const { app } = await start();
    expectContractError(await app.inject({ method: 'GET', url: '/v1/providers/%E0%A4%A' }), 400, 'INVALID_REQUEST');
  });

  it('answers a malformed HTTP request on the socket with the contract body', async () => {
    const { app } = await start();
    const address = new URL(await app.listen({ port: 0, host: '127.0.0.1' }));
    const { connect } = await import('node:net');
    const raw = await new Promise<string>((resolve, reject) => {
      let data = '';
      const socket = connect(Number(address.port), address.hostname, () => socket.write('GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'));
      socket.on('data', (chunk) => (data += chunk.toString()));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'INVALID_REQUEST' } });
  });
});

describe('POST /v1/generate request validation', () => {
  it.each([
    ['an unknown task', { task: 'essay', text: 'x' }, /task/],
    ['neither text nor documentId', { task: 'notes' }, /text.*documentId/],
    ['both text and documentId', { task: 'notes', text: 'x', documentId: 'd' }, /not both/],
    ['an extra field', { task: 'notes', text: 'x', extra: 1 }, /extra/],
    ['an extra option', { task: 'notes', text: 'x', options: { lang: 'en', colour: 'red' } }, /colour/],
    ['an unknown provider id', { task: 'notes', text: 'x', providers: ['claude', 'gemini'] }, /providers/],
    ['a repeated provider id', { task: 'notes', text: 'x', providers: ['claude', 'claude'] }, /unique/],
    ['an empty provider list', { task: 'notes', text: 'x', providers: [] }, /providers/],
    ['a count of 0', { task: 'mcq', text: 'x', options: { lang: 'en', count: 0 } }, /count/],
    ['a count of 51', { task: 'mcq', text: 'x', options: { lang: 'en', count: 51 } }, /count/],
    ['a fractional count', { task: 'mcq', text: 'x', options: { lang: 'en', count: 2.5 } }, /count/],
    ['an unknown language', { task: 'notes', text: 'x', options: { lang: 'fr' } }, /lang/],
    ['notes of the wrong shape', { task: 'mcq', text: 'x', options: { lang: 'en', notes: { keyConcepts: 'no' } } }, /notes/],
    ['a text of the wrong type', { task: 'notes', text: 42 }, /text/],
    ['an empty text', { task: 'notes', text: '   ' }, /text/],
    ['an array body', [1, 2], /body/],
  ])('refuses %s with 400 INVALID_REQUEST saying what is wrong', async (_name, payload, pattern) => {
    const { app } = await start();
    const response = await app.inject({ method: 'POST', url: '/v1/generate', headers: key, payload: payload as object });
    expect(expectContractError(response, 400, 'INVALID_REQUEST')).toMatch(pattern);
  });

  it('answers 400 NO_PROVIDER_KEY when no requested provider has a key', async () => {
    const { app } = await start();
    const none = await app.inject({ method: 'POST', url: '/v1/generate', payload: { task: 'notes', text: 'x' } });
    expectContractError(none, 400, 'NO_PROVIDER_KEY');
    const otherOnly = await app.inject({
      method: 'POST',
      url: '/v1/generate',
      headers: { 'x-gpt-key': 'test-gpt-key-0001' },
      payload: { task: 'notes', text: 'x', providers: ['claude', 'timelygpt'] },
    });
    expect(expectContractError(otherOnly, 400, 'NO_PROVIDER_KEY')).toContain('x-claude-key');
    const blank = await app.inject({ method: 'POST', url: '/v1/generate', headers: { 'x-claude-key': '   ' }, payload: { task: 'notes', text: 'x' } });
    expectContractError(blank, 400, 'NO_PROVIDER_KEY');
  });

  it('answers 404 DOCUMENT_NOT_FOUND for an unknown documentId', async () => {
    const { app } = await start();
    const response = await app.inject({ method: 'POST', url: '/v1/generate', headers: key, payload: { task: 'notes', documentId: 'missing-doc' } });
    expectContractError(response, 404, 'DOCUMENT_NOT_FOUND');
  });
});

describe('health', () => {
  it('answers /healthz and /readyz', async () => {
    const { app } = await start();
    const health = await app.inject({ method: 'GET', url: '/healthz' });
    expect(health.statusCode).toBe(200);
    expect(health.json()).toMatchObject({ status: 'ok' });
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready', store: 'memory', storeReachable: true });
  });

  it('reports degraded when the store is unreachable', async () => {
    const app = await buildApp({
      config: testConfig(),
      gateway: staticGateway(),
      documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
      processMetrics: false,
      readiness: async () => ({ store: 'redis', storeReachable: false }),
    });
    apps.push(app);
    expect((await app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'degraded', store: 'redis', storeReachable: false });
  });
});

describe('GET /v1/providers', () => {
  it('lists every provider with its breaker and stats', async () => {
    const { app } = await start();
    const response = await app.inject({ method: 'GET', url: '/v1/providers' });
    expect(response.statusCode).toBe(200);
    const body = response.json() as { providers: { id: string; breaker: { state: string }; stats: { calls: number } }[] };
    expect(body.providers.map((p) => p.id)).toEqual(['claude', 'gpt', 'timelygpt']);
    expect(body.providers[0]).toMatchObject({
      model: 'claude-model',
      breaker: { state: 'closed', consecutiveFailures: 0, openedAt: null, retryAt: null, threshold: 5, recoveryMs: 60_000 },
      stats: { calls: 0, successes: 0, failures: 0, ignored: 0, rejected: 0, opens: 0 },
    });
  });
});

describe('POST /v1/providers/:id/breaker', () => {
  const token = 'test-admin-token-0001';
  const auth = { authorization: `Bearer ${token}` };

  it('does not exist without ADMIN_TOKEN', async () => {
    const { app, gateway } = await start();
    const response = await app.inject({ method: 'POST', url: '/v1/providers/claude/breaker', headers: auth, payload: { action: 'reset' } });
    expectContractError(response, 404, 'NOT_FOUND');
    expect(gateway.controlled).toEqual([]);
  });

  it.each([
    ['no Authorization header', {}],
    ['a wrong token', { authorization: 'Bearer wrong-token-0000000001' }],
    ['a token prefix', { authorization: `Bearer ${token.slice(0, 10)}` }],
    ['another scheme', { authorization: `Basic ${token}` }],
  ])('answers 401 ADMIN_AUTH_REQUIRED with %s', async (_name, headers) => {
    const { app, gateway } = await start({ ADMIN_TOKEN: token });
    const response = await app.inject({ method: 'POST', url: '/v1/providers/claude/breaker', headers, payload: { action: 'reset' } });
    expect(expectContractError(response, 401, 'ADMIN_AUTH_REQUIRED')).not.toContain(token);
    expect(gateway.controlled).toEqual([]);
  });

  it('answers 401 before looking at the provider or the body', async () => {
    const { app } = await start({ ADMIN_TOKEN: token });
    const response = await app.inject({ method: 'POST', url: '/v1/providers/gemini/breaker', payload: { action: 'explode' } });
    expectContractError(response, 401, 'ADMIN_AUTH_REQUIRED');
  });

  it('answers 404 PROVIDER_NOT_FOUND for an unknown provider', async () => {
    const { app } = await start({ ADMIN_TOKEN: token });
    const response = await app.inject({ method: 'POST', url: '/v1/providers/gemini/breaker', headers: auth, payload: { action: 'reset' } });
    expectContractError(response, 404, 'PROVIDER_NOT_FOUND');
  });

  it.each([[{ action: 'explode' }], [{}], [{ action: 'reset', extra: true }]])('answers 400 INVALID_REQUEST for body %j', async (payload) => {
    const { app, gateway } = await start({ ADMIN_TOKEN: token });
    const response = await app.inject({ method: 'POST', url: '/v1/providers/gpt/breaker', headers: auth, payload });
    expectContractError(response, 400, 'INVALID_REQUEST');
    expect(gateway.controlled).toEqual([]);
  });

  it.each(['reset', 'forceOpen', 'release'] as const)('applies %s and answers the provider status', async (action) => {
    const { app, gateway } = await start({ ADMIN_TOKEN: token });
    const response = await app.inject({ method: 'POST', url: '/v1/providers/timelygpt/breaker', headers: auth, payload: { action } });
    expect(response.statusCode).toBe(200);
    expect(gateway.controlled).toEqual([{ id: 'timelygpt', action }]);
    expect(response.json()).toMatchObject({ id: 'timelygpt', breaker: { state: action === 'forceOpen' ? 'open' : 'closed' } });
  });
});

describe('shutdown', () => {
  it('stops the gateway when the app closes', async () => {
    const { app, gateway } = await start();
    await app.close();
    expect(gateway.stopped).toBe(true);
  });
});

describe('graceful shutdown', () => {
  it('lets an in-flight request finish, then stops the gateway', async () => {
    const { app, gateway } = await start();
    let release: () => void = () => undefined;
    gateway.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const inFlight = fetch(`${address}/v1/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...key },
      body: JSON.stringify({ task: 'notes', text: 'Photosynthesis turns light into chemical energy.' }),
    });
    await expect.poll(() => gateway.generateCalls.length).toBe(1);
    let closed = false;
    const closing = app.close().then(() => {
      closed = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    try {
      expect(closed).toBe(false);
      expect(gateway.stopped).toBe(false);
    } finally {
      release();
    }
    const response = await inFlight;
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('PROVIDERS_UNAVAILABLE');
    await closing;
    expect(gateway.stopped).toBe(true);
  });

  it('closes the keep-alive socket of a request that was in flight when shutdown began', async () => {
    const { app, gateway } = await start();
    let release: () => void = () => undefined;
    gateway.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const inFlight = fetch(`${address}/v1/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...key },
      body: JSON.stringify({ task: 'notes', text: 'x' }),
    });
    await expect.poll(() => gateway.generateCalls.length).toBe(1);
    const closing = app.close();
    await new Promise((resolve) => setImmediate(resolve));
    release();
    // Without `connection: close` the server would wait for the keep-alive timeout (72 s) to close.
    expect((await inFlight).headers.get('connection')).toBe('close');
    await closing;
  });

  /**
   * A raw connection to `app` (listening on loopback) that sends `first` (if any), then a byte every 100 ms
   * when `trickle`; `closeTook` closes the app and says how long it took, once the socket was closed too.
   */
  async function rawClient(app: FastifyInstance, options: { first?: string; trickle?: boolean } = {}): Promise<{ closeTook(): Promise<number> }> {
    const address = new URL(await app.listen({ port: 0, host: '127.0.0.1' }));
    const socket = connect(Number(address.port), address.hostname);
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    if (options.first !== undefined) socket.write(options.first);
    const trickle = options.trickle === true ? setInterval(() => socket.write('a'), 100) : undefined;
    const socketClosed = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => setTimeout(resolve, 300));
    return {
      async closeTook() {
        const closedAt = performance.now();
        try {
          await app.close();
          const took = performance.now() - closedAt;
          await socketClosed;
          return took;
        } finally {
          clearInterval(trickle);
          socket.destroy();
        }
      },
    };
  }

  it('closes at once a connection that has sent nothing yet (Node does not count it as idle)', async () => {
    const { app } = await start();
    const client = await rawClient(app);
    // Not the headers deadline (10 s): at once.
    expect(await client.closeTook()).toBeLessThan(2000);
  });

  it('closes a connection whose request is still arriving once the headers deadline has passed since shutdown began', async () => {
    // Headers are due within min(10 s, REQUEST_TIMEOUT_MS): 800 ms here.
    const { app } = await start({ REQUEST_TIMEOUT_MS: '800' });
    // Half a request line, then a byte every 100 ms: the socket is never silent, the request never complete.
    // Node stops its own header and request deadlines once close() begins: without the sweep, this
    // connection would hold close() open for as long as the client trickles.
    const client = await rawClient(app, { first: 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ', trickle: true });
    expect(await client.closeTook()).toBeLessThan(5000);
  });

  it('closes the keep-alive socket of an event stream that ends after shutdown began', async () => {
    const { app, gateway } = await start();
    let release: () => void = () => undefined;
    gateway.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const address = new URL(await app.listen({ port: 0, host: '127.0.0.1' }));
    // A client that keeps its sockets (as a browser does): nothing on its side ends the connection.
    const agent = new Agent({ keepAlive: true, keepAliveMsecs: 60_000 });
    try {
      const streamed = new Promise<string>((resolve, reject) => {
        const request = httpRequest(
          {
            host: address.hostname,
            port: address.port,
            path: '/v1/generate',
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...key },
          },
          (response) => {
            let text = '';
            response.setEncoding('utf8');
            response.on('data', (chunk: string) => (text += chunk));
            response.on('end', () => resolve(text));
          },
        );
        request.on('error', reject);
        request.end(JSON.stringify({ task: 'notes', text: 'x' }));
      });
      await expect.poll(() => gateway.generateCalls.length).toBe(1);
      const closing = app.close();
      await new Promise((resolve) => setImmediate(resolve));
      const endedAt = performance.now();
      release();
      expect(await streamed).toContain('event: ');
      // The stream's socket, idle once the stream ended, must not hold close() open until the client's
      // keep-alive or the server's (72 s) ends.
      await closing;
      expect(performance.now() - endedAt).toBeLessThan(2000);
    } finally {
      agent.destroy();
    }
  });
});
