/**
 * Across a fleet: two instances (each its own gateway and Redis connections) share one
 * breaker through the Lua script on the real Redis. The rule, written out: opening from closed lasts
 * BREAKER_RECOVERY_MS (300 ms), each failed probe doubles the period (600 ms), up to
 * BREAKER_MAX_RECOVERY_MS (1000 ms); whichever instance probes, both show the same grown retryAt.
 */
import { expect, it } from 'vitest';
import { redisTestUrl, startInstance, uniquePrefix, waitFor, type Instance, useFleetRig } from './support.js';

const rig = useFleetRig();
const { running } = rig;

/** The claude breaker's open period as one instance shows it: retryAt − openedAt (ms), or null. */
function shownPeriod(instance: Instance): number | null {
  const { state, openedAt, retryAt } = instance.gateway.provider('claude').breaker;
  if (state !== 'open' || openedAt === null || retryAt === null) return null;
  return Date.parse(retryAt) - Date.parse(openedAt);
}

const retryAtOf = (instance: Instance): string | null => instance.gateway.provider('claude').breaker.retryAt;

async function untilRetryAt(instance: Instance): Promise<void> {
  const wait = Date.parse(retryAtOf(instance) ?? '') - Date.now() + 10;
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

it('grows the shared open period 300, 600, 1000 ms whichever instance probes, and both show the same retryAt', async () => {
  const prefix = uniquePrefix('open-period');
  const [a, b] = await Promise.all(
    [0, 1].map(() =>
      startInstance({
        url: redisTestUrl,
        prefix,
        emulator: rig.emulator,
        threshold: 1,
        recoveryMs: 300,
        maxRecoveryMs: 1000,
      }),
    ),
  );
  running.push(a!, b!);
  await waitFor(() => [a!, b!].every((instance) => instance.state() === 'closed'), 1000);
  rig.emulator.setFault({ provider: 'claude', fault: 'http500' });

  const sameOnBoth = (period: number) =>
    waitFor(
      () => shownPeriod(a!) === period && shownPeriod(b!) === period && retryAtOf(a!) === retryAtOf(b!),
      1000,
    );

  await a!.call();
  await sameOnBoth(300);
  // The probe from the other instance fails: the fleet re-opens for twice the period.
  await untilRetryAt(b!);
  expect((await b!.call()).status).toBe('failed');
  await sameOnBoth(600);
  await untilRetryAt(a!);
  expect((await a!.call()).status).toBe('failed');
  await sameOnBoth(1000);
});
