/**
 * What a path of the fallback model asks of each provider, in order, and whether the emulator can play
 * it: it holds one fault per provider, for a number of calls, so a provider's calls can be one kind of
 * failure some times and then answers; a refused breaker or a quarantined key refuses every call.
 */
import type { FallbackModelContext, FallbackModelEvent } from './fallback.model.js';

/** What one attempt of the run is, as a model event makes it. */
export type Outcome = 'ok' | 'invalid' | 'server_error' | 'rate_limited' | 'rejected' | 'keySkipped';

export interface ScriptStep {
  readonly event: FallbackModelEvent;
  /** The model's context before the event: which provider, how many calls so far. */
  readonly before: FallbackModelContext;
}

export function outcomeOf(event: FallbackModelEvent): Outcome | undefined {
  switch (event.type) {
    case 'provider.succeeded':
      return event.valid ? 'ok' : 'invalid';
    case 'provider.failed':
      return event.errorClass;
    case 'provider.rejected':
      return 'rejected';
    case 'provider.keySkipped':
      return 'keySkipped';
    default:
      return undefined;
  }
}

/** Each chain position's outcomes, in order. */
export function scriptOf(steps: readonly ScriptStep[], links: number): Outcome[][] {
  const script: Outcome[][] = Array.from({ length: links }, () => []);
  for (const { event, before } of steps) {
    const outcome = outcomeOf(event);
    if (outcome !== undefined) script[before.index]?.push(outcome);
  }
  return script;
}

/** One kind of failure some times, then possibly an answer; a refusal is the provider's only outcome. */
export function isPlayable(outcomes: readonly Outcome[]): boolean {
  if (outcomes.includes('rejected') || outcomes.includes('keySkipped')) return outcomes.length === 1;
  const failures = outcomes.at(-1) === 'ok' ? outcomes.slice(0, -1) : outcomes;
  return !failures.includes('ok') && new Set(failures).size <= 1;
}
