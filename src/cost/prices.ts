/**
 * What the providers charge per model, and what a call cost or may cost at those prices (docs/api.md
 * "Cost"). Users pay their providers with their own keys, so every figure here is their money: a model
 * the table does not know is unpriced (null), never guessed.
 */
import type { TokenUsage } from '../machines/types.js';

/** USD per million tokens, read and written. */
export interface ModelPrice {
  readonly input: number;
  readonly output: number;
}

/**
 * The list prices of the service's default models (CLAUDE_MODEL, GPT_MODEL, TIMELYGPT_MODEL), as their
 * makers publish them (docs/configuration.md dates the table). TimelyGPT serves OpenAI's models and reports
 * no usage: its calls are priced only where a worst case is needed (the estimate, the budget).
 * `MODEL_PRICES` adds or overrides entries.
 */
const builtInPrices: Readonly<Record<string, ModelPrice>> = {
  'claude-sonnet-4-6': { input: 3, output: 15 },
  'gpt-5.2': { input: 1.75, output: 14 },
};

/** Costs are rounded to a billionth of a dollar: sums of floating-point products stay readable and stable. */
function roundUsd(usd: number): number {
  return Math.round(usd * 1e9) / 1e9;
}

/** Sums costs that are known; null when none is. */
export function sumUsd(costs: readonly (number | null | undefined)[]): number | null {
  let total: number | null = null;
  for (const cost of costs) if (typeof cost === 'number') total = (total ?? 0) + cost;
  return total === null ? null : roundUsd(total);
}

/** The price table the service runs with: the built-in prices and MODEL_PRICES over them. */
export interface PriceTable {
  /** The model's price, or null when the table has none. */
  priceOf(model: string): ModelPrice | null;
  /** USD of what a call reported using; null when the model is unpriced or the call reported no usage. */
  costOf(model: string, usage: TokenUsage): number | null;
  /** USD of `inputTokens` read and `outputTokens` written; null when the model is unpriced. */
  costOfTokens(model: string, inputTokens: number, outputTokens: number): number | null;
  /** Every priced model (the built-in ones and MODEL_PRICES), for docs and the page. */
  readonly entries: Readonly<Record<string, ModelPrice>>;
}

/** The table of `builtInPrices` with `overrides` (MODEL_PRICES) over them. */
export function createPriceTable(overrides: Readonly<Record<string, ModelPrice>> = {}): PriceTable {
  const entries: Readonly<Record<string, ModelPrice>> = { ...builtInPrices, ...overrides };
  const prices = new Map(Object.entries(entries));
  const priceOf = (model: string): ModelPrice | null => prices.get(model) ?? null;
  const costOfTokens = (model: string, inputTokens: number, outputTokens: number): number | null => {
    const price = priceOf(model);
    if (price === null) return null;
    return roundUsd((inputTokens * price.input + outputTokens * price.output) / 1_000_000);
  };
  return {
    entries,
    priceOf,
    costOfTokens,
    costOf(model, usage) {
      if (usage.inputTokens === null && usage.outputTokens === null) return null;
      return costOfTokens(model, usage.inputTokens ?? 0, usage.outputTokens ?? 0);
    },
  };
}

/**
 * MODEL_PRICES: a JSON object `{"<model>":{"input":usd,"output":usd}}` (USD per million tokens). Throws
 * an Error saying what is wrong (the configuration names the variable): not JSON, not such an object, or
 * a price that is not a positive finite number.
 */
export function parseModelPrices(raw: string): Record<string, ModelPrice> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new Error('is not valid JSON (expected {"<model>":{"input":usd,"output":usd}}, USD per million tokens)');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new Error('must be a JSON object {"<model>":{"input":usd,"output":usd}}');
  const prices: Record<string, ModelPrice> = {};
  for (const [model, entry] of Object.entries(parsed)) {
    if (model.trim() === '') throw new Error('names an empty model');
    const input: unknown = typeof entry === 'object' && entry !== null ? (entry as { input?: unknown }).input : undefined;
    const output: unknown = typeof entry === 'object' && entry !== null ? (entry as { output?: unknown }).output : undefined;
    if (!isPrice(input) || !isPrice(output))
      throw new Error(`gives ${JSON.stringify(model.slice(0, 80))} a price that is not {"input":usd,"output":usd} with positive numbers`);
    prices[model] = { input, output };
  }
  return prices;
}

function isPrice(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0;
}
