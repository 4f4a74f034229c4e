import { describe, expect, it } from 'vitest';
import {
  createActor,
  getNextTransitions,
  initialTransition,
  setup,
  transition,
  type SnapshotFrom,
} from 'xstate';
import type { Attempt, FallbackPolicy } from '../../src/actors/types.js';
import { errorClasses, errorPolicy, isCountedErrorClass, type ErrorClass } from '../../src/errors/index.js';
import {
  fallbackMachine,
  type FallbackEvent,
  type FallbackInput,
} from '../../src/machines/fallback.machine.js';
import type { ProviderAnswer, ProviderId } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { sentEventTypes } from './graph-events.js';
import { request } from './gateway-harness.js';

type FallbackSnapshot = SnapshotFrom<typeof fallbackMachine>;

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
const allUpstreamClasses = errorClasses.filter((c) => c !== 'circuit_open' && c !== 'invalid_output');
/** One class per row of the policy table, for the 3-provider runs (the machine reads only the row). */
const representativeClasses: readonly ErrorClass[] = ['auth', 'bad_request', 'server_error'];
/** Two providers: one class per row, plus the ones the failure table answers apart. */
const twoProviderClasses: readonly ErrorClass[] = [
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
      ref: providerRef,
    })),
    request,
    validate: () => ({ ok: true, value: {} }),
    policy,
    retryMax,
    backoffMs: [1000, 2000],
  };
}

function eventsFor(snapshot: FallbackSnapshot, classes: readonly ErrorClass[]): FallbackEvent[] {
  const types = new Set(getNextTransitions(snapshot).map((t) => t.eventType));
  const { callId } = snapshot.context;
  const providerId = snapshot.context.links[snapshot.context.index]?.provider ?? 'claude';
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
      },
      {
        type: 'provider.succeeded',
        callId,
        providerId,
        answer,
        verdict: { ok: false, errors: ['bad'] },
        durationMs: 1,
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
        countedByBreaker: isCountedErrorClass(errorClass),
        durationMs: 1,
      });
    }
  }
  if (types.has('provider.rejected'))
    events.push({ type: 'provider.rejected', callId, providerId, retryAt: Date.now() + 30_000 });
  if (types.has('request.aborted')) events.push({ type: 'request.aborted' });
  for (const type of types) if (type.startsWith('xstate.after')) events.push({ type } as FallbackEvent);
  return events;
}

/** API.md's "When every provider fails" table, written again from its text. */
function expectedFailure(attempts: readonly Attempt[]): { status: number; code: string } {
  const classes = attempts.map((a) => a.errorClass ?? 'circuit_open');
  const row: Partial<Record<ErrorClass, [number, string]>> = {
    auth: [401, 'PROVIDER_AUTH_FAILED'],
    permission: [403, 'PROVIDER_PERMISSION_DENIED'],
    quota_exhausted: [402, 'PROVIDER_QUOTA_EXHAUSTED'],
    rate_limited: [429, 'PROVIDER_RATE_LIMITED'],
    context_too_long: [413, 'DOCUMENT_TOO_LONG'],
    invalid_output: [502, 'INVALID_PROVIDER_OUTPUT'],
    circuit_open: [503, 'PROVIDERS_UNAVAILABLE'],
    bad_request: [400, 'PROVIDER_BAD_REQUEST'],
    not_found: [404, 'PROVIDER_MODEL_NOT_FOUND'],
    aborted: [499, 'REQUEST_ABORTED'],
  };
  const providerSide = (c: ErrorClass) => c === 'circuit_open' || isCountedErrorClass(c);
  const first = classes[0] ?? 'circuit_open';
  if (classes.every((c) => c === first) && row[first]) {
    const [status, code] = row[first];
    return { status, code };
  }
  if (classes.some(providerSide)) return { status: 503, code: 'PROVIDERS_UNAVAILABLE' };
  const [status, code] = row[first] ?? [503, 'PROVIDERS_UNAVAILABLE'];
  return { status, code };
}

interface Walk {
  paths: number;
  steps: number;
}

/**
 * Every path of the machine, enumerated through the pure transition function (the graph is a DAG:
 * each step moves the provider index, its call count or its retries forward, so it terminates).
 * The checks run on every complete path.
 */
function walkAllPaths(providers: number, policy: FallbackPolicy, classes: readonly ErrorClass[]): Walk {
  const walk: Walk = { paths: 0, steps: 0 };
  const [initial, initialActions] = initialTransition(fallbackMachine, inputFor(providers, policy));
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
      const [next, actions] = transition(fallbackMachine, snapshot, event);
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
  const { attempts } = final.context;
  const output = final.output;
  expect(output).toBeDefined();
  if (output === undefined) return;
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
      // Never retries a class the table forbids.
      expect(errorPolicy[previous.errorClass ?? 'circuit_open'].retry).not.toBe('no');
      // fallback-first never retries while another provider remains.
      if (policy === 'fallback-first') expect(position).toBe(providers - 1);
    });
    const backoffRetries = list.filter(
      (_, i) => i > 0 && list[i - 1]?.errorClass !== 'invalid_output',
    ).length;
    expect(backoffRetries).toBeLessThanOrEqual(retryMax);
    expect(list.filter((a) => a.errorClass === 'invalid_output').length).toBeLessThanOrEqual(2);
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

describe('retry-and-fallback machine, over every path', () => {
  // The last column pins the number of complete paths explored: a model change that empties or
  // shrinks the traversal fails here instead of passing silently.
  const cases: [number, FallbackPolicy, string, readonly ErrorClass[], number][] = [
    [1, 'retry-then-fallback', 'every class', allUpstreamClasses, 1227],
    [1, 'fallback-first', 'every class', allUpstreamClasses, 1227],
    [2, 'retry-then-fallback', 'one or two classes per policy row', twoProviderClasses, 28305],
    [2, 'fallback-first', 'one or two classes per policy row', twoProviderClasses, 1402],
    [3, 'retry-then-fallback', 'one class per policy row', representativeClasses, 47968],
    [3, 'fallback-first', 'one class per policy row', representativeClasses, 975],
  ];

  it.each(cases)(
    '%i provider(s), %s, %s: retries only what the table allows, ends final, accounts for every call',
    { timeout: 120_000 },
    (providers, policy, _label, classes, expectedPaths) => {
      const start = performance.now();
      const { paths, steps } = walkAllPaths(providers, policy, classes);
      const ms = performance.now() - start;
      console.log(
        `fallback ${providers} provider(s) ${policy}: ${paths} paths, ${steps} steps in ${ms.toFixed(0)} ms`,
      );
      expect(paths).toBe(expectedPaths);
    },
  );
});
