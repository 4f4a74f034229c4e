import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig, withLimits } from '../http/support.js';
import type { LimitOverrides, StaticGateway } from '../http/support.js';

/**
 * Slow and non-reading clients against a listening server (real sockets): these deadlines are the
 * server's own, so the test runs them with short configured timeouts.
 */
const apps: FastifyInstance[] = [];
const sockets: Socket[] = [];

async function listen(env: NodeJS.ProcessEnv, limits: LimitOverrides = {}): Promise<{ app: FastifyInstance; gateway: StaticGateway; port: number }> {
  const gateway = staticGateway();
  const app = await buildApp({ config: withLimits(testConfig(env), limits), gateway, documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }), processMetrics: false });
  apps.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { app, gateway, port: address.port };
}

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

/** A raw socket that records what it receives and when it closes. */
function rawClient(port: number): { socket: Socket; received: () => string; closed: Promise<void> } {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  let data = '';
  socket.on('data', (chunk: Buffer) => {
    data += chunk.toString();
  });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  return { socket, received: () => data, closed };
}

/** Writes one byte of `text` every `everyMs` until the socket closes; returns the bytes written. */
function trickle(socket: Socket, text: string, everyMs: number): { written: () => number } {
  let index = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || index >= text.length) {
      clearInterval(timer);
      return;
    }
    socket.write(text[index] ?? '');
    index += 1;
  }, everyMs);
  socket.on('close', () => clearInterval(timer));
  return { written: () => index };
}

describe('slow request bodies and headers are cut (REQUEST_TIMEOUT_MS, and the headers within 10 s)', () => {
  it('cuts a body trickled a byte at a time with 408 REQUEST_TIMEOUT, and serves another client meanwhile', async () => {
    const { port } = await listen({ REQUEST_TIMEOUT_MS: '600' }, { server: { headersTimeoutMs: 300 } });
    const slow = rawClient(port);
    await new Promise<void>((resolve) => slow.socket.once('connect', () => resolve()));
    const body = JSON.stringify({ task: 'notes', text: 'x'.repeat(900) });
    slow.socket.write(
      `POST /v1/generate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nx-gpt-key: trickle-gpt-key-000001\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    const trickling = trickle(slow.socket, body, 40);
    // Another client is served normally while the slow one trickles.
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);
    await slow.closed;
    // Cut long before the body could have arrived (900+ bytes at 25 bytes a second is 36 s).
    expect(trickling.written()).toBeLessThan(body.length / 2);
    expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(slow.received()).toContain('"code":"REQUEST_TIMEOUT"');
  });

  it('cuts headers trickled a byte at a time (slowloris) with 408 REQUEST_TIMEOUT', async () => {
    const { port } = await listen({ REQUEST_TIMEOUT_MS: '2000' }, { server: { headersTimeoutMs: 300 } });
    const slow = rawClient(port);
    const headers = `GET /healthz HTTP/1.1\r\nHost: localhost\r\n${'x-padding: slowloris\r\n'.repeat(100)}\r\n`;
    const trickling = trickle(slow.socket, headers, 20);
    await slow.closed;
    expect(trickling.written()).toBeLessThan(headers.length / 2);
    expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
  });
});

describe('a server-sent events client that does not read is dropped (its buffer bound)', () => {
  it('drops the non-reading client of /v1/providers/events and keeps feeding the reading one', async () => {
    const { app, gateway, port } = await listen({}, { server: { sseMaxBufferBytes: 131_072 } });
    const baseline = gateway.listenerCount();

    // The reader: consumes everything and counts the transitions it saw.
    const controller = new AbortController();
    const reading = await fetch(`http://127.0.0.1:${port}/v1/providers/events`, { signal: controller.signal });
    const reader = reading.body?.getReader();
    if (reader === undefined) throw new Error('no body');
    let readerText = '';
    const decoder = new TextDecoder();
    const pump = (async (): Promise<void> => {
      for (;;) {
        const chunk = await reader.read().catch(() => ({ done: true as const, value: undefined }));
        if (chunk.done) return;
        readerText = (readerText + decoder.decode(chunk.value)).slice(-4096);
      }
    })();

    // The non-reader: sends its request and then never reads a byte.
    const stalled = rawClient(port);
    stalled.socket.write('GET /v1/providers/events HTTP/1.1\r\nHost: localhost\r\n\r\n');
    stalled.socket.pause();
    stalled.socket.removeAllListeners('data');
    // Both streams share one listener on the gateway (an event is rendered once for all streams).
    for (let turn = 0; turn < 200 && !readerText.includes('event: snapshot'); turn += 1) await new Promise((resolve) => setTimeout(resolve, 5));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(gateway.listenerCount()).toBe(baseline + 1);
    // The server's own count of open sockets tells when it dropped the stalled one (a paused client
    // socket never reads the server's FIN).
    const connections = (): Promise<number> =>
      new Promise((resolve, reject) => app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
    const open = await connections();
    expect(open).toBeGreaterThanOrEqual(2);

    // Breaker transitions until the stalled client's queue passes its bound (kernel buffers first).
    const transition = { provider: 'gpt' as const, from: 'closed' as const, to: 'open' as const, at: Date.now() };
    let rounds = 0;
    // A burst of 20 (about 30 KB) a millisecond: a reading client keeps up, the stalled one cannot.
    while ((await connections()) === open && rounds < 3000) {
      for (let index = 0; index < 20; index += 1) gateway.emitTransition(transition);
      rounds += 1;
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    // Dropped: the server closed its socket; the reader's stream still listens.
    expect(await connections()).toBe(open - 1);
    expect(gateway.listenerCount()).toBe(baseline + 1);

    // Nothing lost for the reader: a transition after the drop still reaches it.
    gateway.emitTransition({ ...transition, to: 'halfOpen' });
    for (let turn = 0; turn < 400 && !readerText.includes('"to":"halfOpen"'); turn += 1) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(readerText).toContain('"to":"halfOpen"');
    controller.abort();
    await pump;
  });
});
