/**
 * End to end: the real service over HTTP, the real SDK adapters and the emulator, with
 * short configured recovery times (BREAKER_RECOVERY_MS=500, BREAKER_MAX_RECOVERY_MS=1500). The rule,
 * written out: each failed half-open probe doubles the next open period (500, 1000, then the 1500 cap),
 * a probe success resets it to 500; `retryAt` in `GET /v1/providers` is the opening time plus it, and
 * the 503's Retry-After points at it.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postJson, request, startHarness, studyText } from './blackbox-support.js';
import type { Harness } from './blackbox-support.js';

let harness: Harness;

beforeAll(async () => {
  harness = await startHarness({
    BREAKER_FAILURE_THRESHOLD: '1',
    BREAKER_RECOVERY_MS: '500',
    BREAKER_MAX_RECOVERY_MS: '1500',
    // One key opens the breaker here: the quorum of distinct keys is off.
    BREAKER_MIN_DISTINCT_KEYS: '1',
    RETRY_MAX: '0',
  });
});

afterAll(async () => {
  await harness.close();
});

const claudeOnly = () =>
  postJson(`${harness.url}/v1/generate`, { task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en' } }, { 'x-claude-key': 'test-claude-key-0001' });

interface BreakerItem {
  readonly state: string;
  readonly openedAt: string | null;
  readonly retryAt: string | null;
}

async function claudeBreaker(): Promise<BreakerItem> {
  const result = await request(`${harness.url}/v1/providers`);
  expect(result.status).toBe(200);
  const items = (result.body.providers ?? result.body) as { id: string; breaker: BreakerItem }[];
  const claude = items.find((item) => item.id === 'claude');
  if (claude === undefined) throw new Error('no claude item');
  return claude.breaker;
}

/** retryAt − openedAt of an open breaker, in ms. */
function spacing(breaker: BreakerItem): number {
  expect(breaker.state).toBe('open');
  return Date.parse(breaker.retryAt ?? '') - Date.parse(breaker.openedAt ?? '');
}

/** Waits (a few hundred ms at most here) until the breaker's retryAt has passed. */
async function untilRetryAt(breaker: BreakerItem): Promise<void> {
  const wait = Date.parse(breaker.retryAt ?? '') - Date.now() + 10;
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

it('spaces the probes 500, 1000, 1500 (cap) ms apart while they fail, and back to 500 ms after a success', async () => {
  harness.fault({ provider: 'claude', fault: 'http500' });
  await claudeOnly();
  const spacings = [spacing(await claudeBreaker())];

  // While open: refused without an upstream call, Retry-After pointing at retryAt (whole seconds, rounded up).
  const refused = await claudeOnly();
  expect(refused.status).toBe(503);
  expect(refused.body.error.code).toBe('PROVIDERS_UNAVAILABLE');
  expect(Number(refused.headers.get('retry-after'))).toBe(1);

  for (let probe = 0; probe < 2; probe += 1) {
    await untilRetryAt(await claudeBreaker());
    await claudeOnly();
    spacings.push(spacing(await claudeBreaker()));
  }
  expect(spacings).toEqual([500, 1000, 1500]);

  harness.emulator.resetFaults();
  await untilRetryAt(await claudeBreaker());
  expect((await claudeOnly()).status).toBe(200);
  expect((await claudeBreaker()).state).toBe('closed');

  harness.fault({ provider: 'claude', fault: 'http500' });
  await claudeOnly();
  expect(spacing(await claudeBreaker())).toBe(500);
});
