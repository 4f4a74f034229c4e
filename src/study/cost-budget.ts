/**
 * The spending limit of one request or job (`options.maxCostUsd`, docs/api.md "Cost"): the fallback run
 * asks it before each call (its guard `isWithinBudget`), holds the call's worst case while it is out, and
 * settles that with what the call really cost. What was spent before (a resumed job's finished parts) is
 * counted from the start.
 */
import type { PriceTable } from '../cost/index.js';
import type { CallBudget, GenerationRequest } from '../machines/types.js';
import { tokenCounter } from './token-counter.js';

/**
 * Input tokens of a request as the project's token counter counts them: its system prompt, its messages
 * and its JSON schema (providers that take a schema bill it as input too), so the count errs high.
 */
export function requestInputTokens(request: GenerationRequest): Promise<number> {
  const text = [request.system, ...request.messages.map((message) => message.content), JSON.stringify(request.jsonSchema)].join('\n');
  return tokenCounter.count(text);
}

/** The most one call of `request` can cost at `model`: its input tokens and all its output room. */
async function worstCaseOfRequest(prices: PriceTable, model: string, request: GenerationRequest): Promise<number | null> {
  if (prices.priceOf(model) === null) return null;
  return prices.costOfTokens(model, await requestInputTokens(request), request.maxOutputTokens);
}

/** A budget with what it has spent so far (USD), for the job's view and tests. */
export interface CostBudget extends CallBudget {
  readonly spentUsd: number;
}

/** Sums of floating-point prices can be a few ulps off: a call that fits exactly is not refused for that. */
const toleranceUsd = 1e-9;

/** A limit of `maxUsd` over `prices`, of which `spentUsd` is already spent. */
export function createCostBudget(maxUsd: number, prices: PriceTable, spentUsd = 0): CostBudget {
  const held = new Map<string, number>();
  let spent = spentUsd;
  let holding = 0;
  return {
    maxUsd,
    get spentUsd() {
      return spent;
    },
    worstCaseOf: (model, request) => worstCaseOfRequest(prices, model, request),
    allows: (usd) => usd !== null && spent + holding + usd <= maxUsd + toleranceUsd,
    hold(callId, usd) {
      held.set(callId, usd);
      holding += usd;
    },
    settle(callId, usd) {
      const reserved = held.get(callId);
      if (reserved === undefined) return;
      held.delete(callId);
      holding -= reserved;
      spent += usd ?? reserved;
    },
  };
}
