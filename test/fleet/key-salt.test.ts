/**
 * The fleet's key fingerprint salt is never re-created while an instance still uses the old one: an
 * instance holding the fleet's salt puts it back (SET NX) when Redis lost it, and reports (never
 * overwrites) another salt found there, the fleet's fingerprints then being split.
 */
import { Redis } from 'ioredis';
import { afterEach, expect, it } from 'vitest';
import { connectFleet, type Fleet } from '../../src/fleet/index.js';
import { redisTestUrl, uniquePrefix } from './support.js';

const fleets: Fleet[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  await Promise.all(fleets.splice(0).map((fleet) => fleet.close()));
  for (const client of clients.splice(0)) client.disconnect();
});

async function until(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

it('puts a lost salt back, and reports another one found in its place without overwriting it', { timeout: 30_000 }, async () => {
  const prefix = uniquePrefix('key-salt');
  const fleet = await connectFleet({ url: redisTestUrl, prefix, breaker: { threshold: 3, recoveryMs: 60_000 }, providerTimeoutMs: 1000 });
  fleets.push(fleet);
  const redis = new Redis(redisTestUrl);
  clients.push(redis);
  const salt = await fleet.keySalt();
  expect(salt).toMatch(/^[0-9a-f]{64}$/);
  const reports: unknown[] = [];
  fleet.holdKeySalt(salt ?? '', (error) => reports.push(error));

  // Redis loses it (a flush, a restart without persistence): the instance using it puts it back.
  await redis.del(`${prefix}keys:salt`);
  expect(await until(async () => (await redis.get(`${prefix}keys:salt`)) === salt, 8000)).toBe(true);
  // An instance that starts now adopts it.
  expect(await fleet.keySalt()).toBe(salt);

  // Another salt in its place (created by an instance started before this one put it back): reported, kept.
  await redis.set(`${prefix}keys:salt`, 'another-salt-of-the-fleet-0001');
  expect(await until(() => reports.some((report) => report instanceof Error && /not the one this instance uses/.test(report.message)), 8000)).toBe(true);
  expect(await redis.get(`${prefix}keys:salt`)).toBe('another-salt-of-the-fleet-0001');
  await redis.del(`${prefix}keys:salt`);
});
