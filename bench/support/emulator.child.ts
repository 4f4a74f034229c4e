/**
 * The provider emulator in its own process (bench): answers at once unless a fault says otherwise.
 *
 * Keep-alive: the emulator's server says `Keep-Alive: timeout=1`; undici (fetch, both SDKs) and
 * node's http Agent subtract a safety margin of 1-2 s from that hint and so never reuse a socket:
 * every call opened a new TCP connection (measured: 1,000 connections for 1,000 calls), which cost
 * more CPU than anything the benches set out to measure. Real providers keep connections open for
 * many seconds, so here the server's `keepAliveTimeout` is pinned to BENCH_EMULATOR_KEEPALIVE_MS
 * (default 65 s) by wrapping `http.createServer` before the emulator module loads.
 */
import http from 'node:http';
import { syncBuiltinESMExports } from 'node:module';
import { serveParent } from './child-ipc.js';

const keepAliveMs = Number(process.env.BENCH_EMULATOR_KEEPALIVE_MS ?? 65_000);
let connections = 0;
const createServer = http.createServer;
http.createServer = ((...args: Parameters<typeof http.createServer>) => {
  const server = createServer(...args);
  Object.defineProperty(server, 'keepAliveTimeout', { get: () => keepAliveMs, set: () => undefined });
  server.on('connection', () => {
    connections += 1;
  });
  return server;
}) as typeof http.createServer;
syncBuiltinESMExports();

const { startEmulator } = await import('../../src/emulator/index.js');
const emulator = await startEmulator({ port: 0, host: '127.0.0.1' });
serveParent(
  {
    url: emulator.url,
    anthropicBaseUrl: emulator.anthropicBaseUrl,
    openaiBaseUrl: emulator.openaiBaseUrl,
    timelygptBaseUrl: emulator.timelygptBaseUrl,
    keepAliveMs,
  },
  {
    /** TCP connections accepted so far (a check that clients reuse their sockets). */
    connections: async () => connections,
    close: async () => {
      await emulator.close();
      return {};
    },
  },
);
