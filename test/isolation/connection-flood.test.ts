/**
 * Connection flooding: 22,000 connections from one address, each a POST whose body never
 * finishes, exhausted the process's file descriptors, and every new connection of every other client was
 * reset. Each address may hold MAX_CONNECTIONS_PER_ADDRESS (here 64) open at once; one more is destroyed as
 * it is accepted, and the other addresses keep connecting. The attacker runs in two processes of its own
 * (each has its own file limit), from 127.0.0.2; the victim asks from 127.0.0.1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { shareAddress } from '../../src/http/client-address.js';
import { staticGateway, testConfig, withLimits } from '../http/support.js';

const apps: FastifyInstance[] = [];
const children: ChildProcess[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) child.kill();
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function listen(env: NodeJS.ProcessEnv): Promise<{ app: FastifyInstance; port: number }> {
  const app = await buildApp({
    config: withLimits(testConfig({ REQUEST_TIMEOUT_MS: '120000', ...env }), { server: { headersTimeoutMs: 60_000 } }),
    gateway: staticGateway(),
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
  });
  apps.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, port: (app.server.address() as AddressInfo).port };
}

interface FloodReport {
  readonly connected: number;
  readonly refused: number;
  readonly open: number;
}

function flood(port: number, from: string, count: number): Promise<FloodReport> {
  const child = spawn(process.execPath, [new URL('./support/connection-flood.child.mjs', import.meta.url).pathname, String(port), from, String(count)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the flood child exited (${code})`)));
    createInterface({ input: child.stdout! }).once('line', (line) => resolve(JSON.parse(line) as FloodReport));
  });
}

/** GET /healthz on a new connection from the victim's address: the status, or the socket error's code. */
function victim(port: number): Promise<number | string> {
  return new Promise((resolve) => {
    const call = request({ port, host: '127.0.0.1', localAddress: '127.0.0.1', path: '/healthz', agent: false, timeout: 10_000 }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    call.on('timeout', () => call.destroy(new Error('timeout')));
    call.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    call.end();
  });
}

describe('connection caps', () => {
  it("keeps one address to MAX_CONNECTIONS_PER_ADDRESS under a 22,000-connection flood; the victim's new connections still get in", async () => {
    const { app, port } = await listen({ MAX_CONNECTIONS_PER_ADDRESS: '64' });
    // Two processes of 11,000: together past this process's file limit (20,000 on the test machine).
    const reports = await Promise.all([flood(port, '127.0.0.2', 11_000), flood(port, '127.0.0.2', 11_000)]);
    // The server holds at most the cap (the flood's own count can lag: a close reaches a loaded client late).
    const held = await new Promise<number>((resolve, reject) =>
      app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
    );
    expect(held).toBeLessThanOrEqual(64);
    expect(reports.reduce((sum, report) => sum + report.connected, 0)).toBeGreaterThan(64);
    const answers = [];
    for (let attempt = 0; attempt < 10; attempt += 1) answers.push(await victim(port));
    expect(answers).toEqual(Array.from({ length: 10 }, () => 200));
  }, 180_000);

  it('caps the instance at MAX_CONNECTIONS, whoever connects', async () => {
    const { port } = await listen({ MAX_CONNECTIONS: '20', MAX_CONNECTIONS_PER_ADDRESS: '1000' });
    const opened = await Promise.all(
      Array.from({ length: 30 }, (_, index) => new Promise<Socket>((resolve) => {
        const socket = connect({ port, host: '127.0.0.1', localAddress: `127.0.0.${3 + (index % 5)}` }, () => resolve(socket));
        socket.on('error', () => {});
        sockets.push(socket);
      })),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(opened.filter((socket) => !socket.destroyed)).toHaveLength(20);
  });
});

describe('share addresses', () => {
  it('counts IPv4 by address, IPv4-mapped IPv6 as IPv4, and IPv6 by its /64', () => {
    expect(shareAddress('198.51.100.7')).toBe('198.51.100.7');
    expect(shareAddress('::ffff:198.51.100.7')).toBe('198.51.100.7');
    expect(shareAddress('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:1:2::/64');
    expect(shareAddress('2001:0db8:0001:0002::1')).toBe('2001:db8:1:2::/64');
    expect(shareAddress('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(shareAddress('::1')).toBe('0:0:0:0::/64');
    expect(shareAddress('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(shareAddress(undefined)).toBe('unknown');
  });
});
