/**
 * The retry-and-fallback machine's every path, walked through the pure transition function and judged
 * by docs/errors.md's rows as written in errors-md.ts (never the production table): what
 * test/core/fallback.graph.test.ts (the narrow chains, the mutation group's selection) and
 * test/core/fallback.graph-wide.test.ts (the 2- and 3-provider retry-then-fallback chains) walk.
 */
import { expect } from 'vitest';
import {
  createActor,
  getNextTransitions,
  initialTransition,
  setup,
  transition,
  type SnapshotFrom,
} from 'xstate';
import type { Attempt, FallbackPolicy } from '../../src/actors/types.js';
import type { ErrorClass } from '../../src/errors/index.js';
import {
  currentCallId,
  fallbackMachine,
  type FallbackEvent,
  type FallbackInput,
} from '../../src/machines/fallback.machine.js';
import { documentClasses, errorsMd, providerSideClasses } from './errors-md.js';
import type { ProviderAnswer, ProviderId } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { sentEventTypes } from './graph-events.js';
import { request } from './gateway-harness.js';

export type FallbackLogic = typeof fallbackMachine;
type FallbackSnapshot = SnapshotFrom<FallbackLogic>;

const providerRef = createActor(setup({}).createMachine({}));
const answer: ProviderAnswer = {
  text: '{}',
  model: 'm',
  usage: { inputTokens: 1, outputTokens: 1 },
  truncated: false,
};
const retryMax = 2;
const chainIds: readonly ProviderId[] = ['claude', 'gpt', 'timelygpt'];

/** Classes an upstream call can end in (circuit_open is a skip, invalid_output an answer). */
export const allUpstreamClasses = documentClasses.filter(
  (c) => c !== 'circuit_open' && c !== 'invalid_output',
);
/** One class per row of the policy table, for the 3-provider runs (the machine reads only the row). */
export const representativeClasses: readonly ErrorClass[] = ['auth', 'bad_request', 'server_error'];
/** Two providers: one class per row, plus the ones the failure table answers apart. */
export const twoProviderClasses: readonly ErrorClass[] = [
  'auth',
  'rate_limited',
  'bad_request',
  'server_error',
  'timeout',
  'aborted',
];

function inputFor(providers: number, policy: FallbackPolicy): FallbackInput {
  return {
    runId: 'run',
    links: chainIds.slice(0, providers).map((provider) => ({
      provider,
      model: `${provider}-model`,
      apiKey: new Secret(`test-${provider}-key-graph`),
      keyId: `key-${provider}`,
      ref: providerRef,
    })),
    request,
    validate: () => ({ ok: true, value: {} }),
    policy,
    retryMax,
    backoffMs: [1000, 2000],
    startedAt: 0,
  };
}

function eventsFor(snapshot: FallbackSnapshot, classes: readonly ErrorClass[]): FallbackEvent[] {
  const types = new Set(getNextTransitions(snapshot).map((t) => t.eventType));
  const callId = currentCallId(snapshot.context);
  const providerId = snapshot.context.run.links[snapshot.context.index]?.provider ?? 'claude';
  const events: FallbackEvent[] = [];
  if (types.has('provider.succeeded')) {
    events.push(
      {
        type: 'provider.succeeded',
        callId,
        providerId,
        answer,
        verdict: { ok: true, value: {} },
        durationMs: 1,
        streamed: null,
        at: 5,
      },
      {
        type: 'provider.succeeded',
        callId,
        providerId,
        answer,
        verdict: { ok: false, errors: ['bad'] },
        durationMs: 1,
        streamed: null,
        at: 5,
      },
    );
  }
  if (types.has('provider.failed')) {
    for (const errorClass of classes) {
      events.push({
        type: 'provider.failed',
        callId,
        providerId,
        failure: {
          errorClass,
          message: errorClass,
          ...(errorClass === 'rate_limited' ? { retryAfterMs: 7000 } : {}),
        },
        countedByBreaker: errorsMd[errorClass].B,
        durationMs: 1,
        streamed: null,
        at: 5,
      });
    }
  }
  if (types.has('provider.rejected'))
    events.push({ type: 'provider.rejected', callId, providerId, retryAt: 30_005, at: 5 });
  if (types.has('request.aborted')) events.push({ type: 'request.aborted', at: 5 });
  for (const type of types) if (type.startsWith('xstate.after')) events.push({ type } as FallbackEvent);
  return events;
}

/** docs/api.md's "When every provider fails" table, read from its rows as written in errors-md.ts. */
function expectedFailure(attempts: readonly Attempt[]): { status: number; code: string } {
  const classes = attempts.map((a) => a.errorClass ?? 'circuit_open');
  const first = classes[0] ?? 'circuit_open';
  const row = (c: ErrorClass) => ({ status: errorsMd[c].status, code: errorsMd[c].code });
  if (classes.every((c) => c === first)) return row(first);
  if (classes.some((c) => providerSideClasses.includes(c)))
    return { status: 503, code: 'PROVIDERS_UNAVAILABLE' };
  return row(first);
}

export interface Walk {
  paths: number;
  steps: number;
}

/**
 * Every path of the machine, enumerated through the pure transition function (the graph is a DAG:
 * each step moves the provider index, its call count or its retries forward, so it terminates).
 * The checks run on every complete path.
 */
export function walkAllPaths(
  providers: number,
  policy: FallbackPolicy,
  classes: readonly ErrorClass[],
  machine: FallbackLogic = fallbackMachine,
): Walk {
  const walk: Walk = { paths: 0, steps: 0 };
  const [initial, initialActions] = initialTransition(machine, inputFor(providers, policy));
  const visit = (snapshot: FallbackSnapshot, calls: number, depth: number, cancelled: number): void => {
    expect(depth).toBeLessThan(40);
    if (snapshot.status === 'done') {
      walk.paths += 1;
      checkPath(snapshot, calls, cancelled, providers, policy);
      return;
    }
    const events = eventsFor(snapshot, classes);
    // Always ends final: no reachable state waits for nothing.
    expect(events.length).toBeGreaterThan(0);
    for (const event of events) {
      const [next, actions] = transition(machine, snapshot, event);
      walk.steps += 1;
      const sent = sentEventTypes(actions).filter((type) => type === 'call.requested').length;
      // An abort while a call is in flight cancels it: that call gets no attempt.
      const cancel = event.type === 'request.aborted' && snapshot.matches('calling') ? 1 : 0;
      if (cancel === 1) expect(sentEventTypes(actions)).toContain('call.cancelled');
      visit(next, calls + sent, depth + 1, cancelled + cancel);
    }
  };
  visit(initial, sentEventTypes(initialActions).filter((type) => type === 'call.requested').length, 0, 0);
  return walk;
}

function checkPath(
  final: FallbackSnapshot,
  calls: number,
  cancelled: number,
  providers: number,
  policy: FallbackPolicy,
): void {
  const output = final.output;
  expect(output).toBeDefined();
  if (output === undefined) return;
  // The output's attempts (a run that succeeds records its last attempt there, not in its context).
  const { attempts } = output;
  // Attempts account for every call: one attempt per call request, but the one cancelled by an abort.
  expect(attempts.length + cancelled).toBe(calls);

  const byProvider = new Map<ProviderId, Attempt[]>();
  attempts.forEach((attempt, i) => {
    const list = byProvider.get(attempt.provider) ?? [];
    list.push(attempt);
    byProvider.set(attempt.provider, list);
    // The chain is tried in order and never goes back.
    const previous = attempts[i - 1];
    if (previous && previous.provider !== attempt.provider) {
      expect(chainIds.indexOf(attempt.provider)).toBeGreaterThan(chainIds.indexOf(previous.provider));
    }
  });
  for (const [provider, list] of byProvider) {
    const position = chainIds.indexOf(provider);
    list.forEach((attempt, i) => {
      expect(attempt.retry).toBe(list.slice(0, i).filter((a) => a.outcome !== 'skipped').length);
      const previous = list[i - 1];
      if (previous === undefined) return;
      // A provider whose breaker refused is never called again in this run.
      expect(previous.outcome).not.toBe('skipped');
      // Never retries a class docs/errors.md's column R forbids.
      expect(errorsMd[previous.errorClass ?? 'circuit_open'].R).not.toBe('no');
      // fallback-first never retries while another provider remains.
      if (policy === 'fallback-first') expect(position).toBe(providers - 1);
    });
    const backoffRetries = list.filter(
      (_, i) => i > 0 && list[i - 1]?.errorClass !== 'invalid_output',
    ).length;
    expect(backoffRetries).toBeLessThanOrEqual(retryMax);
    expect(list.filter((a) => a.errorClass === 'invalid_output').length).toBeLessThanOrEqual(2);
  }

  // Falls back only after a class whose column F says so; a run that fails with providers left
  // stopped on a class whose column F says no.
  attempts.forEach((attempt, i) => {
    const next = attempts[i + 1];
    if (next !== undefined && next.provider !== attempt.provider) {
      expect(errorsMd[attempt.errorClass ?? 'circuit_open'].F).toBe(true);
    }
  });
  const last = attempts.at(-1);
  if (output.status === 'failed' && last !== undefined && chainIds.indexOf(last.provider) < providers - 1) {
    expect(errorsMd[last.errorClass ?? 'circuit_open'].F).toBe(false);
  }

  if (output.status === 'succeeded') {
    expect(attempts.at(-1)?.outcome).toBe('succeeded');
    expect(output.fallback).toBe(output.provider !== 'claude');
  } else if (output.status === 'failed') {
    const expected = expectedFailure(attempts);
    expect({ status: output.httpStatus, code: output.code }).toEqual(expected);
    if (expected.status === 429) expect(output.retryAfterSeconds).toBe(7);
    if (attempts.every((a) => a.outcome === 'skipped')) expect(output.retryAfterSeconds).toBeGreaterThan(0);
  }
}

/**
 * One case of the walk: every complete path is checked, and the number of paths is pinned (a model change
 * that empties or shrinks the traversal fails instead of passing silently).
 */
export function walkCase(
  providers: number,
  policy: FallbackPolicy,
  classes: readonly ErrorClass[],
  expectedPaths: number,
): void {
  const start = performance.now();
  const { paths, steps } = walkAllPaths(providers, policy, classes);
  const ms = performance.now() - start;
  console.log(
    `fallback ${providers} provider(s) ${policy}: ${paths} paths, ${steps} steps in ${ms.toFixed(0)} ms`,
  );
  expect(paths).toBe(expectedPaths);
}
