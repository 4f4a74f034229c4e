import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { startServiceProcesses, testKey, uniquePrefix, type ServiceProcess } from './support.js';

/** Separate service processes (`src/main.ts` through tsx) sharing one REDIS_URL and one emulator. */
let emulator: Emulator;
const children: ServiceProcess[] = [];
const urls: string[] = [];

const env = { BREAKER_FAILURE_THRESHOLD: '3', BREAKER_MIN_DISTINCT_KEYS: '1', RETRY_MAX: '0' };

let counter = 0;
async function generate(
  url: string,
): Promise<{
  status: number;
  body: { meta?: { attempts: { reason?: string }[] }; error?: { attempts?: { reason?: string }[] } };
}> {
  counter += 1;
  const response = await fetch(`${url}/v1/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-claude-key': testKey },
    body: JSON.stringify({
      task: 'notes',
      text: `Cells divide by mitosis, request ${counter}.`,
      providers: ['claude'],
      options: { lang: 'en' },
    }),
  });
  return { status: response.status, body: (await response.json()) as never };
}

async function claudeState(url: string): Promise<string> {
  const body = (await (await fetch(`${url}/v1/providers`)).json()) as {
    providers: { id: string; breaker: { state: string } }[];
  };
  return body.providers.find((provider) => provider.id === 'claude')?.breaker.state ?? 'missing';
}

beforeAll(async () => {
  emulator = await startEmulator();
  const prefix = uniquePrefix('processes');
  children.push(...(await startServiceProcesses(emulator, prefix, [env, env])));
  urls.push(...children.map((child) => child.url));
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map((child) => child.stop()));
  await emulator.close();
});

describe('two service processes with one REDIS_URL', () => {
  it('report the shared store as ready, with studyhelper_state_store_up 1', async () => {
    for (const url of urls) {
      expect(await (await fetch(`${url}/readyz`)).json()).toEqual({
        status: 'ready',
        store: 'redis',
        storeReachable: true,
      });
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
