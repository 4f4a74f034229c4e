/**
 * Cost of `POST /v1/generate` through the real service, the real SDKs and the provider emulator on
 * loopback (docs/api.md "Cost"). Prices are set through MODEL_PRICES so that the arithmetic is plain:
 * Claude's model at $1 a token read and $2 a token written, GPT's at $3 and $5 (USD per million tokens ×
 * 1 000 000). The oracle is that rule over the usage the emulator reported, written out here.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { postJson, startHarness, studyText, type Harness } from '../http/blackbox-support.js';

const keys = { 'x-claude-key': 'test-claude-key-0001-cost', 'x-gpt-key': 'test-gpt-key-0001-cost' } as const;

const prices = JSON.stringify({
  'claude-sonnet-4-6': { input: 1_000_000, output: 2_000_000 },
  'gpt-5.2': { input: 3_000_000, output: 5_000_000 },
});

interface Attempt {
  provider: string;
  model: string;
  outcome: string;
  errorClass?: string;
  costUsd?: number;
}
interface Meta {
  provider: string;
  attempts: Attempt[];
  usage: { inputTokens: number | null; outputTokens: number | null };
  costUsd: number | null;
}

let harness: Harness;

beforeAll(async () => {
  harness = await startHarness({ MODEL_PRICES: prices, RETRY_MAX: '0' });
});

afterAll(async () => {
  await harness.close();
});

beforeEach(async () => {
  await harness.reset();
});

function generate(body: unknown, headers: Record<string, string> = keys) {
  return postJson(`${harness.url}/v1/generate`, body, headers);
}

describe('the cost of a generation', () => {
  it('prices each attempt as its reported usage times its model price, and meta.costUsd is their sum', async () => {
    const result = await generate({ task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en' } });
    expect(result.status, result.text).toBe(200);
    const meta = (result.body as { meta: Meta }).meta;
    const input = meta.usage.inputTokens ?? Number.NaN;
    const output = meta.usage.outputTokens ?? Number.NaN;
    expect(input).toBeGreaterThan(0);
    expect(output).toBeGreaterThan(0);
    // $1 per input token and $2 per output token.
    expect(meta.attempts).toHaveLength(1);
    expect(meta.attempts[0]?.costUsd).toBe(input * 1 + output * 2);
    expect(meta.costUsd).toBe(input * 1 + output * 2);
  });

  it('after a fallback prices each attempt by the model that answered it, failed attempts with usage included', async () => {
    const body = { task: 'notes', text: studyText, providers: ['claude', 'gpt'], options: { lang: 'en' } };
    // What GPT reports for this very request when it answers first (the emulator is deterministic).
    const alone = await generate({ ...body, providers: ['gpt'] });
    expect(alone.status, alone.text).toBe(200);
    const gptUsage = (alone.body as { meta: Meta }).meta.usage;
    const gptInput = gptUsage.inputTokens ?? Number.NaN;
    const gptOutput = gptUsage.outputTokens ?? Number.NaN;

    // Claude answers invalid material twice (the call and its one re-ask): both report usage; GPT answers.
    harness.fault({ provider: 'claude', fault: 'invalidOutput', count: 2 });
    const result = await generate(body);
    expect(result.status, result.text).toBe(200);
    const meta = (result.body as { meta: Meta }).meta;
    expect(meta.provider).toBe('gpt');
    expect(meta.attempts.map((attempt) => [attempt.provider, attempt.outcome, attempt.model])).toEqual([
      ['claude', 'failed', 'claude-sonnet-4-6'],
      ['claude', 'failed', 'claude-sonnet-4-6'],
      ['gpt', 'succeeded', 'gpt-5.2'],
    ]);
    const [first, reask, answered] = meta.attempts;
    // GPT's answer at GPT's price, $3 a token read and $5 a token written (not Claude's $1 and $2).
    expect(answered?.costUsd).toBe(gptInput * 3 + gptOutput * 5);
    // Claude's two answers reported usage: they are priced too, and the re-ask carries the first answer.
    const claudeFirst = first?.costUsd ?? Number.NaN;
    const claudeReask = reask?.costUsd ?? Number.NaN;
    expect(claudeFirst).toBeGreaterThan(0);
    expect(claudeReask).toBeGreaterThan(claudeFirst);
    // The usage of all three answers, and their cost: Claude's tokens at $1/$2, GPT's at $3/$5.
    const usage = meta.usage;
    const claudeTokens = { input: (usage.inputTokens ?? 0) - gptInput, output: (usage.outputTokens ?? 0) - gptOutput };
    expect(claudeFirst + claudeReask).toBe(claudeTokens.input * 1 + claudeTokens.output * 2);
    expect(meta.costUsd).toBe(claudeFirst + claudeReask + gptInput * 3 + gptOutput * 5);
  });
});
