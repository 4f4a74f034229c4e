/**
 * Across a fleet: two instances (each its own gateway and Redis connections) on the real
 * Redis. The rule, written out: a key refused on one instance is refused on every instance — one
 * fingerprint per key fleet-wide (the salt created once in Redis), one record per refused key with the
 * same class and `until`, adopted through pub/sub, and read back by an instance that starts later — so
 * no instance calls the provider with it again until the quarantine ends. Other keys are unaffected.
 */
import { expect, it } from 'vitest';
import { Secret } from '../../src/security/secret.js';
import {
  dumpKeys,
  redisTestUrl,
  startInstance,
  testKey,
  uniquePrefix,
  waitFor,
  type Instance,
  useFleetRig,
} from './support.js';

const rig = useFleetRig();
const { running } = rig;

/** Obviously fake: the emulator answers Anthropic's credit-balance 400 for `emu-quota-` keys. */
const quotaKey = 'emu-quota-claude-fleet-keyhealth-0001';
const quotaCalls = (): number => rig.emulator.stats().claude.byKey[rig.emulator.fingerprint(quotaKey)] ?? 0;
const healthOf = (instance: Instance, key: string) => instance.gateway.keyHealth('claude', new Secret(key));

it('a key quarantined on one instance is skipped on the other and on one started later, without an upstream call', async () => {
  const prefix = uniquePrefix('key-health');
  const start = () =>
    startInstance({ url: redisTestUrl, prefix, emulator: rig.emulator, keyQuarantineMs: 60_000 });
  const [a, b] = await Promise.all([start(), start()]);
  running.push(a!, b!);

  const first = await a!.callWith(quotaKey);
  expect(first.attempts).toEqual([
    expect.objectContaining({ outcome: 'failed', errorClass: 'quota_exhausted' }),
  ]);
  expect(quotaCalls()).toBe(1);
  const onA = healthOf(a!, quotaKey);
  expect(onA).toMatchObject({ state: 'quarantined', errorClass: 'quota_exhausted' });

  // The other instance adopts the same record (same fingerprint, class and until) through pub/sub.
  await waitFor(() => healthOf(b!, quotaKey).state === 'quarantined', 2000);
  expect(healthOf(b!, quotaKey)).toEqual(onA);
  const onB = await b!.callWith(quotaKey);
  expect(onB.attempts).toEqual([
    expect.objectContaining({ outcome: 'skipped', reason: 'key_quarantined', errorClass: 'quota_exhausted' }),
  ]);
  expect(quotaCalls()).toBe(1);

  // An instance that starts afterwards reads the refused keys back from Redis.
  const c = await start();
  running.push(c);
  await waitFor(() => healthOf(c, quotaKey).state === 'quarantined', 2000);
  expect(healthOf(c, quotaKey)).toEqual(onA);
  expect((await c.callWith(quotaKey)).attempts[0]).toMatchObject({
    outcome: 'skipped',
    reason: 'key_quarantined',
  });
  expect(quotaCalls()).toBe(1);

  // Another key for the same provider is unaffected everywhere.
  expect(healthOf(b!, testKey)).toEqual({ provider: 'claude', state: 'healthy' });
  expect((await b!.call()).status).toBe('succeeded');

  // Redis holds the refusal under a salted fingerprint: never the key, nor a piece of it.
  const stored = await dumpKeys(redisTestUrl, prefix);
  expect([...stored.keys()].some((key) => key.startsWith(`${prefix}keys:health:claude:`))).toBe(true);
  for (const [key, value] of stored) {
    for (const secret of [quotaKey, testKey]) {
      expect(`${key} ${value}`).not.toContain(secret.slice(-12));
      expect(`${key} ${value}`).not.toContain(secret.slice(0, 16));
    }
  }
});

it('a key whose probe succeeds is healthy again on every instance', async () => {
  const prefix = uniquePrefix('key-health-probe');
  const start = () =>
    startInstance({ url: redisTestUrl, prefix, emulator: rig.emulator, keyQuarantineMs: 4000 });
  const [a, b] = await Promise.all([start(), start()]);
  running.push(a!, b!);
  // A working key refused once (a 401 fault for one call): quarantined for 4 s on both instances (long
  // enough for b to see it on a loaded machine: with 300 ms, and once in a full run with 1.5 s, the
  // quarantine ended before b's view caught up).
  rig.emulator.setFault({
    provider: 'claude',
    fault: 'respond',
    status: 401,
    count: 1,
    body: {
      type: 'error',
      error: { type: 'authentication_error', message: 'invalid x-api-key' },
      request_id: 'req_fleet',
    },
  });
  expect((await a!.call()).attempts[0]).toMatchObject({ outcome: 'failed', errorClass: 'auth' });
  await waitFor(() => healthOf(b!, testKey).state === 'quarantined', 3500);
  const until = healthOf(b!, testKey).until ?? 0;
  while (Date.now() <= until) await new Promise((resolve) => setTimeout(resolve, until - Date.now() + 20));
  // The probe from the other instance succeeds: healthy on both.
  expect((await b!.call()).status).toBe('succeeded');
  await waitFor(() => healthOf(a!, testKey).state === 'healthy', 2000);
});
