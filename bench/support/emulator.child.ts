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
import { monitorEventLoopDelay } from 'node:perf_hooks';
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
// The emulator's own event-loop delay: one process serves every provider, so a window whose victim is slow
// while the service's loop is not can be told apart from one where the emulator kept it waiting.
const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();
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
    loopDelay: async (message) => {
      const value = { p99Ms: loopDelay.percentile(99) / 1e6, maxMs: loopDelay.max / 1e6 };
      if (message['reset'] === true) loopDelay.reset();
      return value;
    },
    close: async () => {
      await emulator.close();
      return {};
    },
  },
);
