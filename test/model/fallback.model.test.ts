/**
 * Model-based test of the running service's retry-and-fallback runs. The model is
 * fallback.model.ts (the production fallback machine as one request's attempts show it); its simple
 * paths to an end, for both policies, are the runs walked on the real service: each path is turned into
 * what every provider of the chain does (an emulator fault for some calls, an operator's forced open,
 * a key quarantined by an earlier 401), one `POST /v1/generate` is made, and every step of the path is
 * checked against the answer's attempts in order — provider, outcome, class, reason, `retry`, whether
 * the breaker counted it — and the end state against the status, `meta.provider` and `meta.fallback`;
 * after the run, `GET /v1/providers` shows each provider's count as its server errors since its last
 * answer (a 429 never counts). Paths the emulator cannot play (one fault per provider at a time: say a
 * 500 and then an invalid answer from one provider) and the aborted runs (test/http/request-signal.test.ts)
 * are left out; the counts of what is walked are asserted.
 * Every walk runs on one instance alone and again on one with REDIS_URL (the real Redis).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestModel } from 'xstate/graph';
import { fallbackMachine } from '../../src/machines/fallback.machine.js';
import type { ProviderId } from '../../src/providers/index.js';
import { isPlayable, outcomeOf, scriptOf, type Outcome, type ScriptStep } from './fallback-script.js';
import {
  createFallbackModel,
  modelLinks,
  modelRetryMax,
  type FallbackModelContext,
  type FallbackModelEvent,
  type FallbackPolicy,
} from './fallback.model.js';
import { statePaths, transitionLines } from './machine-edges.js';
import {
  attemptsOf,
  controlBreaker,
  freshKey,
  generate,
  providerItem,
  modeEnv,
  serviceModes,
  startModelService,
  wireFault,
  type AttemptView,
  type Harness,
  type HttpResult,
} from './service-rig.js';
import { expectComplete } from './walk.js';

describe('the fallback model mirrors src/machines/fallback.machine.ts', () => {
  for (const policy of ['retry-then-fallback', 'fallback-first'] as const) {
    it(`${policy}: the same state nodes and transitions (the backoff's \`after\` as a time event)`, () => {
      const model = createFallbackModel(policy);
      expect(statePaths(model)).toEqual(statePaths(fallbackMachine));
      expect(transitionLines(model)).toEqual(transitionLines(fallbackMachine));
    });
  }
});

const allEvents = (): FallbackModelEvent[] => [
  { type: 'provider.succeeded', valid: true },
  { type: 'provider.succeeded', valid: false },
  { type: 'provider.failed', errorClass: 'server_error' },
  { type: 'provider.failed', errorClass: 'rate_limited' },
  { type: 'provider.rejected' },
  { type: 'provider.keySkipped' },
  { type: 'request.aborted' },
  { type: 'time.backoffElapsed' },
];

type Path = ReturnType<ReturnType<typeof createTestModel>['getSimplePaths']>[number];

function stepsOf(path: Path): ScriptStep[] {
  return path.steps.slice(1).map((step, index) => ({
    event: step.event as FallbackModelEvent,
    before: path.steps[index]?.state.context as FallbackModelContext,
  }));
}

/** The model's simple paths to an end that the emulator can play, without the aborted ones. */
function walkedPaths(policy: FallbackPolicy): { all: number; walked: Path[] } {
  const model = createTestModel(createFallbackModel(policy), { events: allEvents as never });
  const all = model.getSimplePaths() as Path[];
  const walked = all.filter(
    (path) =>
      path.state.status === 'done' &&
      !path.steps.some((step) => step.event.type === 'request.aborted') &&
      scriptOf(stepsOf(path), modelLinks).every(isPlayable),
  );
  return { all: all.length, walked };
}

/** Each `from --event--> to` a set of paths takes (the transient `deciding` is not a step's state). */
function linesOf(paths: readonly Path[]): string[] {
  const lines = new Set<string>();
  for (const path of paths)
    path.steps.slice(1).forEach((step, index) => {
      lines.add(`${JSON.stringify(path.steps[index]?.state.value)} --${step.event.type}--> ${JSON.stringify(step.state.value)}`);
    });
  return [...lines].sort();
}

const chains: Record<FallbackPolicy, readonly [ProviderId, ProviderId]> = {
  'retry-then-fallback': ['claude', 'gpt'],
  'fallback-first': ['timelygpt', 'claude'],
};

const plans = {
  'retry-then-fallback': walkedPaths('retry-then-fallback'),
  'fallback-first': walkedPaths('fallback-first'),
};

it('walks 43 of 705 simple paths with retry-then-fallback and 41 of 167 with fallback-first', () => {
  expect([plans['retry-then-fallback'].all, plans['retry-then-fallback'].walked.length]).toEqual([705, 43]);
  expect([plans['fallback-first'].all, plans['fallback-first'].walked.length]).toEqual([167, 41]);
});

it('takes every transition of the model but the aborts, under each policy', () => {
  const common = [
    '"calling" --provider.failed--> "calling"',
    '"calling" --provider.failed--> "failed"',
    '"calling" --provider.keySkipped--> "calling"',
    '"calling" --provider.keySkipped--> "failed"',
    '"calling" --provider.rejected--> "calling"',
    '"calling" --provider.rejected--> "failed"',
    '"calling" --provider.succeeded--> "calling"',
    '"calling" --provider.succeeded--> "failed"',
    '"calling" --provider.succeeded--> "succeeded"',
    '"calling" --provider.failed--> "backingOff"',
    '"backingOff" --time.backoffElapsed--> "calling"',
  ].sort();
  expect(linesOf(plans['retry-then-fallback'].walked)).toEqual(common);
  expect(linesOf(plans['fallback-first'].walked)).toEqual(common);
});

const harnesses = new Map<FallbackPolicy, Harness>();

const faultOf = (provider: ProviderId, outcome: Outcome, count: number) => {
  if (outcome === 'server_error') return { provider, fault: 'http500' as const, count };
  if (outcome === 'invalid') return { provider, fault: 'invalidOutput' as const, count };
  if (outcome === 'rate_limited') return wireFault(provider, 'rateLimit', count);
  return undefined;
};

/** The attempt a model event makes, for the provider and call count the model had before it. */
function expectedAttempt(event: FallbackModelEvent, before: FallbackModelContext, provider: ProviderId): Partial<AttemptView> {
  const base = { provider, retry: before.calls };
  switch (outcomeOf(event)) {
    case 'ok':
      return { ...base, outcome: 'succeeded', countedByBreaker: false };
    case 'invalid':
      return { ...base, outcome: 'failed', errorClass: 'invalid_output', countedByBreaker: false };
    case 'server_error':
      return { ...base, outcome: 'failed', errorClass: 'server_error', countedByBreaker: true };
    case 'rate_limited':
      return { ...base, outcome: 'failed', errorClass: 'rate_limited', countedByBreaker: false };
    case 'rejected':
      return { ...base, outcome: 'skipped', reason: 'circuit_open', countedByBreaker: false };
    case 'keySkipped':
      return { ...base, outcome: 'skipped', reason: 'key_quarantined', errorClass: 'auth', countedByBreaker: false };
    default:
      throw new Error(`no attempt for ${event.type}`);
  }
}

/** Plays one path on the service of `policy` and checks each step against the run's attempts. */
async function walk(policy: FallbackPolicy, path: Path): Promise<void> {
  const harness = harnesses.get(policy);
  if (harness === undefined) throw new Error('no service');
  const chain = chains[policy].map((provider) => ({ provider, key: freshKey(provider) }));
  const script = scriptOf(stepsOf(path), modelLinks);
  for (const { provider } of chain) await controlBreaker(harness, provider, 'reset');
  for (const [index, outcomes] of script.entries()) {
    const link = chain[index];
    if (link === undefined) throw new Error('chain too short');
    if (outcomes[0] === 'rejected') await controlBreaker(harness, link.provider, 'forceOpen');
    if (outcomes[0] === 'keySkipped') {
      // An earlier request's 401 quarantines the key (TimelyGPT: llm-completion's, twice).
      harness.fault(wireFault(link.provider, 'auth', link.provider === 'timelygpt' ? 2 : 1));
      const first = await generate(harness, [link]);
      expect(attemptsOf(first)).toMatchObject([{ outcome: 'failed', errorClass: 'auth' }]);
    }
    const failures = outcomes.filter((outcome) => outcome !== 'ok');
    const fault = failures[0] === undefined ? undefined : faultOf(link.provider, failures[0], failures.length);
    if (fault !== undefined) harness.fault(fault);
  }

  const result: HttpResult = await generate(harness, chain);
  const attempts = attemptsOf(result);
  const items = await Promise.all(chain.map(({ provider }) => providerItem(harness, provider)));
  for (const { provider } of chain) await controlBreaker(harness, provider, 'reset');
  let cursor = 0;

  const consume = (step: { event: FallbackModelEvent }) => {
    const index = path.steps.indexOf(step as never);
    const before = path.steps[index - 1]?.state.context as FallbackModelContext;
    const provider = chain[before.index]?.provider as ProviderId;
    expect(attempts[cursor], `attempt ${cursor} of ${result.text.slice(0, 600)}`).toMatchObject(expectedAttempt(step.event, before, provider));
    cursor += 1;
  };
  const nextAttemptIsFor = (snapshot: { context: FallbackModelContext }) => {
    expect(attempts[cursor]).toMatchObject({ provider: chain[snapshot.context.index]?.provider, retry: snapshot.context.calls });
  };
  const ended = () => {
    expect(cursor, 'every attempt of the run is a step of the path').toBe(attempts.length);
    // The breaker counted each provider's server errors since its last answer; a 429 or an invalid
    // answer never counts.
    script.forEach((outcomes, index) => {
      const expected = outcomes.at(-1) === 'ok' ? 0 : outcomes.filter((outcome) => outcome === 'server_error').length;
      expect(items[index]?.breaker.consecutiveFailures, `${chain[index]?.provider} ${outcomes.join(',')}`).toBe(expected);
    });
  };

  const events = {
    'provider.succeeded': consume,
    'provider.failed': consume,
    'provider.rejected': consume,
    'provider.keySkipped': consume,
    'time.backoffElapsed': () => undefined,
    'request.aborted': () => {
      throw new Error('aborted runs are not walked');
    },
  };
  const states = {
    calling: nextAttemptIsFor,
    backingOff: nextAttemptIsFor,
    succeeded: (snapshot: { context: FallbackModelContext }) => {
      ended();
      expect(result.status, result.text).toBe(200);
      expect(result.body.meta).toMatchObject({ provider: chain[snapshot.context.index]?.provider, fallback: snapshot.context.index > 0 });
    },
    failed: () => {
      ended();
      expect(result.status, result.text).toBeGreaterThanOrEqual(400);
      expect(typeof result.body.error.code).toBe('string');
    },
    aborted: () => {
      throw new Error('aborted runs are not walked');
    },
  };
  expectComplete([path as never], events, states);
  await path.test({ events: events as never, states: states as never });
}

for (const mode of serviceModes) {
  describe(`the running service follows the fallback model, ${mode}`, () => {
    beforeAll(async () => {
      for (const policy of ['retry-then-fallback', 'fallback-first'] as const) {
        harnesses.set(
          policy,
          await startModelService({
            FALLBACK_MODE: policy,
            RETRY_MAX: String(modelRetryMax),
            RETRY_BACKOFF_MS: '10',
            // No breaker opens by itself here: a refusal is an operator's forced open (the breaker's own
            // walk is breaker.model.test.ts).
            BREAKER_FAILURE_THRESHOLD: '100',
            KEY_QUARANTINE_MS: '60000',
            // No answer of a loaded machine times out (a timeout would be a step the path does not have).
            PROVIDER_TIMEOUT_MS: '5000',
            ...modeEnv(mode, 'fallback-model'),
          }),
        );
      }
    });
    afterAll(async () => {
      for (const harness of harnesses.values()) await harness.close();
      harnesses.clear();
    });

    describe.concurrent('each policy', () => {
      for (const policy of ['retry-then-fallback', 'fallback-first'] as const) {
        it(`${policy} (${chains[policy].join(' → ')}): every playable path`, async () => {
          for (const path of plans[policy].walked) await walk(policy, path);
        }, 120_000);
      }
    });
  });
}
