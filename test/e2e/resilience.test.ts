import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Attempt, Gateway, GenerateOutcome } from '../../src/actors/types.js';
import { startEmulator, type Emulator, type FaultName } from '../../src/emulator/index.js';
import type { ErrorClass } from '../../src/errors/index.js';
import type { ProviderId } from '../../src/providers/index.js';
import { buildNotesRequest, studyValidator, type NotesResult } from '../../src/study/index.js';
import { breakerSettings, chainOf, keys, nextProvider, prefixedKey, startGateway, upstreamCalls } from './rig.js';
import { Secret } from '../../src/security/secret.js';

/**
 * The provider actors run the real adapters against the emulator over real
 * HTTP. For every provider: fallback, the breaker opening after the threshold, no upstream call
 * while open, one probe in half-open, and user-side failures (401, 429, quota, 403) never moving
 * a breaker. Real timers with short intervals (recoveryMs 1500): fake timers do not drive sockets.
 */

const request = buildNotesRequest({
  text: 'Photosynthesis converts light energy into chemical energy. Chlorophyll absorbs light in the chloroplasts. The Calvin cycle fixes carbon dioxide into glucose.',
  lang: 'en',
});
const validate = studyValidator('notes');

interface ProviderCase {
  readonly provider: ProviderId;
  /** A provider-wide fault that counts toward the breaker, and what it is classified as. */
  readonly fault: FaultName;
  readonly errorClass: ErrorClass;
  readonly httpStatus: number;
}

const providerCases: readonly ProviderCase[] = [
  { provider: 'claude', fault: 'overloaded', errorClass: 'overloaded', httpStatus: 529 },
  { provider: 'gpt', fault: 'overloaded', errorClass: 'overloaded', httpStatus: 503 },
  { provider: 'timelygpt', fault: 'http500', errorClass: 'server_error', httpStatus: 500 },
];

const userSideFailures = [
  { prefix: 'emu-bad-', errorClass: 'auth' },
  { prefix: 'emu-ratelimit-', errorClass: 'rate_limited' },
  { prefix: 'emu-quota-', errorClass: 'quota_exhausted' },
  { prefix: 'emu-forbidden-', errorClass: 'permission' },
] as const;

type Outcome = GenerateOutcome<NotesResult>;

function succeeded(outcome: Outcome): Extract<Outcome, { status: 'succeeded' }> {
  if (outcome.status !== 'succeeded') throw new Error(`expected success, got ${JSON.stringify(outcome)}`);
  return outcome;
}

/** The attempt fields a test reads (durations vary). */
function shape(attempt: Attempt): Partial<Attempt> {
  return {
    provider: attempt.provider,
    outcome: attempt.outcome,
    ...(attempt.errorClass === undefined ? {} : { errorClass: attempt.errorClass }),
    ...(attempt.httpStatus === undefined ? {} : { httpStatus: attempt.httpStatus }),
    ...(attempt.reason === undefined ? {} : { reason: attempt.reason }),
    countedByBreaker: attempt.countedByBreaker,
  };
}

async function setFault(emulator: Emulator, spec: { provider: ProviderId; fault: FaultName; count?: number; ms?: number }): Promise<void> {
  const response = await fetch(`${emulator.url}/_emulator/faults`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(spec),
  });
  expect(response.status).toBe(200);
}

describe('resilience end to end: gateway + real adapters + emulator over HTTP', () => {
  let emulator: Emulator;
  let gateway: Gateway;

  beforeAll(async () => {
    emulator = await startEmulator();
  });
  afterAll(async () => {
    await emulator.close();
  });
  beforeEach(() => {
    emulator.resetFaults();
    emulator.resetStats();
    gateway = startGateway(emulator);
  });
  afterEach(async () => {
    await gateway.stop();
  });

  it.each(providerCases)('$provider: every provider answers valid study JSON through its real adapter', async ({ provider }) => {
    const outcome = succeeded(await gateway.generate({ request, validate, chain: [{ provider, apiKey: new Secret(keys[provider]) }] }));
    expect(outcome).toMatchObject({ provider, fallback: false });
    expect(outcome.value.keyConcepts.length).toBeGreaterThan(0);
    expect(outcome.attempts.map(shape)).toEqual([{ provider, outcome: 'succeeded', countedByBreaker: false }]);
    expect(await upstreamCalls(emulator, provider)).toBe(1);
  });

  it.each(providerCases)(
    '$provider: falls back, opens after the threshold, skips upstream while open, sends one probe in half-open',
    async ({ provider, fault, errorClass, httpStatus }) => {
      const other = nextProvider(provider);
      const chain = chainOf(provider);
      const { threshold } = breakerSettings;

      // Fallback: each counted failure falls back to the next provider, which answers.
      await setFault(emulator, { provider, fault, count: threshold });
      for (let call = 1; call <= threshold; call += 1) {
        const outcome = succeeded(await gateway.generate({ request, validate, chain }));
        expect(outcome).toMatchObject({ provider: other, fallback: true });
        expect(outcome.attempts.map(shape)).toEqual([
          { provider, outcome: 'failed', errorClass, httpStatus, countedByBreaker: true },
          { provider: other, outcome: 'succeeded', countedByBreaker: false },
        ]);
        const { breaker } = gateway.provider(provider);
        // The breaker opens exactly at the threshold, not before.
        expect(breaker.state).toBe(call < threshold ? 'closed' : 'open');
        if (call < threshold) expect(breaker.consecutiveFailures).toBe(call);
      }
      expect(await upstreamCalls(emulator, provider)).toBe(threshold);
      expect(gateway.provider(provider).stats.opens).toBe(1);

      // Open: no upstream call at all; the provider is skipped and the fallback answers.
      for (let call = 0; call < 3; call += 1) {
        const outcome = succeeded(await gateway.generate({ request, validate, chain }));
        expect(outcome.provider).toBe(other);
        expect(outcome.attempts.map(shape)).toEqual([
          { provider, outcome: 'skipped', errorClass: 'circuit_open', reason: 'circuit_open', countedByBreaker: false },
          { provider: other, outcome: 'succeeded', countedByBreaker: false },
        ]);
      }
      expect(await upstreamCalls(emulator, provider)).toBe(threshold);
      expect(gateway.provider(provider).stats.rejected).toBeGreaterThanOrEqual(3);

      // Half-open after recoveryMs: the probe is slow, so the other requests arrive while it is in flight.
      await vi.waitFor(() => expect(gateway.provider(provider).breaker.state).toBe('halfOpen'), { timeout: 10_000, interval: 20 });
      await setFault(emulator, { provider, fault: 'slow', ms: 300, count: 1 });
      const outcomes = await Promise.all(Array.from({ length: 4 }, () => gateway.generate({ request, validate, chain })));
      expect(await upstreamCalls(emulator, provider)).toBe(threshold + 1);
      const probes = outcomes.map(succeeded).filter((outcome) => outcome.provider === provider);
      expect(probes).toHaveLength(1);
      expect(probes[0]?.attempts.map(shape)).toEqual([{ provider, outcome: 'succeeded', countedByBreaker: false }]);
      const skipped = outcomes.map(succeeded).filter((outcome) => outcome.provider !== provider);
      expect(skipped).toHaveLength(3);
      for (const outcome of skipped) {
        expect(outcome.attempts.map(shape)).toEqual([
          { provider, outcome: 'skipped', errorClass: 'circuit_open', reason: 'circuit_open', countedByBreaker: false },
          { provider: other, outcome: 'succeeded', countedByBreaker: false },
        ]);
      }
      // The probe's success closed the breaker; the next request goes to the provider again.
      expect(gateway.provider(provider).breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
      expect(succeeded(await gateway.generate({ request, validate, chain })).provider).toBe(provider);
      expect(await upstreamCalls(emulator, provider)).toBe(threshold + 2);
    },
  );

  describe.each(providerCases)('$provider: user-side failures never move its breaker', ({ provider }) => {
    it.each(userSideFailures)('$prefix → $errorClass, falls back, breaker stays closed at 0', async ({ prefix, errorClass }) => {
      const other = nextProvider(provider);
      const chain = chainOf(provider, prefixedKey(prefix, provider));
      const requests = breakerSettings.threshold * 2;
      for (let call = 0; call < requests; call += 1) {
        const outcome = succeeded(await gateway.generate({ request, validate, chain }));
        expect(outcome).toMatchObject({ provider: other, fallback: true });
        expect(outcome.attempts[0]).toMatchObject({ provider, outcome: 'failed', errorClass, countedByBreaker: false });
      }
      const status = gateway.provider(provider);
      expect(status.breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
      expect(status.stats.opens).toBe(0);
      // Every request really reached the emulator (TimelyGPT's 401 at authenticate, before any generation call).
      const stats = emulator.stats()[provider];
      if (provider === 'timelygpt' && errorClass === 'auth') expect(stats.authCalls).toBeGreaterThanOrEqual(requests);
      else expect(stats.calls).toBe(requests);
    });
  });

  it('TimelyGPT token expiry: re-authenticates inside one attempt, counted nowhere', async () => {
    const chain = [{ provider: 'timelygpt' as const, apiKey: new Secret(keys.timelygpt) }];
    const requests = breakerSettings.threshold + 1;
    for (let call = 0; call < requests; call += 1) {
      await setFault(emulator, { provider: 'timelygpt', fault: 'tokenExpired', count: 1 });
      const outcome = succeeded(await gateway.generate({ request, validate, chain }));
      expect(outcome.attempts.map(shape)).toEqual([{ provider: 'timelygpt', outcome: 'succeeded', countedByBreaker: false }]);
    }
    const stats = emulator.stats().timelygpt;
    // Each request: the cached token answered 401, a new token was issued, the completion retried.
    expect(stats.calls).toBe(requests * 2);
    expect(stats.authCalls).toBe(requests + 1);
    expect(gateway.provider('timelygpt').breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    expect(gateway.provider('timelygpt').stats).toMatchObject({ failures: 0, opens: 0 });
  });
});
