/**
 * INSPECT: the gateway's actors reach a Stately inspector through the local relay, offline, and no key
 * or document text leaves the process whole.
 */
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { createWebSocketReceiver } from '@statelyai/inspect';
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { loadConfig } from '../../src/config.js';
import { startService } from '../../src/http/service.js';
import { startEmulator } from '../../src/emulator/index.js';
import type { Emulator } from '../../src/emulator/index.js';
import { sanitizeForInspection, startInspection } from '../../src/inspect/index.js';
import type { Inspection } from '../../src/inspect/index.js';
import { Secret } from '../../src/security/secret.js';
import { generateStudyTask } from '../../src/study/index.js';
import { gatewayOnEmulator } from '../jobs/support.js';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

describe('sanitizeForInspection', () => {
  it('redacts key-like fields, shows secrets as fingerprints and sends no string content but lengths', () => {
    const key = 'test-claude-key-0001';
    const out = JSON.stringify(
      sanitizeForInspection({
        apiKey: new Secret(key),
        headers: { authorization: `Bearer ${key}` },
        secret: new Secret(key),
        text: 'x'.repeat(5000),
        messages: [{ role: 'user', content: 'Photosynthesis' }],
        provider: 'claude',
        n: 3,
      }),
    );
    expect(out).not.toContain(key);
    expect(out).toContain('"[secret ');
    // Document text of any length leaves as its length only: a short text is the user's too.
    expect(out).not.toContain('Photosynthesis');
    expect(out).not.toContain('xxxx');
    expect(out).toContain('"content":"[string: 14 chars]"');
    expect(out).toContain('"text":"[string: 5000 chars]"');
    // Machine-defined words pass: the inspector stays readable.
    expect(out).toContain('"role":"user"');
    expect(out).toContain('"provider":"claude"');
    expect(out).toContain('"n":3');
  });

  it('cuts even a word field when it is long (no text smuggled under a word field)', () => {
    expect(sanitizeForInspection({ type: 'a'.repeat(65) })).toEqual({ type: '[string: 65 chars]' });
  });
});

describe('the inspector relay', () => {
  const stops: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await Promise.all(stops.map((stop) => stop()));
  });

  it('listens on loopback by default', async () => {
    const inspection = await startInspection({ port: 0 });
    stops.push(() => inspection.stop());
    expect(inspection.viewerUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(inspection.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    const port = Number(new URL(inspection.viewerUrl ?? '').port);
    const external = Object.values(networkInterfaces())
      .flat()
      .find((address) => address !== undefined && address.family === 'IPv4' && !address.internal);
    if (external !== undefined) {
      // Not reachable on the machine's other addresses.
      await expect(fetch(`http://${external.address}:${port}/`)).rejects.toThrow();
    }
    expect((await fetch(`${inspection.viewerUrl ?? ''}/`)).status).toBe(200);
  });

  it('accepts a WebSocket from its own page or from Node (no Origin), and refuses any other Origin', async () => {
    const inspection = await startInspection({ port: 0 });
    stops.push(() => inspection.stop());
    const url = inspection.url ?? '';
    const opens = (origin?: string): Promise<number | 'open'> =>
      new Promise((resolve) => {
        const socket = new WebSocket(url, origin === undefined ? {} : { origin });
        socket.once('open', () => {
          socket.close();
          resolve('open');
        });
        socket.once('unexpected-response', (_request, response) => {
          resolve(response.statusCode ?? 0);
          socket.terminate();
        });
        socket.once('error', () => resolve(0));
      });
    expect(await opens()).toBe('open');
    expect(await opens(inspection.viewerUrl)).toBe('open');
    expect(await opens('https://evil.example')).toBe(403);
    expect(await opens('http://localhost.evil.example:8080')).toBe(403);
    // And its page only to a loopback Host (no DNS rebinding).
    const port = new URL(inspection.viewerUrl ?? '').port;
    const page = await new Promise<number>((resolve, reject) => {
      const request = httpRequest({ host: '127.0.0.1', port, path: '/', headers: { host: `rebound.example:${port}` } }, (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      });
      request.on('error', reject);
      request.end();
    });
    expect(page).toBe(403);
  });

  it('logs a busy port and leaves inspection off; the service starts and answers anyway', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    const busyPort = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const warnings: string[] = [];
      const inspection = await startInspection({ port: busyPort, onWarning: (message) => warnings.push(message) });
      expect(warnings).toEqual([expect.stringMatching(/could not listen on 127\.0\.0\.1:\d+ \(EADDRINUSE\).*INSPECT_PORT/)]);
      expect(inspection.url).toBeUndefined();
      expect(() => inspection.inspect.next?.({ type: '@xstate.event' } as never)).not.toThrow();

      const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
      const service = await startService(
        loadConfig({ LOG_LEVEL: 'silent', PORT: '0', HOST: '127.0.0.1', INSPECT: 'true', INSPECT_PORT: String(busyPort) }),
        { log: { level: 'silent' } },
      );
      try {
        expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
        expect(warn).toHaveBeenCalledWith(expect.stringContaining('EADDRINUSE'));
      } finally {
        warn.mockRestore();
        await service.close();
      }
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });
});

describe('startInspection', () => {
  let emulator: Emulator | undefined;
  let inspection: Inspection | undefined;
  afterAll(async () => {
    await inspection?.stop();
    await emulator?.close();
  });

  it('relays the live actor system to a websocket receiver', async () => {
    const port = await freePort();
    inspection = await startInspection({ port });
    expect(inspection.viewerUrl).toBe(`http://127.0.0.1:${port}`);
    emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
    const gateway = gatewayOnEmulator(emulator, { inspect: inspection.inspect });
    const received: StatelyInspectionEvent[] = [];
    const receiver = createWebSocketReceiver({ server: inspection.url ?? '' });
    receiver.subscribe((event) => received.push(event));

    const key = 'test-claude-key-0001';
    const text = 'Photosynthesis converts light energy into chemical energy stored in glucose. '.repeat(20);
    const outcome = await generateStudyTask(gateway, { task: 'notes', text, lang: 'en', chain: [{ provider: 'claude', apiKey: new Secret(key) }] });
    expect(outcome.status).toBe('succeeded');
    await expect.poll(() => received.some((event) => event.type === '@xstate.event' && event.event.type === 'call.requested'), { timeout: 10_000 }).toBe(true);
    expect(received.some((event) => event.type === '@xstate.actor')).toBe(true);
    const all = JSON.stringify(received);
    expect(all).not.toContain(key);
    // Not a word of the document, prompt or answer: lengths only.
    expect(all).not.toContain('Photosynthesis');
    expect(all).not.toContain('glucose');
    expect(all).toMatch(/\[string: \d+ chars\]/);
    await gateway.stop();
  });
});
