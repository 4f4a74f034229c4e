/**
 * What Redis does for the fleet breaker, on the real server: it keeps a record and a version, writes only
 * on an unchanged version (so concurrent instances lose no update), and grants the one probe lease of a
 * window, renewed by its holder only. The breaker's rules are the machine's (test/fleet/breaker.fleet-graph
 * walks them on Redis); here the expected values are the plain sums and the lease's own behaviour.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisStateStore, type RedisStateStore } from '../../src/fleet/redis-state-store.js';
import type { BreakerEvent } from '../../src/machines/breaker.machine.js';
import { redisTestUrl, uniquePrefix } from './support.js';

const t0 = 1_800_000_000_000;
const recoveryMs = 1000;
let reader: Redis;
const opened: RedisStateStore[] = [];

function storesOn(prefix: string, threshold: number, probeLeaseMs = 600_000, count = 2): RedisStateStore[] {
  const stores = Array.from({ length: count }, () =>
    createRedisStateStore({
      url: redisTestUrl,
      prefix,
      breaker: { threshold, recoveryMs },
      probeLeaseMs,
      commandTimeoutMs: 5000,
    }),
  );
  opened.push(...stores);
  return stores;
}

const failed = (callId: string, at: number): BreakerEvent => ({
  type: 'call.failed',
  callId,
  errorClass: 'server_error',
  keyId: 'key-a',
  at,
});

beforeAll(() => {
  reader = new Redis(redisTestUrl);
});

afterAll(async () => {
  reader.disconnect();
  await Promise.all(opened.map((store) => store.close()));
});

describe('the fleet breaker in Redis', () => {
  it('counts every one of 40 concurrent counted failures from eight connections (a conflicting write is applied again)', async () => {
    const prefix = uniquePrefix('breaker-store-cas');
    const stores = storesOn(prefix, 1000, 600_000, 8);
    await Promise.all(stores.map((store) => store.ready(5000)));
    await Promise.all(
      Array.from({ length: 40 }, (_, index) =>
        stores[index % 8]!.breakers.apply(
          'claude',
          { op: 'event', event: failed(`c${index}`, t0 + index) },
          t0 + index,
        ),
      ),
    );
    const { shared } = await stores[0]!.breakers.apply('claude', { op: 'read' }, t0 + 100);
    expect(shared).toMatchObject({ state: 'closed', consecutiveFailures: 40 });
    // Redis holds the record and its version, bumped once per write: events told while a write of the same
    // connection runs go in its next write, so there are at most 40 writes, and at least one per connection.
    expect((await reader.hkeys(`${prefix}breaker:claude`)).sort()).toEqual(['record', 'version']);
    const version = Number(await reader.hget(`${prefix}breaker:claude`, 'version'));
    expect(version).toBeGreaterThanOrEqual(8);
    expect(version).toBeLessThanOrEqual(40);
  });

  it('grants the probe lease of a window to exactly one of 10 concurrent asks, and tells the others when it started', async () => {
    const prefix = uniquePrefix('breaker-store-lease');
    const stores = storesOn(prefix, 1);
    await Promise.all(stores.map((store) => store.ready(5000)));
    await stores[0]!.breakers.apply('claude', { op: 'event', event: failed('a', t0) }, t0);
    const due = t0 + recoveryMs;
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, index) =>
        stores[index % 2]!.breakers.apply('claude', { op: 'acquire', callId: `p${index}` }, due),
      ),
    );
    const granted = answers.flatMap((answer, index) => (answer.granted ? [`p${index}`] : []));
    expect(granted).toHaveLength(1);
    expect(await reader.get(`${prefix}breaker:claude:probe`)).toBe(`${granted[0]}|${due}`);
    for (const answer of answers.filter((candidate) => !candidate.granted))
      expect(answer.probeStartedAt).toBe(due);
  });

  it("renews the lease for its holder only, and frees the window when the holder's lease lapses", async () => {
    const prefix = uniquePrefix('breaker-store-renew');
    const [store] = storesOn(prefix, 1, 300);
    await store!.ready(5000);
    await store!.breakers.apply('claude', { op: 'event', event: failed('a', t0) }, t0);
    expect(
      (await store!.breakers.apply('claude', { op: 'acquire', callId: 'probe' }, t0 + recoveryMs)).granted,
    ).toBe(true);
    expect(await store!.breakers.renew('claude', 'other')).toBe(false);
    expect(await store!.breakers.renew('claude', 'probe')).toBe(true);
    expect(await reader.pttl(`${prefix}breaker:claude:probe`)).toBeGreaterThan(200);
    expect(
      (await store!.breakers.apply('claude', { op: 'acquire', callId: 'next' }, t0 + recoveryMs + 1)).granted,
    ).toBe(false);
    // No renewal: the lease lapses (a dead prober), and the next call gets the window's probe.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await reader.get(`${prefix}breaker:claude:probe`)).toBeNull();
    const next = await store!.breakers.apply(
      'claude',
      { op: 'acquire', callId: 'next' },
      t0 + recoveryMs + 2,
    );
    expect(next.granted).toBe(true);
    expect(await store!.breakers.renew('claude', 'probe')).toBe(false);
  });
});
