/**
 * Failures in the middle of a streamed answer (docs/api.md "Streaming"), over every path of the machines
 * that decide what follows them. The rules, written out here (the oracle never asks the code under test):
 *
 * 1. Continue or reset (the fallback run). After a call fails having written text, the next call (a retry or
 *    a fallback, by the unchanged retry-and-fallback rules) continues the answer from its cut — the answer
 *    so far cut back to its last complete element, here the text up to its last `|` — when there is one:
 *    its request is the continuation request of that prefix, its attempt says `continuation: true`, and the
 *    run announces `answer.continued`. When there is no cut, the run announces one `answer.reset` and the
 *    next call asks for a whole answer. A call that wrote nothing leaves the answer as it was (a
 *    continued prefix is still continued, across skips too). A continued answer is judged merged.
 * 2. Never counted (the provider). A mid-stream 401 (`auth`), 429 (`rate_limited`) or quota error
 *    (`quota_exhausted`) never sends the breaker a FAILURE; a mid-stream failure of a provider-side class
 *    (docs/errors.md column B) sends exactly one. The text written so far travels with `provider.failed`.
 */
import { describe, expect, it } from 'vitest';
import { createActor, getNextTransitions, initialTransition, setup, transition, type SnapshotFrom } from 'xstate';
import type { Attempt, FallbackPolicy } from '../../src/actors/types.js';
import type { ErrorClass } from '../../src/errors/index.js';
import {
  currentCallId,
  fallbackMachine,
  type FallbackEvent,
  type FallbackInput,
} from '../../src/machines/fallback.machine.js';
import {
  attemptMachine,
  createAttemptMachine,
  UpstreamFailure,
  type AttemptEvent,
} from '../../src/machines/attempt.machine.js';
import type { CallRequest } from '../../src/machines/call-request.js';
import type { AnswerContinuation, GenerationRequest } from '../../src/machines/types.js';
import type { ProviderAnswer, ProviderId } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';
import { errorsMd, withRow } from './errors-md.js';
import { request } from './gateway-harness.js';

type Snapshot = SnapshotFrom<typeof fallbackMachine>;
type Actions = readonly { type: string; params?: unknown }[];

const cutMark = '|';
/** The test's own continuation: the cut is after the last `|`; the request carries the prefix as its last message. */
const continuation: AnswerContinuation = {
  pointOf: (written) => (written.includes(cutMark) ? written.slice(0, written.lastIndexOf(cutMark) + 1) : undefined),
  request: (base, prefix) => ({ ...base, messages: [...base.messages, { role: 'assistant', content: prefix }] }),
  merge: (prefix, rest) => prefix + rest,
};

const providerRef = createActor(setup({}).createMachine({}));
const chain: readonly ProviderId[] = ['claude', 'gpt'];
const answer: ProviderAnswer = { text: 'rest', model: 'm', usage: { inputTokens: 1, outputTokens: 1 }, truncated: false };
/** What each failing call may have written: nothing, text with a cut, text without one. */
const partials = [undefined, 'a|b', 'cd'] as const;
/** One class per row that matters here: retried and fallen back from, fallen back from only, never counted. */
const classes: readonly ErrorClass[] = ['connection', 'auth', 'quota_exhausted'];

function inputFor(policy: FallbackPolicy): FallbackInput {
  return {
    runId: 'run',
    links: chain.map((provider) => ({
      provider,
      model: `${provider}-model`,
      apiKey: new Secret(`test-${provider}-key-midstream`),
      keyId: `key-${provider}`,
      ref: providerRef,
    })),
    request,
    // Valid when the answer as judged is the merged text a continuation makes, or a whole answer.
    validate: (judged) => ({ ok: true, value: judged.text }),
    policy,
    retryMax: 1,
    backoffMs: [10],
    startedAt: 0,
    continuation,
  };
}

function eventsFor(snapshot: Snapshot): FallbackEvent[] {
  const types = new Set(getNextTransitions(snapshot).map((t) => t.eventType));
  const callId = currentCallId(snapshot.context);
  const providerId = snapshot.context.run.links[snapshot.context.index]?.provider ?? 'claude';
  const events: FallbackEvent[] = [];
  if (types.has('provider.succeeded'))
    events.push({ type: 'provider.succeeded', callId, providerId, answer, verdict: { ok: true, value: 'v' }, durationMs: 1, streamed: { chunks: 1, firstTokenMs: 1 }, at: 5 });
  if (types.has('provider.failed'))
    for (const errorClass of classes)
      for (const partialText of partials)
        events.push({
          type: 'provider.failed',
          callId,
          providerId,
          failure: { errorClass, message: errorClass },
          countedByBreaker: errorsMd[errorClass].B,
          durationMs: 1,
          streamed: partialText === undefined ? null : { chunks: 2, firstTokenMs: 1 },
          ...(partialText === undefined ? {} : { partialText }),
          at: 5,
        });
  if (types.has('provider.rejected')) events.push({ type: 'provider.rejected', callId, providerId, retryAt: 30_005, at: 5 });
  for (const type of types) if (type.startsWith('xstate.after')) events.push({ type } as FallbackEvent);
  return events;
}

const sentRequests = (actions: Actions) =>
  actions
    .filter((action) => action.type === 'xstate.sendTo')
    .map((action) => (action.params as { event: { type: string; request?: GenerationRequest; validate?: (a: ProviderAnswer) => { ok: boolean; value?: unknown } } }).event)
    .filter((event) => event.type === 'call.requested');
const emitted = (actions: Actions) =>
  actions
    .filter((action) => action.type === 'xstate.emit')
    .map((action) => (action.params as { event: { type: string; prefix?: string } }).event);

interface Tally {
  paths: number;
  continued: number;
  resets: number;
  carried: number;
}

/**
 * Every path, the answer so far modelled alongside: `soFar` is the prefix the next call must continue
 * (null: a whole answer), by rule 1 as written above.
 */
function walk(policy: FallbackPolicy, machine = fallbackMachine): Tally {
  const tally: Tally = { paths: 0, continued: 0, resets: 0, carried: 0 };
  const [initial, initialActions] = initialTransition(machine, inputFor(policy));
  expect(sentRequests(initialActions).map((event) => event.request)).toEqual([request]);
  type Pending = 'reset' | 'continued' | null;
  const visit = (snapshot: Snapshot, soFar: string | null, pending: Pending, calls: (string | null)[], depth: number): void => {
    expect(depth).toBeLessThan(20);
    if (snapshot.status === 'done') {
      tally.paths += 1;
      // Each call's attempt says whether it continued an answer (a skip is no call: never).
      const attempts: readonly Attempt[] = snapshot.output?.attempts ?? [];
      expect(attempts.map((attempt) => attempt.continuation === true)).toEqual(
        calls.slice(0, attempts.length).map((prefix, i) => prefix !== null && attempts[i]?.outcome !== 'skipped'),
      );
      // A continued answer is the prefix and the rest, judged as one (the verdict's value is what the run answers).
      if (snapshot.output?.status === 'succeeded') expect(snapshot.output.value).toBe('v');
      return;
    }
    for (const event of eventsFor(snapshot)) {
      const [next, actions] = transition(machine, snapshot, event);
      let expected = soFar;
      let nextPending = pending;
      if (event.type === 'provider.failed' && event.partialText !== undefined) {
        const written = (soFar ?? '') + event.partialText;
        expected = written.includes(cutMark) ? written.slice(0, written.lastIndexOf(cutMark) + 1) : null;
        nextPending = expected === null ? 'reset' : 'continued';
      }
      const requests = sentRequests(actions);
      const announced = emitted(actions);
      const resets = announced.filter((e) => e.type === 'answer.reset').length;
      const continuedAnnounced = announced.filter((e) => e.type === 'answer.continued').map((e) => e.prefix);
      const where = `${event.type} after ${String(soFar)}`;
      // What the failure decided is announced once, when the next call goes out (never when the run ends).
      expect(resets, where).toBe(requests.length > 0 && nextPending === 'reset' ? 1 : 0);
      expect(continuedAnnounced, where).toEqual(requests.length > 0 && nextPending === 'continued' ? [expected] : []);
      for (const sent of requests) {
        if (expected === null) {
          expect(sent.request?.messages).toEqual(request.messages);
        } else {
          expect(sent.request?.messages.at(-1)).toEqual({ role: 'assistant', content: expected });
          expect(sent.request?.messages.slice(0, -1)).toEqual(request.messages);
          // The continuing call's answer is judged as prefix + rest.
          expect(sent.validate?.(answer)).toEqual({ ok: true, value: `${expected}rest` });
          if (nextPending === 'continued') tally.continued += 1;
          else tally.carried += 1;
        }
        if (nextPending === 'reset') tally.resets += 1;
      }
      const callsNow = requests.length > 0 ? [...calls, expected] : calls;
      visit(next, expected, requests.length > 0 ? null : nextPending, callsNow, depth + 1);
    }
  };
  visit(initial, null, null, [null], 0);
  return tally;
}

describe('a failure mid-stream: the next call continues the answer from its cut, or resets it (rule 1)', () => {
  it.each(['retry-then-fallback', 'fallback-first'] as const)('%s, two providers, every class × what the call wrote', (policy) => {
    const tally = walk(policy);
    console.log(`mid-stream ${policy}: ${tally.paths} paths; ${tally.continued} continued, ${tally.carried} carried over, ${tally.resets} reset`);
    expect(tally.paths).toBeGreaterThan(100);
    expect(tally.continued).toBeGreaterThan(0);
    expect(tally.carried).toBeGreaterThan(0);
    expect(tally.resets).toBeGreaterThan(0);
  });

  it('goes red on a machine that never continues (every cut answer starts over)', () => {
    const mutant = fallbackMachine.provide({ guards: { hasContinuationPoint: () => false } });
    expect(() => walk('fallback-first', mutant)).toThrow();
  });

  it('goes red on a machine that forgets the answer on a call that wrote nothing', () => {
    const mutant = fallbackMachine.provide({ guards: { hasVoidOutput: ({ context }) => context.lastFailure !== null } });
    expect(() => walk('fallback-first', mutant)).toThrow();
  });
});

describe('a failure mid-stream is counted by its class alone (rule 2)', () => {
  const sink = createActor(setup({}).createMachine({}));
  const written = '{"keyConcepts":[{"id":"c1"}';
  const call: CallRequest = {
    callId: 'c1',
    replyTo: sink,
    keyId: 'key-1',
    request,
    apiKey: new Secret('test-claude-key-mid-stream'),
    validate: () => ({ ok: true, value: {} }),
    at: 960,
  };
  /** The attempt, streaming: the key and the breaker admitted it, and it wrote `written` before failing. */
  function streaming(machine: typeof attemptMachine) {
    const [start] = initialTransition(machine, {
      providerId: 'claude',
      owner: sink,
      call,
      timings: { deadlineMs: 60_000, firstTokenTimeoutMs: 30_000, streamIdleTimeoutMs: 20_000 },
      keyBook: sink,
      breaker: sink,
      fleetLink: sink,
    });
    const steps: AttemptEvent[] = [
      { type: 'key.admitted', call },
      { type: 'breaker.admitted', call },
      { type: 'upstream.delta', text: written, pieces: 5, at: 970 },
    ];
    return steps.reduce((snapshot, event) => transition(machine, snapshot, event)[0], start);
  }
  const midStream = (errorClass: ErrorClass) =>
    ({ type: 'xstate.error.actor.upstream', error: new UpstreamFailure({ errorClass, message: `mid-stream ${errorClass}` }, 1_000) }) as unknown as AttemptEvent;
  const sent = (actions: Actions) =>
    actions
      .filter((action) => action.type === 'xstate.sendTo')
      .map((action) => (action.params as { event: { type: string; event?: { type: string }; partialText?: string } }).event);
  /** What a mid-stream failure of `errorClass` sends, then what the caller hears once the breaker answers. */
  function failMidStream(machine: typeof attemptMachine, errorClass: ErrorClass) {
    const [reporting, actions] = transition(machine, streaming(machine), midStream(errorClass));
    const [, replied] = transition(machine, reporting, { type: 'breaker.admitting' });
    return { told: sent(actions), replies: sent(replied) };
  }

  it.each(['auth', 'rate_limited', 'quota_exhausted'] as const)('a mid-stream %s never sends the breaker a FAILURE', (errorClass) => {
    const { told, replies } = failMidStream(attemptMachine, errorClass);
    expect(told.filter((event) => event.type === 'call.failed')).toEqual([]);
    expect(told.filter((event) => event.type === 'fleet.report' && event.event?.type === 'call.failed')).toEqual([]);
    expect(replies.find((event) => event.type === 'provider.failed')?.partialText).toBe(written);
  });

  it('goes red on the kept mutant whose table row counts quota_exhausted', () => {
    const mutant = createAttemptMachine(withRow('quota_exhausted', { breaker: 'counts' }));
    expect(failMidStream(mutant, 'quota_exhausted').told.filter((event) => event.type === 'call.failed')).toHaveLength(1);
  });

  it('every class mid-stream: a FAILURE exactly when docs/errors.md column B counts it', () => {
    const counted = Object.entries(errorsMd)
      .filter(([errorClass]) => errorClass !== 'circuit_open')
      .map(([errorClass, row]) => {
        const { told } = failMidStream(attemptMachine, errorClass as ErrorClass);
        return [errorClass, told.filter((event) => event.type === 'call.failed').length, row.B ? 1 : 0];
      });
    for (const [errorClass, failures, expected] of counted) expect(failures, String(errorClass)).toBe(expected);
    expect(counted.some(([, , expected]) => expected === 1)).toBe(true);
  });
});
