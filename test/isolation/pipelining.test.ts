/**
 * Pipelined requests are bounded per connection: a client writing thousands of requests at once on one
 * socket has at most two of them handed to the app at a time, and the rest wait unparsed until those are
 * answered (src/http/pipelining.ts), and one address's pipelined requests are paced (100 a second, as many
 * at once). Every request is still answered, in order. The real service on loopback, a raw TCP client; the
 * server's own `request` events and responses' `close` are counted.
 */
import net from 'node:net';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startService, type Service } from '../../src/http/service.js';
import { boundPipelining } from '../../src/http/pipelining.js';

let service: Service;
let port: number;
/** Per server-side socket: requests handed to the app and not yet answered, now and at most. */
const inFlight = new Map<Socket, { now: number; most: number; seen: number }>();

beforeAll(async () => {
  service = await startService(loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent' }));
  port = Number(new URL(service.url).port);
  service.app.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const counts = inFlight.get(request.socket) ?? { now: 0, most: 0, seen: 0 };
    inFlight.set(request.socket, counts);
    counts.now += 1;
    counts.seen += 1;
    counts.most = Math.max(counts.most, counts.now);
    response.once('close', () => {
      counts.now -= 1;
    });
  });
});

afterAll(async () => {
  await service.close();
});

/** Starts `server` on a free loopback port and gives the port. */
async function listenOnLoopback(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return typeof address === 'object' && address !== null ? address.port : 0;
}

/** Writes `raw` at once (then half-closes when `end`), reads until `answers` status lines came or the socket closed. */
function pipeline(raw: string, answers: number, end = false): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    const statuses = (): string[] => text.match(/HTTP\/1\.1 \d{3}/g) ?? [];
    socket.on('data', (data: Buffer) => {
      text += data.toString('latin1');
      if (statuses().length >= answers) {
        socket.destroy();
        resolve(statuses());
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(statuses()));
    socket.setTimeout(60_000, () => {
      socket.destroy();
      reject(new Error(`only ${statuses().length} answers within 60 s`));
    });
    socket.write(raw);
    if (end) socket.end();
  });
}

describe('pipelined requests on one connection', () => {
  it('hands at most two of 300 pipelined requests to the app at a time, and answers all of them', async () => {
    inFlight.clear();
    const statuses = await pipeline('GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n'.repeat(300), 300);
    expect(statuses).toHaveLength(300);
    expect(new Set(statuses)).toEqual(new Set(['HTTP/1.1 200']));
    const [counts] = [...inFlight.values()];
    expect(inFlight.size).toBe(1);
    expect(counts?.seen).toBe(300);
    expect(counts?.most).toBeLessThanOrEqual(2);
  });

  it('reads a pipelined body cut anywhere, and answers everything sent before a half-close', async () => {
    inFlight.clear();
    const body = '{"action":"reset"}';
    const post = `POST /v1/providers/gpt/breaker HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const get = 'GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n';
    const statuses = await pipeline(`${get}${post}${get}`.repeat(50), 150, true);
    expect(statuses).toHaveLength(150);
    // No ADMIN_TOKEN: the breaker control answers 404 or 401 whatever the body; the GETs answer 200, in order.
    statuses.forEach((status, index) => {
      if (index % 3 === 1) expect(status).not.toBe('HTTP/1.1 200');
      else expect(status).toBe('HTTP/1.1 200');
    });
    expect([...inFlight.values()][0]?.most).toBeLessThanOrEqual(2);
  });
});

describe("one address's pipelined requests", () => {
  it('are parsed a token each: the first request and a burst of tokens at once, then as the clock refills them', async () => {
    // A plain Node server with the bound, a clock the test moves: 10 tokens a second, as many at once.
    let clock = 0;
    let handled = 0;
    const server = createServer((_request, response) => {
      handled += 1;
      response.end('ok');
    });
    const paced: string[] = [];
    boundPipelining(server, { perAddressPerSecond: 10, now: () => clock, onPaced: (pace) => paced.push(pace) });
    const serverPort = await listenOnLoopback(server);
    const socket = net.connect(serverPort, '127.0.0.1');
    let answers = 0;
    socket.on('data', (data: Buffer) => {
      answers += (data.toString('latin1').match(/HTTP\/1\.1 200/g) ?? []).length;
    });
    socket.write('GET / HTTP/1.1\r\nHost: test\r\n\r\n'.repeat(50));
    const settle = async (count: number): Promise<void> => {
      for (let turn = 0; turn < 5000 && answers < count; turn += 1) await new Promise((resolve) => setImmediate(resolve));
      // Then a few more turns, in which nothing more may come.
      for (let turn = 0; turn < 50; turn += 1) await new Promise((resolve) => setImmediate(resolve));
    };
    // The first request is not pipelined; the next 10 take the 10 tokens; then nothing while the clock stands.
    await settle(11);
    expect([answers, handled]).toEqual([11, 11]);
    // The 12th waits, retried every 100 ms the clock stands: one wait, told once.
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(paced).toEqual(['pipelined']);
    // Half a second: 5 tokens more (the waiting request is retried within the 100 ms one token takes).
    clock += 500;
    for (let tries = 0; tries < 100 && answers < 16; tries += 1) await new Promise((resolve) => setTimeout(resolve, 20));
    await settle(16);
    expect(answers).toBe(16);
    expect(paced).toEqual(['pipelined', 'pipelined']);
    socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('stops reading a body nobody reads: the request holds its buffer, not the whole body, and the rest follows once it is read', async () => {
    // A handler that leaves the body unread for a while (as one that refuses on the headers, or reads slowly).
    let held: IncomingMessage | undefined;
    const server = createServer((request) => {
      held = request;
    });
    boundPipelining(server);
    const serverPort = await listenOnLoopback(server);
    const socket = net.connect(serverPort, '127.0.0.1');
    socket.on('error', () => {});
    const declared = 32 * 1024 * 1024;
    socket.write(`POST / HTTP/1.1\r\nHost: test\r\nContent-Length: ${declared}\r\n\r\n`);
    const chunk = Buffer.alloc(64 * 1024, 0x41);
    let written = 0;
    const pump = (): void => {
      while (written < declared) {
        written += chunk.length;
        if (!socket.write(chunk)) {
          socket.once('drain', pump);
          return;
        }
      }
    };
    pump();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const request = held;
    expect(request).toBeDefined();
    // Node's parser asks for no more past the request's high-water mark; what one read brings may overshoot it.
    expect(request?.readableLength ?? Infinity).toBeLessThan(request === undefined ? 0 : request.readableHighWaterMark + 256 * 1024);
    expect(request?.socket.bytesRead ?? Infinity).toBeLessThan(2 * 1024 * 1024);
    // Read, the body comes whole.
    let received = 0;
    request?.on('data', (data: Buffer) => {
      received += data.length;
    });
    await new Promise<void>((resolve) => request?.once('end', resolve));
    expect(received).toBe(declared);
    socket.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }, 60_000);
});

describe("one address's requests, pipelined or not", () => {
  it('are parsed a token each across its keep-alive connections, while another address is served; then as the clock refills them', async () => {
    // A plain Node server with the bound, a clock the test moves: 10 requests a second, as many at once.
    let clock = 0;
    const handled = new Map<string, number>();
    const server = createServer((request, response) => {
      const from = request.socket.remoteAddress ?? '';
      handled.set(from, (handled.get(from) ?? 0) + 1);
      response.end('ok');
    });
    const paced: string[] = [];
    boundPipelining(server, { requestsPerSecond: 10, now: () => clock, onPaced: (pace) => paced.push(pace) });
    const serverPort = await listenOnLoopback(server);
    // Keep-alive clients, never pipelining: each sends its next request once the answer to the last came.
    const answered = new Map<string, number>();
    const sockets: net.Socket[] = [];
    const client = (localAddress: string, requests: number): void => {
      const socket = net.connect({ port: serverPort, host: '127.0.0.1', localAddress });
      sockets.push(socket);
      let sent = 0;
      const send = (): void => {
        sent += 1;
        socket.write('GET / HTTP/1.1\r\nHost: test\r\n\r\n');
      };
      socket.on('connect', send);
      socket.on('data', (data: Buffer) => {
        const answers = (data.toString('latin1').match(/HTTP\/1\.1 200/g) ?? []).length;
        answered.set(localAddress, (answered.get(localAddress) ?? 0) + answers);
        if (answers > 0 && sent < requests) send();
      });
    };
    const settle = async (from: string, count: number): Promise<void> => {
      for (let tries = 0; tries < 250 && (answered.get(from) ?? 0) < count; tries += 1) await new Promise((resolve) => setTimeout(resolve, 20));
      // Then a while more, in which nothing more may come (a waiting request is retried every 100 ms).
      await new Promise((resolve) => setTimeout(resolve, 300));
    };
    for (let connection = 0; connection < 4; connection += 1) client('127.0.0.2', 20);
    // The burst, 10 requests of the 80, and nothing more while the clock stands.
    await settle('127.0.0.2', 10);
    expect([answered.get('127.0.0.2'), handled.get('127.0.0.2')]).toEqual([10, 10]);
    // Each of its 4 connections has a request waiting, retried while the clock stands: 4 waits, each told once.
    expect(paced).toEqual(['requests', 'requests', 'requests', 'requests']);
    // Another address has its own share: served while the first waits.
    client('127.0.0.3', 5);
    await settle('127.0.0.3', 5);
    expect(answered.get('127.0.0.3')).toBe(5);
    expect(answered.get('127.0.0.2')).toBe(10);
    expect(paced).toHaveLength(4);
    // Half a second: 5 requests more for the first address.
    clock += 500;
    await settle('127.0.0.2', 15);
    expect([answered.get('127.0.0.2'), handled.get('127.0.0.2')]).toEqual([15, 15]);
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it("a request head waiting for a pipelined token has paid its address's request token once, however often it is retried", async () => {
    // 100 requests a second and as many at once; 20 pipelined a second (a waiting head is retried every 50 ms).
    const clock = 0;
    const server = createServer((_request, response) => response.end('ok'));
    boundPipelining(server, { requestsPerSecond: 100, perAddressPerSecond: 20, now: () => clock });
    const serverPort = await listenOnLoopback(server);
    const count = (socket: net.Socket): (() => number) => {
      let answers = 0;
      socket.on('data', (data: Buffer) => {
        answers += (data.toString('latin1').match(/HTTP\/1\.1 200/g) ?? []).length;
      });
      return () => answers;
    };
    const until = async (done: () => boolean): Promise<void> => {
      for (let tries = 0; tries < 250 && !done(); tries += 1) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    // 50 pipelined requests: the first is not pipelined, 20 take the pipelined tokens, the 22nd takes its request
    // token and waits on the pipelined bucket (22 request tokens in all), retried ~20 times over the next second
    // while the clock stands.
    const pipeliner = net.connect({ port: serverPort, host: '127.0.0.1', localAddress: '127.0.0.4' });
    const pipelined = count(pipeliner);
    pipeliner.write('GET / HTTP/1.1\r\nHost: test\r\n\r\n'.repeat(50));
    await until(() => pipelined() >= 21);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(pipelined()).toBe(21);
    // The same address, keep-alive, one request after another: the 78 request tokens left, then nothing.
    const keepAlive = net.connect({ port: serverPort, host: '127.0.0.1', localAddress: '127.0.0.4' });
    const answered = count(keepAlive);
    let sent = 0;
    const send = (): void => {
      sent += 1;
      keepAlive.write('GET / HTTP/1.1\r\nHost: test\r\n\r\n');
    };
    keepAlive.on('connect', send);
    keepAlive.on('data', () => {
      if (sent < 100 && answered() === sent) send();
    });
    await until(() => answered() >= 78);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(answered()).toBe(78);
    pipeliner.destroy();
    keepAlive.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
});
