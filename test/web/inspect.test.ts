/**
 * INSPECT: the gateway's actors reach a Stately inspector through the local relay, offline, and no key
 * or document text leaves the process whole.
 */
import { createServer } from 'node:net';
import { createWebSocketReceiver } from '@statelyai/inspect';
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import { afterAll, describe, expect, it } from 'vitest';
import { createGateway } from '../../src/actors/index.js';
import { startEmulator } from '../../src/emulator/index.js';
import type { Emulator } from '../../src/emulator/index.js';
import { sanitizeForInspection, startInspection } from '../../src/inspect/index.js';
import type { Inspection } from '../../src/inspect/index.js';
import { createAdapters } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { generateStudyTask } from '../../src/study/index.js';

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
  it('redacts key-like fields, cuts long strings and shows secrets as fingerprints', () => {
    const key = 'test-claude-key-0001';
    const out = JSON.stringify(
      sanitizeForInspection({ apiKey: key, headers: { authorization: `Bearer ${key}` }, secret: new Secret(key), text: 'x'.repeat(5000), n: 3 }),
    );
    expect(out).not.toContain(key);
    expect(out).not.toContain('x'.repeat(200));
    expect(out).toContain('(5000 chars)');
    expect(out).toContain('"n":3');
  });
});

describe('startInspection', () => {
  let emulator: Emulator | undefined;
  let inspection: Inspection | undefined;
  afterAll(async () => {
    inspection?.stop();
    await emulator?.close();
  });

  it('relays the live actor system to a websocket receiver', async () => {
    const port = await freePort();
    inspection = await startInspection({ port });
    expect(inspection.viewerUrl).toBe(`http://localhost:${port}`);
    emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
    const gateway = createGateway({
      adapters: createAdapters({
        anthropicBaseUrl: emulator.anthropicBaseUrl,
        openaiBaseUrl: emulator.openaiBaseUrl,
        timelygptBaseUrl: emulator.timelygptBaseUrl,
        claudeModel: 'claude-test',
        gptModel: 'gpt-test',
        timelygptModel: 'timely-test',
        timelygptTokenTtlMs: 60_000,
      }),
      breaker: { threshold: 3, recoveryMs: 60_000 },
      retry: { max: 0, backoffMs: [10] },
      policy: 'retry-then-fallback',
      providerTimeoutMs: 5000,
      inspect: inspection.inspect,
    });
    const received: StatelyInspectionEvent[] = [];
    const receiver = createWebSocketReceiver({ server: inspection.url });
    receiver.subscribe((event) => received.push(event));

    const key = 'test-claude-key-0001';
    const text = 'Photosynthesis converts light energy into chemical energy stored in glucose. '.repeat(20);
    const outcome = await generateStudyTask(gateway, { task: 'notes', text, lang: 'en', chain: [{ provider: 'claude', apiKey: key }] });
    expect(outcome.status).toBe('succeeded');
    await expect.poll(() => received.some((event) => event.type === '@xstate.event' && event.event.type === 'call.requested'), { timeout: 10_000 }).toBe(true);
    expect(received.some((event) => event.type === '@xstate.actor')).toBe(true);
    const all = JSON.stringify(received);
    expect(all).not.toContain(key);
    expect(all).not.toContain(text.slice(0, 300));
    await gateway.stop();
  });
});
