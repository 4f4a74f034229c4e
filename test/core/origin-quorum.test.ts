/**
 * The breaker's quorum counts distinct origins when requests carry one: one client
 * address inventing keys is one voter, so its failures cannot open a provider's breaker for everyone;
 * without an origin, distinct keys vote as before. Driven through the gateway, with the rule written
 * out here: the breaker (threshold 3, quorum 2) opens on the third counted failure exactly when those
 * failures came from at least 2 distinct voters.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { fail } from './scripted-adapter.js';
import { request, startHarness, validate } from './gateway-harness.js';
import { Secret } from '../../src/security/secret.js';

const threshold = 3;
const quorum = 2;

async function failures(calls: readonly { key: string; origin?: string }[]): Promise<string> {
  const harness = startHarness({
    breaker: { threshold, recoveryMs: 60_000, minDistinctKeys: quorum },
    retry: { max: 0, backoffMs: [10] },
  });
  harness.adapters.claude.script(...calls.map(() => fail('server_error')));
  for (const call of calls) {
    await harness.gateway.generate({
      request,
      validate,
      chain: [{ provider: 'claude', apiKey: new Secret(call.key) }],
      ...(call.origin === undefined ? {} : { origin: call.origin }),
    });
  }
  const state = harness.gateway.provider('claude').breaker.state;
  await harness.gateway.stop();
  return state;
}

/** The rule, literally: open once `threshold` counted failures came from `quorum` distinct voters. */
function expected(calls: readonly { key: string; origin?: string }[]): string {
  const voters = new Set(calls.map((call) => (call.origin === undefined ? `key ${call.key}` : `origin ${call.origin}`)));
  return calls.length >= threshold && voters.size >= quorum ? 'open' : 'closed';
}

describe('the quorum by origin', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const cases = {
    'one address with three keys stays closed': [
      { key: 'test-claude-key-0001', origin: 'addr-1' },
      { key: 'test-claude-key-0002', origin: 'addr-1' },
      { key: 'test-claude-key-0003', origin: 'addr-1' },
    ],
    'two addresses open it': [
      { key: 'test-claude-key-0001', origin: 'addr-1' },
      { key: 'test-claude-key-0002', origin: 'addr-2' },
      { key: 'test-claude-key-0003', origin: 'addr-1' },
    ],
    'two addresses sharing one key open it': [
      { key: 'test-claude-key-0001', origin: 'addr-1' },
      { key: 'test-claude-key-0001', origin: 'addr-2' },
      { key: 'test-claude-key-0001', origin: 'addr-2' },
    ],
    'without origins, three keys open it (keys vote)': [
      { key: 'test-claude-key-0001' },
      { key: 'test-claude-key-0002' },
      { key: 'test-claude-key-0003' },
    ],
    'without origins, one key stays closed': [
      { key: 'test-claude-key-0001' },
      { key: 'test-claude-key-0001' },
      { key: 'test-claude-key-0001' },
    ],
  };

  it.each(Object.entries(cases))('%s', async (_name, calls) => {
    const state = failures(calls);
    await vi.runAllTimersAsync();
    expect(await state).toBe(expected(calls));
  });

  it('covers both answers of the rule', () => {
    expect(new Set(Object.values(cases).map(expected))).toEqual(new Set(['open', 'closed']));
  });
});
