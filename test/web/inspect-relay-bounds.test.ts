/**
 * The INSPECT relay holds bounded memory: the history kept for a late viewer is bounded in bytes, and a
 * viewer that never reads is disconnected instead of having every event queued for it.
 */
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startRelay, type Relay } from '../../src/inspect/relay.js';

const stops: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

async function relayWith(options: { maxBufferedBytes?: number; maxViewerBacklogBytes?: number }): Promise<Relay> {
  const relay = await startRelay({ host: '127.0.0.1', port: 0, ...options });
  stops.push(() => relay.stop());
  return relay;
}

function open(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
    stops.push(() => socket.terminate());
  });
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  return check();
}

describe('the inspector relay under clients that do not keep up', () => {
  it('keeps at most its byte bound of events for a viewer that connects late', async () => {
    const relay = await relayWith({ maxBufferedBytes: 64 * 1024 });
    const inspector = await open(relay.url);
    const live = await open(relay.url);
    let sawEnd = false;
    live.on('message', (data) => {
      if (data.toString() === 'end') sawEnd = true;
    });
    for (let index = 0; index < 50; index += 1) inspector.send('x'.repeat(16 * 1024));
    inspector.send('end');
    expect(await until(() => sawEnd, 10_000)).toBe(true);

    const late = new WebSocket(relay.url);
    stops.push(() => late.terminate());
    let bytes = 0;
    let lateSawEnd = false;
    late.on('message', (data) => {
      bytes += data.toString().length;
      if (data.toString() === 'end') lateSawEnd = true;
    });
    expect(await until(() => lateSawEnd, 10_000)).toBe(true);
    // 50 × 16 KiB were sent; what a late viewer gets is the newest within the bound.
    expect(bytes).toBeLessThanOrEqual(64 * 1024);
    expect(bytes).toBeGreaterThan(0);
  });

  it('disconnects a viewer that never reads once its backlog passes the bound; the inspector stays', async () => {
    const relay = await relayWith({ maxViewerBacklogBytes: 256 * 1024 });
    const inspector = await open(relay.url);
    // A viewer that completes the handshake and then never reads a byte.
    const port = Number(new URL(relay.url).port);
    const stalled: Socket = connect(port, '127.0.0.1');
    stops.push(() => void stalled.destroy());
    stalled.on('error', () => {});
    await new Promise<void>((resolve) => stalled.once('connect', resolve));
    stalled.write(
      `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    let upgraded = false;
    stalled.once('data', () => {
      upgraded = true;
      stalled.pause();
    });
    expect(await until(() => upgraded, 5_000)).toBe(true);
    let closed = false;
    stalled.once('close', () => {
      closed = true;
    });
    // 48 × 512 KiB: far more than the kernel's socket buffers on loopback hold.
    const event = 'y'.repeat(512 * 1024);
    for (let index = 0; index < 48; index += 1) {
      inspector.send(event);
      await until(() => inspector.bufferedAmount === 0, 5_000);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // Reading again, the viewer finds its connection closed: the relay gave up on it rather than queue 24 MiB.
    stalled.resume();
    expect(await until(() => closed, 10_000)).toBe(true);
    expect(relay.connections).toBe(1);
    expect(inspector.readyState).toBe(WebSocket.OPEN);
  });
});
