/**
 * Cost of `POST /v1/generate` through the real service, the real SDKs and the provider emulator on
 * loopback (docs/api.md "Cost"). Prices are set through MODEL_PRICES so that the arithmetic is plain:
 * Claude's model at $1 a token read and $2 a token written, GPT's at $3 and $5 (USD per million tokens ×
 * 1 000 000). The oracle is that rule over the usage the emulator reported, written out here.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createPriceTable } from '../../src/cost/index.js';
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
  harness = await startHarness({ MODEL_PRICES: prices, RETRY_MAX: '0', PROVIDER_TIMEOUT_MS: '10000' });
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

describe('a generation with a budget', () => {
  it('is refused 422 BUDGET_EXCEEDED without a provider call when the first call could pass it', async () => {
    const before = harness.emulator.stats().claude.calls;
    // Claude's model costs $2 per output token here: the notes call's 4096 tokens of output room alone pass $1.
    const result = await generate({ task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en', maxCostUsd: 1 } });
    expect(result.status, result.text).toBe(422);
    const error = (result.body as { error: { code: string; message: string; attempts: unknown[] } }).error;
    expect(error.code).toBe('BUDGET_EXCEEDED');
    expect(error.message).toContain('maxCostUsd');
    expect(error.attempts).toEqual([]);
    expect(harness.emulator.stats().claude.calls).toBe(before);
  });

  it('goes ahead when the worst case fits', async () => {
    // Worst case: the prompt's tokens at $1 and 4096 output tokens at $2: well under $100 000.
    const result = await generate({ task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en', maxCostUsd: 100_000 } });
    expect(result.status, result.text).toBe(200);
  });

  it.each([0, -0.5, '1', null, 1e7])('refuses maxCostUsd %j with 400 INVALID_REQUEST', async (maxCostUsd) => {
    const result = await generate({ task: 'notes', text: studyText, options: { maxCostUsd } });
    expect(result.status).toBe(400);
    expect((result.body as { error: { code: string } }).error.code).toBe('INVALID_REQUEST');
  });

  it('counts what was paid in studyhelper_cost_usd_total by provider and model', async () => {
    const metrics = async (): Promise<number> => {
      const text = await (await fetch(`${harness.url}/metrics`)).text();
      const line = text.split('\n').find((entry) => entry.startsWith('studyhelper_cost_usd_total{provider="gpt",model="gpt-5.2"}'));
      return line === undefined ? 0 : Number(line.split(' ').pop());
    };
    const before = await metrics();
    const result = await generate({ task: 'notes', text: `${studyText} Metrics.`, providers: ['gpt'], options: { lang: 'en' } });
    expect(result.status, result.text).toBe(200);
    const meta = (result.body as { meta: Meta }).meta;
    expect(meta.costUsd).toBe((meta.usage.inputTokens ?? 0) * 3 + (meta.usage.outputTokens ?? 0) * 5);
    // A busy instance serves /metrics from a rendering up to a second old (the scrape flood bound): read
    // until a fresh one shows the call.
    const expected = before + (meta.costUsd ?? 0);
    let seen = await metrics();
    for (let tries = 0; tries < 30 && Math.abs(seen - expected) > 1e-6; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      seen = await metrics();
    }
    expect(seen).toBeCloseTo(expected, 6);
  });
});

describe('MODEL_PRICES', () => {
  it.each([
    ['not JSON', '{claude'],
    ['not an object', '[1,2]'],
    ['a price that is not a number', '{"m":{"input":"1","output":2}}'],
    ['a price that is not positive', '{"m":{"input":0,"output":2}}'],
    ['a missing price', '{"m":{"input":1}}'],
  ])('fails start-up naming the variable when it is %s', (_what, value) => {
    expect(() => loadConfig({ MODEL_PRICES: value })).toThrow(/MODEL_PRICES/);
  });

  it('adds and overrides prices', () => {
    const config = loadConfig({ MODEL_PRICES: '{"my-model":{"input":0.5,"output":1.5},"gpt-5.2":{"input":2,"output":3}}' });
    const table = createPriceTable(config.modelPrices);
    expect(table.priceOf('my-model')).toEqual({ input: 0.5, output: 1.5 });
    expect(table.priceOf('gpt-5.2')).toEqual({ input: 2, output: 3 });
    // A built-in entry left alone, and a model nobody priced: unpriced, never guessed.
    expect(table.priceOf('claude-sonnet-4-6')).toEqual({ input: 3, output: 15 });
    expect(table.priceOf('gpt-4o')).toBeNull();
    expect(table.costOf('gpt-4o', { inputTokens: 10, outputTokens: 10 })).toBeNull();
    // 1 000 000 tokens read at $2 and 500 000 written at $3.
    expect(table.costOf('gpt-5.2', { inputTokens: 1_000_000, outputTokens: 500_000 })).toBe(3.5);
  });
});
