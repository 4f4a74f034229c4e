/**
 * Retry-and-fallback rules as behaviour through the gateway's public API (createGateway → generate),
 * with fake timers and an upstream scripted here, so they hold whatever shape the machines take:
 * - RETRY_BACKOFF_MS gives one delay per retry and its last delay repeats (SPEC.md, docs/configuration.md);
 * - the usage answered is the sum over every call that answered (re-asks and fallbacks included),
 *   a provider that reports no count adds nothing, and no count at all stays null.
 * Expected times and sums are written out, not computed by the code under test.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createGateway } from '../../src/actors/gateway.js';
import type { Gateway, GenerateOutcome, Validation } from '../../src/actors/types.js';
import type { ProviderFailure } from '../../src/errors/index.js';
import type { ProviderAdapter, ProviderAnswer, ProviderId, TokenUsage } from '../../src/providers/index.js';

/** One scripted call: an answer (valid or not, with its usage) or a classified failure. */
type Call =
  | { readonly answer: 'valid' | 'invalid'; readonly usage?: TokenUsage }
  | { readonly failure: ProviderFailure['errorClass'] };

class Scripted extends Error {
  constructor(readonly failure: ProviderFailure) {
    super(failure.message);
  }
}

interface Upstream extends ProviderAdapter {
  /** Milliseconds since the test's start at which each call reached the upstream. */
  readonly calledAt: number[];
}

const t0 = Date.parse('2026-01-01T00:00:00Z');

function upstream(id: ProviderId, calls: Call[]): Upstream {
  const calledAt: number[] = [];
  return {
    id,
    model: `${id}-model`,
    calledAt,
    async generate(): Promise<ProviderAnswer> {
      calledAt.push(Date.now() - t0);
      const call = calls.shift() ?? { answer: 'valid' };
      if ('failure' in call)
        throw new Scripted({ errorClass: call.failure, message: `scripted ${call.failure}` });
      return {
        text: call.answer === 'valid' ? '{"ok":true}' : '{"ok":false}',
        model: `${id}-model`,
        usage: call.usage ?? { inputTokens: null, outputTokens: null },
        truncated: false,
      };
    },
    classify: (error) =>
      error instanceof Scripted ? error.failure : { errorClass: 'connection', message: 'unexpected' },
  };
}

function validate(answer: ProviderAnswer): Validation<true> {
  return answer.text === '{"ok":true}'
    ? { ok: true, value: true }
    : { ok: false, errors: ['ok: expected true'] };
}

let gateway: Gateway | undefined;

function start(
  scripts: Partial<Record<ProviderId, Call[]>>,
  retry: { max: number; backoffMs: number[] },
): Record<ProviderId, Upstream> {
  const adapters = {
    claude: upstream('claude', scripts.claude ?? []),
    gpt: upstream('gpt', scripts.gpt ?? []),
    timelygpt: upstream('timelygpt', scripts.timelygpt ?? []),
  };
  gateway = createGateway({
    adapters,
    // A threshold no test reaches: the breaker stays closed, only the retry rules act.
    breaker: { threshold: 100, recoveryMs: 60_000 },
    retry,
    policy: 'retry-then-fallback',
    providerTimeoutMs: 60_000,
  });
  return adapters;
}

async function run(providers: ProviderId[]): Promise<GenerateOutcome<true>> {
  if (gateway === undefined) throw new Error('start() first');
  const pending = gateway.generate({
    request: {
      task: 'notes',
      system: 'You write study notes.',
      messages: [{ role: 'user', content: 'Light becomes chemical energy.' }],
      jsonSchema: { type: 'object' },
      maxOutputTokens: 256,
    },
    validate,
    chain: providers.map((provider) => ({ provider, apiKey: `test-${provider}-key-behaviour` })),
  });
  await vi.advanceTimersByTimeAsync(60_000);
  return pending;
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(t0);
});

afterEach(async () => {
  await gateway?.stop();
  gateway = undefined;
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
