/**
 * End to end: the real service over HTTP, the real SDK adapters and the emulator. The
 * rule, written out: with BREAKER_FAILURE_THRESHOLD=2 and the default BREAKER_MIN_DISTINCT_KEYS=2, the
 * provider's breaker opens only when the counted failures of a streak come from two distinct keys. One
 * key whose calls all time out (the emulator's `emu-hang-` keys never answer; PROVIDER_TIMEOUT_MS=300)
 * leaves the breaker closed for everyone else; two such keys open it.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postJson, request, startHarness, studyText } from './blackbox-support.js';
import type { Harness } from './blackbox-support.js';

let harness: Harness;

beforeAll(async () => {
  harness = await startHarness({
    BREAKER_FAILURE_THRESHOLD: '2',
    PROVIDER_TIMEOUT_MS: '300',
    RETRY_MAX: '0',
    // Each key's user on an address of its own (the quorum counts distinct client addresses): the
    // loopback peer is a trusted proxy, and X-Forwarded-For names the user.
    TRUST_PROXY: '1',
  });
});

afterAll(async () => {
  await harness.close();
});

/** Obviously fake emulator keys: two that never answer, one that works. */
const hangingKeyA = 'emu-hang-user-a-0001';
const hangingKeyB = 'emu-hang-user-b-0002';
/** A third hanging key: key A is quarantined by the first test (its own circuit), so it is never called again. */
const hangingKeyC = 'emu-hang-user-c-0004';
const healthyKey = 'test-claude-key-quorum-0003';

const claudeWith = (key: string) =>
  postJson(
    `${harness.url}/v1/generate`,
    { task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en' } },
    { 'x-claude-key': key, 'x-forwarded-for': addressOf(key) },
  );

/** A distinct public address per key, derived from the key's last digits. */
const addressOf = (key: string): string => `203.0.113.${Number(key.slice(-4)) % 250}`;

interface BreakerItem {
  readonly state: string;
  readonly consecutiveFailures: number;
  readonly minDistinctKeys: number;
  readonly distinctKeys: number;
}

async function claudeBreaker(): Promise<BreakerItem> {
  const result = await request(`${harness.url}/v1/providers`);
  expect(result.status).toBe(200);
  const items = (result.body.providers ?? result.body) as { id: string; breaker: BreakerItem }[];
  const claude = items.find((item) => item.id === 'claude');
  if (claude === undefined) throw new Error('no claude item');
  return claude.breaker;
}

/** The quorum as /metrics shows it for claude (counts only). */
async function claudeMetrics(): Promise<{ streakKeys: number; quorumKeys: number }> {
  const text = await (await fetch(`${harness.url}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name}\\{provider="claude"\\} (\\d+)$`, 'm').exec(text)?.[1]);
  return { streakKeys: value('studyhelper_breaker_streak_keys'), quorumKeys: value('studyhelper_breaker_quorum_keys') };
}

it('leaves the breaker closed while one key times out again and again, so another key is served', async () => {
  for (let call = 0; call < 4; call += 1) {
    const answer = await claudeWith(hangingKeyA);
    expect(answer.status).not.toBe(200);
    // Twice the threshold of counted failures, all from one key: still closed, one key of the two needed.
    expect(await claudeBreaker()).toMatchObject({ state: 'closed', minDistinctKeys: 2, distinctKeys: 1 });
    // The streak reached the threshold from one key alone at the second call: the key's own circuit
    // opened (a quarantine in its key health), so its later calls never reach the provider.
    if (call >= 2)
      expect(answer.body.error.attempts).toEqual([
        expect.objectContaining({ outcome: 'skipped', reason: 'key_quarantined', errorClass: 'timeout' }),
      ]);
  }
  expect(await claudeMetrics()).toEqual({ streakKeys: 1, quorumKeys: 2 });
  const served = await claudeWith(healthyKey);
  expect(served.status).toBe(200);
  expect(await claudeBreaker()).toMatchObject({ state: 'closed', consecutiveFailures: 0, distinctKeys: 0 });
});

it('opens the breaker when two keys fail in one streak, and then refuses every key', async () => {
  expect((await claudeWith(hangingKeyC)).status).not.toBe(200);
  expect((await claudeBreaker()).state).toBe('closed');
  expect((await claudeWith(hangingKeyB)).status).not.toBe(200);
  expect(await claudeBreaker()).toMatchObject({ state: 'open', consecutiveFailures: 2, distinctKeys: 2 });
  expect(await claudeMetrics()).toEqual({ streakKeys: 2, quorumKeys: 2 });

  const refused = await claudeWith(healthyKey);
  expect(refused.status).toBe(503);
  expect(refused.body.error.code).toBe('PROVIDERS_UNAVAILABLE');
});
