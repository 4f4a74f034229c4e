/**
 * While another instance's half-open probe is in flight, a call refused for want of the probe lease
 * says in `Retry-After` how long that probe may still run: its start plus PROVIDER_TIMEOUT_MS (the
 * longest a call can take), less the time already gone, in whole seconds rounded up (docs/fleet.md).
 * Two service processes (`src/main.ts`) on the real Redis and one emulator; A's probe hangs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { startServiceProcesses, testKey, uniquePrefix, type ServiceProcess } from './support.js';

const providerTimeoutMs = 6000;
const recoveryMs = 300;
const env = {
  BREAKER_FAILURE_THRESHOLD: '3',
  BREAKER_MIN_DISTINCT_KEYS: '1',
  BREAKER_RECOVERY_MS: String(recoveryMs),
  RETRY_MAX: '0',
  PROVIDER_TIMEOUT_MS: String(providerTimeoutMs),
};

let emulator: Emulator;
const children: ServiceProcess[] = [];

interface Answer {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly body: { error?: { retryAfterSeconds?: number; attempts?: { reason?: string }[] } };
}

let counter = 0;
async function generate(url: string): Promise<Answer> {
  counter += 1;
  const response = await fetch(`${url}/v1/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-claude-key': testKey },
    body: JSON.stringify({
      task: 'notes',
      text: `Enzymes lower the activation energy, request ${counter}.`,
      providers: ['claude'],
      options: { lang: 'en' },
    }),
  });
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as never };
}

async function claudeState(url: string): Promise<string> {
  const body = (await (await fetch(`${url}/v1/providers`)).json()) as {
    providers: { id: string; breaker: { state: string } }[];
  };
  return body.providers.find((provider) => provider.id === 'claude')?.breaker.state ?? 'missing';
}

async function until(condition: () => Promise<boolean> | boolean, withinMs: number): Promise<void> {
  const start = Date.now();
  while (!(await condition())) {
    if (Date.now() - start > withinMs) throw new Error(`condition not met within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

beforeAll(async () => {
  emulator = await startEmulator();
  children.push(...(await startServiceProcesses(emulator, uniquePrefix('probe-retry-after'), [env, env])));
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map((child) => child.stop()));
  await emulator.close();
});

describe("a call refused while another instance's probe is in flight", () => {
  it("says in Retry-After the time that probe may still take (start + PROVIDER_TIMEOUT_MS), shrinking as it goes on", async () => {
    const [a, b] = children.map((child) => child.url) as [string, string];
    emulator.setFault({ provider: 'claude', fault: 'http500', count: 3 });
    for (const url of [a, b, a]) expect((await generate(url)).status).toBeGreaterThanOrEqual(500);
    await until(async () => (await Promise.all([a, b].map(claudeState))).every((state) => state === 'open'), 2000);
    await new Promise((resolve) => setTimeout(resolve, recoveryMs + 50));

    // A's probe hangs at the provider: it ends when its call times out, PROVIDER_TIMEOUT_MS after it began.
    emulator.setFault({ provider: 'claude', fault: 'slow', ms: 20_000, count: 1 });
    const probeAsked = Date.now();
    const probe = generate(a);
    await until(() => emulator.stats().claude.calls === 4, 3000);
    const probeSeen = Date.now();

    /**
     * The rule, in whole seconds rounded up: the probe began between `probeAsked` and `probeSeen`, the
     * refusal was decided between the request's start and its answer, so the time left lies between these.
     */
    const refusedOnB = async () => {
      const asked = Date.now();
      const answer = await generate(b);
      const answered = Date.now();
      expect(answer.status).toBe(503);
      expect(answer.body.error?.attempts?.[0]?.reason).toBe('circuit_open');
      const seconds = Number(answer.retryAfter);
      expect(answer.body.error?.retryAfterSeconds).toBe(seconds);
      const fewest = Math.max(1, Math.ceil((probeAsked + providerTimeoutMs - answered) / 1000));
      const most = Math.ceil((probeSeen + providerTimeoutMs - asked) / 1000);
      expect(seconds).toBeGreaterThanOrEqual(fewest);
      expect(seconds).toBeLessThanOrEqual(Math.min(most, providerTimeoutMs / 1000));
      return seconds;
    };

    const first = await refusedOnB();
    // Not "try again in a second": most of the probe's deadline is still ahead.
    expect(first).toBeGreaterThanOrEqual(3);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const later = await refusedOnB();
    expect(later).toBeLessThan(first);
    expect(emulator.stats().claude.calls).toBe(4);

    // A's probe ends at its deadline (a timeout, counted: the breaker re-opens).
    expect((await probe).status).toBeGreaterThanOrEqual(500);
  }, 30_000);
});
