/**
 * Across a fleet: two service processes (`src/main.ts`) on the real Redis, one emulator.
 * The rule, written out: with BREAKER_FAILURE_THRESHOLD=2 and the default BREAKER_MIN_DISTINCT_KEYS=2,
 * the fleet's claude breaker opens only when the streak's counted failures come from two distinct keys,
 * wherever they failed. Both processes share KEY_FINGERPRINT_SALT, so one key has one id fleet-wide:
 * a single key failing on both instances stays below the quorum; key B failing on one instance and key
 * C on the other reach it. `emu-hang-` keys never answer (PROVIDER_TIMEOUT_MS=300 ends each call).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { startServiceProcesses, uniquePrefix, type ServiceProcess } from './support.js';

let emulator: Emulator;
let instances: ServiceProcess[] = [];

const env = {
  BREAKER_FAILURE_THRESHOLD: '2',
  PROVIDER_TIMEOUT_MS: '300',
  RETRY_MAX: '0',
  KEY_FINGERPRINT_SALT: 'fleet-test-salt-not-a-secret-0001',
  // Each key's user on an address of its own (the quorum counts distinct client addresses): the loopback
  // peer is a trusted proxy, and X-Forwarded-For names the user.
  TRUST_PROXY: '1',
};

/** A distinct public address per key (a hash of the key's characters). */
const addressOf = (key: string): string => `203.0.113.${[...key].reduce((sum, char) => sum + char.charCodeAt(0), 0) % 250}`;

beforeAll(async () => {
  emulator = await startEmulator();
  instances = await startServiceProcesses(emulator, uniquePrefix('key-quorum'), [env, env]);
}, 120_000);

afterAll(async () => {
  await Promise.all(instances.map((instance) => instance.stop()));
  await emulator.close();
});

async function claudeWith(instance: ServiceProcess, key: string): Promise<number> {
  const response = await fetch(`${instance.url}/v1/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-claude-key': key, 'x-forwarded-for': addressOf(key) },
    body: JSON.stringify({
      task: 'notes',
      text: 'Cells divide by mitosis into two daughter cells.',
      providers: ['claude'],
      options: { lang: 'en' },
    }),
  });
  await response.arrayBuffer();
  return response.status;
}

interface BreakerItem {
  readonly state: string;
  readonly consecutiveFailures: number;
}

async function claudeBreaker(instance: ServiceProcess): Promise<BreakerItem> {
  const body = (await (await fetch(`${instance.url}/v1/providers`)).json()) as {
    providers: { id: string; breaker: BreakerItem }[];
  };
  const claude = body.providers.find((provider) => provider.id === 'claude');
  if (claude === undefined) throw new Error('no claude item');
  return claude.breaker;
}

/** Polls both instances until their claude breakers show `expected` (the fleet's state reaches both by pub/sub). */
async function bothShow(expected: BreakerItem): Promise<void> {
  const matches = (item: BreakerItem): boolean =>
    item.state === expected.state && item.consecutiveFailures === expected.consecutiveFailures;
  let seen: BreakerItem[];
  const start = Date.now();
  do {
    seen = await Promise.all(instances.map(claudeBreaker));
    if (seen.every(matches)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  } while (Date.now() - start < 3000);
  expect(seen).toEqual(instances.map(() => expected));
}

describe('the quorum of distinct keys across two service processes', () => {
  it('keeps the fleet breaker closed when one key fails on both instances (one id fleet-wide)', async () => {
    const [first, second] = instances as [ServiceProcess, ServiceProcess];
    expect(await claudeWith(first, 'emu-hang-fleet-user-a-0001')).not.toBe(200);
    await bothShow({ state: 'closed', consecutiveFailures: 1 });
    expect(await claudeWith(second, 'emu-hang-fleet-user-a-0001')).not.toBe(200);
    // The threshold is reached, by one key: the fleet stays closed; another key is served.
    await bothShow({ state: 'closed', consecutiveFailures: 2 });
    expect(await claudeWith(first, 'test-claude-key-fleet-healthy-0002')).toBe(200);
    await bothShow({ state: 'closed', consecutiveFailures: 0 });
  });

  it('opens the fleet breaker on both when key B fails on one instance and key C on the other', async () => {
    const [first, second] = instances as [ServiceProcess, ServiceProcess];
    expect(await claudeWith(first, 'emu-hang-fleet-user-b-0003')).not.toBe(200);
    await bothShow({ state: 'closed', consecutiveFailures: 1 });
    expect(await claudeWith(second, 'emu-hang-fleet-user-c-0004')).not.toBe(200);
    await bothShow({ state: 'open', consecutiveFailures: 2 });
    // Provider-wide now: a healthy key is refused on either instance without a call upstream.
    const calls = emulator.stats().claude.calls;
    for (const instance of instances)
      expect(await claudeWith(instance, 'test-claude-key-fleet-healthy-0002')).toBe(503);
    expect(emulator.stats().claude.calls).toBe(calls);
  });
});
