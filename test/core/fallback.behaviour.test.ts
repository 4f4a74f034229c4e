/**
 * Retry-and-fallback rules as behaviour through the gateway's public API (createGateway → generate),
 * with fake timers and an upstream scripted here, so they hold whatever shape the machines take:
 * - RETRY_BACKOFF_MS gives one delay per retry and its last delay repeats (docs/errors.md "Resilience rules", docs/configuration.md);
 * - the usage answered is the sum over every call that answered (re-asks and fallbacks included),
 *   a provider that reports no count adds nothing, and no count at all stays null.
 * Expected times and sums are written out, not computed by the code under test.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { GenerateOutcome } from '../../src/actors/types.js';
import type { ProviderId, TokenUsage } from '../../src/providers/index.js';
import { startRig, t0, type Call, type Rig, type Upstream } from './behaviour-support.js';

let rig: Rig | undefined;

function start(
  scripts: Partial<Record<ProviderId, Call[]>>,
  retry: { max: number; backoffMs: number[] },
): Readonly<Record<ProviderId, Upstream>> {
  // A threshold no test reaches: the breaker stays closed, only the retry rules act.
  rig = startRig({ scripts, retry, breaker: { threshold: 100, recoveryMs: 60_000 } });
  return rig.upstreams;
}

async function run(providers: ProviderId[]): Promise<GenerateOutcome<true>> {
  if (rig === undefined) throw new Error('start() first');
  const pending = rig.generate(providers);
  await vi.advanceTimersByTimeAsync(60_000);
  return pending;
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(t0);
});

afterEach(async () => {
  await rig?.gateway.stop();
  rig = undefined;
  vi.useRealTimers();
});

const serverError: Call = { failure: 'server_error' };

describe('retry backoff: one delay per retry, the last one repeats', () => {
  it('waits 100, 300, then 300 again and 300 again (backoff 100,300; four retries)', async () => {
    const { claude } = start(
      { claude: [serverError, serverError, serverError, serverError] },
      { max: 4, backoffMs: [100, 300] },
    );
    const outcome = await run(['claude']);
    expect(outcome.status).toBe('succeeded');
    expect(claude.calledAt).toEqual([0, 100, 400, 700, 1000]);
  });

  it('repeats a single delay for every retry (backoff 500; three retries)', async () => {
    const { claude } = start(
      { claude: [serverError, serverError, serverError] },
      { max: 3, backoffMs: [500] },
    );
    expect((await run(['claude'])).status).toBe('succeeded');
    expect(claude.calledAt).toEqual([0, 500, 1000, 1500]);
  });

  it('uses each listed delay in order before repeating the last (backoff 50,200,1000; three retries)', async () => {
    const { claude } = start(
      { claude: [serverError, serverError, serverError] },
      { max: 3, backoffMs: [50, 200, 1000] },
    );
    expect((await run(['claude'])).status).toBe('succeeded');
    expect(claude.calledAt).toEqual([0, 50, 250, 1250]);
  });
});

describe('usage: summed over every call that answered', () => {
  const usage = (inputTokens: number | null, outputTokens: number | null): TokenUsage => ({
    inputTokens,
    outputTokens,
  });

  it('adds the invalid answer and its re-ask on the same provider', async () => {
    start(
      {
        claude: [
          { answer: 'invalid', usage: usage(10, 5) },
          { answer: 'valid', usage: usage(20, 7) },
        ],
      },
      { max: 0, backoffMs: [0] },
    );
    const outcome = await run(['claude']);
    expect(outcome).toMatchObject({
      status: 'succeeded',
      provider: 'claude',
      usage: { inputTokens: 30, outputTokens: 12 },
    });
  });

  it("adds the first provider's answers to the one that succeeded after falling back", async () => {
    start(
      {
        claude: [
          { answer: 'invalid', usage: usage(1, 2) },
          { answer: 'invalid', usage: usage(3, 4) },
        ],
        gpt: [{ answer: 'valid', usage: usage(100, 200) }],
      },
      { max: 0, backoffMs: [0] },
    );
    const outcome = await run(['claude', 'gpt']);
    expect(outcome).toMatchObject({
      status: 'succeeded',
      provider: 'gpt',
      usage: { inputTokens: 104, outputTokens: 206 },
    });
  });

  it('counts nothing for a call that failed without an answer', async () => {
    start({ claude: [serverError, { answer: 'valid', usage: usage(3, 2) }] }, { max: 1, backoffMs: [0] });
    expect(await run(['claude'])).toMatchObject({
      status: 'succeeded',
      usage: { inputTokens: 3, outputTokens: 2 },
    });
  });

  it('adds only the counts reported: a missing count adds nothing, and none at all stays null', async () => {
    start(
      {
        claude: [
          { answer: 'invalid', usage: usage(null, 4) },
          { answer: 'valid', usage: usage(null, 6) },
        ],
      },
      { max: 0, backoffMs: [0] },
    );
    expect(await run(['claude'])).toMatchObject({
      status: 'succeeded',
      usage: { inputTokens: null, outputTokens: 10 },
    });
  });

  it('starts from the first count reported, even after one that reported none', async () => {
    start(
      {
        claude: [
          { answer: 'invalid', usage: usage(null, null) },
          { answer: 'valid', usage: usage(8, 0) },
        ],
      },
      { max: 0, backoffMs: [0] },
    );
    expect(await run(['claude'])).toMatchObject({
      status: 'succeeded',
      usage: { inputTokens: 8, outputTokens: 0 },
    });
  });
});
