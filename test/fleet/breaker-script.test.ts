/**
 * The fleet breaker script on the real Redis, rule by rule, with the expected values written out
 * (docs/errors.md "Resilience rules": threshold consecutive counted failures open; one probe per recovery window; the
 * probe's counted failure re-opens for another recovery time, its success closes, anything else
 * frees the slot). test/fleet/conformance.test.ts compares the script with the machine on
 * generated sequences; this file pins the same rules by example.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRedisStateStore,
  type FleetBreakerOperation,
  type RedisStateStore,
} from '../../src/fleet/redis-state-store.js';
import { redisTestUrl, uniquePrefix } from './support.js';

const prefix = uniquePrefix('breaker-script');
const t0 = 1_800_000_000_000;
let store: RedisStateStore;
let reader: Redis;

beforeAll(async () => {
  store = createRedisStateStore({
    url: redisTestUrl,
    prefix,
    breaker: { threshold: 2, recoveryMs: 1000, maxRecoveryMs: 3000 },
    probeLeaseMs: 600_000,
  });
  reader = new Redis(redisTestUrl);
  expect(await store.ready(5000)).toBe(true);
});

afterAll(async () => {
  const keys = await reader.keys(`${prefix}*`);
  if (keys.length > 0) await reader.del(...keys);
  reader.disconnect();
  await store.close();
});

/** A fresh fleet breaker (threshold 2, recovery 1000 ms) and its probe lease. */
function breaker() {
  const providerId = `p-${randomUUID().slice(0, 8)}`;
  return {
    providerId,
    apply: (operation: FleetBreakerOperation, now: number) =>
      store.breakers.apply(providerId, operation, now),
    lease: () => reader.get(`${prefix}breaker:${providerId}:probe`),
  };
}

/** Opens the breaker at t0 with two counted failures. */
async function opened() {
  const b = breaker();
  await b.apply({ op: 'failed', callId: 'a' }, t0);
  const { shared } = await b.apply({ op: 'failed', callId: 'b' }, t0);
  expect(shared).toMatchObject({
    state: 'open',
    consecutiveFailures: 2,
    openedAt: t0,
    retryAt: t0 + 1000,
    opens: 1,
  });
  return b;
}

describe('the fleet breaker script, rule by rule', () => {
  it('counts consecutive counted failures, clears them on a success, and opens at the threshold', async () => {
    const b = breaker();
    expect((await b.apply({ op: 'failed', callId: 'a' }, t0)).shared).toMatchObject({
      state: 'closed',
      consecutiveFailures: 1,
    });
    expect((await b.apply({ op: 'succeeded', callId: 'b' }, t0 + 1)).shared).toMatchObject({
      state: 'closed',
      consecutiveFailures: 0,
    });
    await b.apply({ op: 'failed', callId: 'c' }, t0 + 2);
    const { shared } = await b.apply({ op: 'failed', callId: 'd' }, t0 + 3);
    expect(shared).toMatchObject({
      state: 'open',
      consecutiveFailures: 2,
      openedAt: t0 + 3,
      retryAt: t0 + 1003,
      opens: 1,
    });
  });

  it('refuses every call until retryAt, then grants exactly one probe lease', async () => {
    const b = await opened();
    expect((await b.apply({ op: 'acquire', callId: 'early' }, t0 + 999)).granted).toBe(false);
    const probe = await b.apply({ op: 'acquire', callId: 'probe' }, t0 + 1000);
    expect(probe.granted).toBe(true);
    expect(probe.shared.state).toBe('halfOpen');
    expect(await b.lease()).toBe(`probe|${t0 + 1000}`);
    expect((await b.apply({ op: 'acquire', callId: 'second' }, t0 + 1001)).granted).toBe(false);
  });

  it('answers a refused probe with the start of the probe in flight, kept through renewals', async () => {
    const b = await opened();
    const probe = await b.apply({ op: 'acquire', callId: 'probe' }, t0 + 1200);
    expect(probe.probeStartedAt).toBeNull();
    expect((await b.apply({ op: 'renew', callId: 'probe' }, t0 + 2000)).granted).toBe(true);
    const refused = await b.apply({ op: 'acquire', callId: 'other' }, t0 + 2500);
    expect(refused.granted).toBe(false);
    expect(refused.probeStartedAt).toBe(t0 + 1200);
    // Still the probe's own lease after the renewal: its outcome closes the breaker.
    expect((await b.apply({ op: 'succeeded', callId: 'probe' }, t0 + 2600)).shared.state).toBe('closed');
  });

  it('answers a refusal without a probe in flight (still open), or of a bare lease, with no start', async () => {
    const b = await opened();
    const early = await b.apply({ op: 'acquire', callId: 'early' }, t0 + 500);
    expect(early.granted).toBe(false);
    expect(early.probeStartedAt).toBeNull();
    // A lease written as a bare call id (no start): its holder is still recognised, its start unknown.
    await b.apply({ op: 'read' }, t0 + 1000);
    await b.apply({ op: 'acquire', callId: 'probe' }, t0 + 1000);
    await reader.set(`${prefix}breaker:${b.providerId}:probe`, 'probe', 'PX', 600_000);
    const refused = await b.apply({ op: 'acquire', callId: 'other' }, t0 + 1100);
    expect(refused.granted).toBe(false);
    expect(refused.probeStartedAt).toBeNull();
    expect((await b.apply({ op: 'renew', callId: 'probe' }, t0 + 1200)).granted).toBe(true);
  });

  it("re-opens on the probe's counted failure: a doubled open period from now, one more opening, lease freed", async () => {
    const b = await opened();
    await b.apply({ op: 'acquire', callId: 'probe' }, t0 + 1500);
    const { shared } = await b.apply({ op: 'failed', callId: 'probe' }, t0 + 1700);
    expect(shared).toMatchObject({
      state: 'open',
      consecutiveFailures: 2,
      openedAt: t0 + 1700,
      retryAt: t0 + 3700,
      opens: 2,
      openPeriodMs: 2000,
    });
    expect(await b.lease()).toBeNull();
    expect((await b.apply({ op: 'acquire', callId: 'too-early' }, t0 + 3699)).granted).toBe(false);
    expect((await b.apply({ op: 'acquire', callId: 'next-probe' }, t0 + 3700)).granted).toBe(true);
  });

  it('grows the open period 1 s, 2 s, then holds it at the 3 s cap; a probe success resets it to 1 s', async () => {
    const b = await opened();
    const spacings: number[] = [];
    let at = t0 + 1000;
    for (const probe of ['p1', 'p2', 'p3']) {
      await b.apply({ op: 'acquire', callId: probe }, at);
      const { shared } = await b.apply({ op: 'failed', callId: probe }, at);
      spacings.push((shared.retryAt ?? 0) - (shared.openedAt ?? 0));
      at = shared.retryAt ?? 0;
    }
    expect(spacings).toEqual([2000, 3000, 3000]);
    await b.apply({ op: 'acquire', callId: 'ok' }, at);
    expect((await b.apply({ op: 'succeeded', callId: 'ok' }, at)).shared).toMatchObject({
      state: 'closed',
      openPeriodMs: 1000,
    });
    await b.apply({ op: 'failed', callId: 'x' }, at + 10);
    expect((await b.apply({ op: 'failed', callId: 'y' }, at + 10)).shared).toMatchObject({
      state: 'open',
      retryAt: at + 1010,
    });
  });

  it('ignores a counted failure or a success of a call that is not the probe while half-open', async () => {
    const b = await opened();
    await b.apply({ op: 'acquire', callId: 'probe' }, t0 + 1000);
    expect((await b.apply({ op: 'failed', callId: 'stale' }, t0 + 1100)).shared).toMatchObject({
      state: 'halfOpen',
      opens: 1,
      consecutiveFailures: 2,
    });
    expect((await b.apply({ op: 'succeeded', callId: 'stale' }, t0 + 1200)).shared).toMatchObject({
      state: 'halfOpen',
      consecutiveFailures: 2,
    });
    expect(await b.lease()).toBe(`probe|${t0 + 1000}`);
  });

  it('frees the slot when the probe ends user-side or aborted (ignored), so the next call probes', async () => {
    const b = await opened();
    await b.apply({ op: 'acquire', callId: 'probe' }, t0 + 1000);
    expect((await b.apply({ op: 'ignored', callId: 'probe' }, t0 + 1100)).shared.state).toBe('halfOpen');
    expect(await b.lease()).toBeNull();
    expect((await b.apply({ op: 'acquire', callId: 'next' }, t0 + 1200)).granted).toBe(true);
  });

  it("closes on the probe's success: count cleared, no times", async () => {
    const b = await opened();
    await b.apply({ op: 'acquire', callId: 'probe' }, t0 + 1000);
    const { shared } = await b.apply({ op: 'succeeded', callId: 'probe' }, t0 + 1100);
    expect(shared).toMatchObject({
      state: 'closed',
      consecutiveFailures: 0,
      openedAt: null,
      retryAt: null,
      opens: 1,
    });
    expect(await b.lease()).toBeNull();
  });
});
