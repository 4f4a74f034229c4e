import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { freePort, redisTestUrl, testKey, uniquePrefix } from './support.js';

/** Separate service processes (`src/main.ts` through tsx) sharing one REDIS_URL and one emulator. */
let emulator: Emulator;
const children: ChildProcess[] = [];
const urls: string[] = [];

async function startProcess(prefix: string): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      REDIS_URL: redisTestUrl,
      REDIS_PREFIX: prefix,
      ANTHROPIC_BASE_URL: emulator.anthropicBaseUrl,
      OPENAI_BASE_URL: emulator.openaiBaseUrl,
      TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl,
      BREAKER_FAILURE_THRESHOLD: '3',
      BREAKER_MIN_DISTINCT_KEYS: '1',
      RETRY_MAX: '0',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 50_000; // tsx compiles on start: slow on a loaded machine
  for (;;) {
    try {
      if ((await fetch(`${url}/healthz`)).ok) return url;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error('service process did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

let counter = 0;
async function generate(url: string): Promise<{ status: number; body: { meta?: { attempts: { reason?: string }[] }; error?: { attempts?: { reason?: string }[] } } }> {
  counter += 1;
  const response = await fetch(`${url}/v1/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-claude-key': testKey },
    body: JSON.stringify({ task: 'notes', text: `Cells divide by mitosis, request ${counter}.`, providers: ['claude'], options: { lang: 'en' } }),
  });
  return { status: response.status, body: (await response.json()) as never };
}

async function claudeState(url: string): Promise<string> {
  const body = (await (await fetch(`${url}/v1/providers`)).json()) as { providers: { id: string; breaker: { state: string } }[] };
  return body.providers.find((provider) => provider.id === 'claude')?.breaker.state ?? 'missing';
}

beforeAll(async () => {
  emulator = await startEmulator();
  const prefix = uniquePrefix('processes');
  urls.push(...(await Promise.all([startProcess(prefix), startProcess(prefix)])));
}, 120_000);

afterAll(async () => {
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
        }),
    ),
  );
  await emulator.close();
});

describe('two service processes with one REDIS_URL', () => {
  it('report the shared store as ready, with studyhelper_state_store_up 1', async () => {
    for (const url of urls) {
      expect(await (await fetch(`${url}/readyz`)).json()).toEqual({ status: 'ready', store: 'redis', storeReachable: true });
      expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/^studyhelper_state_store_up 1$/m);
    }
  });

  it('open the breaker on both when failures are split between them, and neither touches the provider after', async () => {
    const [a, b] = urls as [string, string];
    emulator.setFault({ provider: 'claude', fault: 'http500' });
    for (const url of [a, b, a]) expect((await generate(url)).status).toBeGreaterThanOrEqual(500);
    expect(emulator.stats().claude.calls).toBe(3);
    // Seen by the other process within 100 ms (pub/sub), read over HTTP.
    let states: string[];
    const start = performance.now();
    do {
      states = await Promise.all(urls.map(claudeState));
    } while (!states.every((state) => state === 'open') && performance.now() - start < 100);
    expect(states).toEqual(['open', 'open']);
    const refused = await generate(b);
    expect(refused.status).toBeGreaterThanOrEqual(500);
    expect(emulator.stats().claude.calls).toBe(3);
  });
});
