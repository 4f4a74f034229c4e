import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { fromCallback, type InspectionEvent } from 'xstate';
import type { FleetLinkEvent, FleetLinkInput, FleetLinkReply } from '../../src/machines/fleet-link.js';
import type { Attempt, BreakerTransition, CallRecord, GenerateOutcome } from '../../src/actors/types.js';
import type { IgnoredErrorClass } from '../../src/errors/index.js';
import type { ProviderId } from '../../src/providers/index.js';
import {
  input,
  invalidAnswer,
  validAnswer,
  keys,
  request,
  startHarness,
  type Harness,
  type HarnessOptions,
} from './gateway-harness.js';
import { fail } from './scripted-adapter.js';

let harness: Harness | undefined;

function start(options: HarnessOptions = {}): Harness {
  harness = startHarness(options);
  return harness;
}

/** Lets microtasks (scripted answers, actor messages) run without moving the clock. */
async function settle(): Promise<void> {
  await vi.advanceTimersByTimeAsync(0);
}

function expectSucceeded<T>(
  outcome: GenerateOutcome<T>,
): Extract<GenerateOutcome<T>, { status: 'succeeded' }> {
  if (outcome.status !== 'succeeded') throw new Error(`expected success, got ${JSON.stringify(outcome)}`);
  return outcome;
}

function expectFailed<T>(outcome: GenerateOutcome<T>): Extract<GenerateOutcome<T>, { status: 'failed' }> {
  if (outcome.status !== 'failed') throw new Error(`expected failure, got ${JSON.stringify(outcome)}`);
  return outcome;
}

function summary(attempts: readonly Attempt[]): string[] {
  return attempts.map((a) => `${a.provider}:${a.outcome}:${a.errorClass ?? '-'}:${a.retry}`);
}

/** Opens a provider's breaker through real failed requests (threshold 3 = one request with 2 retries). */
async function openBreakerOf(h: Harness, provider: ProviderId): Promise<void> {
  h.adapters[provider].script(fail('server_error'), fail('server_error'), fail('server_error'));
  const pending = h.gateway.generate(input([provider]));
  await vi.advanceTimersByTimeAsync(3000);
  await pending;
  expect(h.gateway.provider(provider).breaker.state).toBe('open');
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(new Date('2025-01-01T00:00:00Z'));
});

afterEach(async () => {
  await harness?.gateway.stop();
  harness = undefined;
  vi.useRealTimers();
});

describe('gateway: success', () => {
  it('answers from the first provider with meta, usage and one attempt', async () => {
    const { gateway, adapters } = start();
    const outcome = expectSucceeded(await gateway.generate(input(['claude', 'gpt', 'timelygpt'])));
    expect(outcome).toMatchObject({
      value: { ok: true },
      provider: 'claude',
      model: 'claude-model',
      fallback: false,
      usage: { inputTokens: 10, outputTokens: 5 },
    });
    expect(outcome.attempts).toEqual([
      {
        provider: 'claude',
        model: 'claude-model',
        outcome: 'succeeded',
        countedByBreaker: false,
        retry: 0,
        durationMs: 0,
        task: 'notes',
      },
    ]);
    expect(adapters.claude.requests).toHaveLength(1);
    expect(adapters.gpt.requests).toHaveLength(0);
    expect(gateway.provider('claude').stats).toMatchObject({ calls: 1, successes: 1, failures: 0 });
  });
});

describe('gateway: fallback and retry', () => {
  it('falls back to the second provider after a non-retryable class (auth)', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script(fail('auth', { httpStatus: 401 }));
    const outcome = expectSucceeded(await gateway.generate(input(['claude', 'gpt'])));
    expect(outcome.provider).toBe('gpt');
    expect(outcome.fallback).toBe(true);
    expect(summary(outcome.attempts)).toEqual(['claude:failed:auth:0', 'gpt:succeeded:-:0']);
    expect(outcome.attempts[0]).toMatchObject({ httpStatus: 401, countedByBreaker: false });
    expect(adapters.claude.requests).toHaveLength(1);
  });

  it('retries after 1 s then 2 s of backoff, never before the delay', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script(fail('server_error'), fail('server_error'));
    const pending = gateway.generate(input(['claude', 'gpt']));
    await settle();
    expect(adapters.claude.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(999);
    expect(adapters.claude.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(adapters.claude.requests).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1999);
    expect(adapters.claude.requests).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(adapters.claude.requests).toHaveLength(3);
    const outcome = expectSucceeded(await pending);
    expect(summary(outcome.attempts)).toEqual([
      'claude:failed:server_error:0',
      'claude:failed:server_error:1',
      'claude:succeeded:-:2',
    ]);
    expect(adapters.gpt.requests).toHaveLength(0);
  });

  it('retries a provider at most retryMax times, then falls back', async () => {
    const { gateway, adapters } = start({ breaker: { threshold: 10, recoveryMs: 10_000 } });
    adapters.claude.script(fail('overloaded'), fail('overloaded'), fail('overloaded'), fail('overloaded'));
    const pending = gateway.generate(input(['claude', 'gpt']));
    await vi.advanceTimersByTimeAsync(60_000);
    const outcome = expectSucceeded(await pending);
    expect(adapters.claude.requests).toHaveLength(3);
    expect(summary(outcome.attempts)).toEqual([
      'claude:failed:overloaded:0',
      'claude:failed:overloaded:1',
      'claude:failed:overloaded:2',
      'gpt:succeeded:-:0',
    ]);
    expect(gateway.provider('claude').breaker.consecutiveFailures).toBe(3);
  });

  it('falls back at once on a server_error under fallback-first, and retries on the last provider', async () => {
    const { gateway, adapters } = start({ policy: 'fallback-first' });
    adapters.claude.script(fail('server_error'));
    adapters.gpt.script(fail('server_error'));
    const pending = gateway.generate(input(['claude', 'gpt']));
    await settle();
    expect(adapters.claude.requests).toHaveLength(1);
    expect(adapters.gpt.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(999);
    expect(adapters.gpt.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    const outcome = expectSucceeded(await pending);
    expect(summary(outcome.attempts)).toEqual([
      'claude:failed:server_error:0',
      'gpt:failed:server_error:0',
      'gpt:succeeded:-:1',
    ]);
    expect(adapters.claude.requests).toHaveLength(1);
  });

  it('takes a per-request policy over the configured one', async () => {
    const { gateway, adapters } = start({ policy: 'retry-then-fallback' });
    adapters.claude.script(fail('timeout'));
    const outcome = expectSucceeded(
      await gateway.generate(input(['claude', 'gpt'], { policy: 'fallback-first' })),
    );
    expect(outcome.provider).toBe('gpt');
  });

  it('does not fall back on bad_request', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script(fail('bad_request', { httpStatus: 400 }));
    const outcome = expectFailed(await gateway.generate(input(['claude', 'gpt'])));
    expect(outcome).toMatchObject({ httpStatus: 400, code: 'PROVIDER_BAD_REQUEST' });
    expect(adapters.gpt.requests).toHaveLength(0);
  });
});

describe('gateway: invalid output', () => {
  it('re-asks once with the validation errors as the last user message, then falls back', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script({ kind: 'answer', text: invalidAnswer }, { kind: 'answer', text: invalidAnswer });
    const outcome = expectSucceeded(await gateway.generate(input(['claude', 'gpt'])));
    expect(adapters.claude.requests).toHaveLength(2);
    const reask = adapters.claude.requests[1];
    const last = reask?.messages[reask.messages.length - 1];
    expect(last?.role).toBe('user');
    expect(last?.content).toContain('ok: expected true');
    expect(reask?.messages.slice(0, request.messages.length)).toEqual(request.messages);
    expect(reask?.messages[reask.messages.length - 2]).toEqual({ role: 'assistant', content: invalidAnswer });
    expect(summary(outcome.attempts)).toEqual([
      'claude:failed:invalid_output:0',
      'claude:failed:invalid_output:1',
      'gpt:succeeded:-:0',
    ]);
    expect(adapters.gpt.requests[0]).toEqual(request);
  });

  it('answers 502 INVALID_PROVIDER_OUTPUT when every attempt is invalid', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script({ kind: 'answer', text: invalidAnswer }, { kind: 'answer', text: invalidAnswer });
    const outcome = expectFailed(await gateway.generate(input(['claude'])));
    expect(outcome).toMatchObject({ httpStatus: 502, code: 'INVALID_PROVIDER_OUTPUT' });
    expect(outcome.attempts).toHaveLength(2);
  });

  it('treats a truncated answer as invalid_output', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script({ kind: 'answer', truncated: true }, { kind: 'answer', truncated: true });
    const outcome = expectSucceeded(await gateway.generate(input(['claude', 'gpt'])));
    expect(summary(outcome.attempts).slice(0, 2)).toEqual([
      'claude:failed:invalid_output:0',
      'claude:failed:invalid_output:1',
    ]);
    expect(adapters.claude.requests[1]?.messages.at(-1)?.content).toContain('cut off');
  });
});

describe('gateway: breaker', () => {
  it('skips a provider whose breaker is open, without calling it', async () => {
    const h = start();
    await openBreakerOf(h, 'claude');
    const callsBefore = h.adapters.claude.requests.length;
    const outcome = expectSucceeded(await h.gateway.generate(input(['claude', 'gpt'])));
    expect(h.adapters.claude.requests).toHaveLength(callsBefore);
    expect(outcome.attempts[0]).toMatchObject({
      provider: 'claude',
      outcome: 'skipped',
      reason: 'circuit_open',
      errorClass: 'circuit_open',
      countedByBreaker: false,
      durationMs: 0,
    });
    expect(outcome.provider).toBe('gpt');
    expect(h.gateway.provider('claude').stats.rejected).toBe(1);
  });

  it('sends exactly one probe upstream after recoveryMs, however many requests arrive', async () => {
    const h = start();
    await openBreakerOf(h, 'claude');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(h.gateway.provider('claude').breaker.state).toBe('halfOpen');
    const callsBefore = h.adapters.claude.requests.length;
    h.adapters.claude.script({ kind: 'answer', delayMs: 500 });
    const runs = [1, 2, 3, 4].map(() => h.gateway.generate(input(['claude', 'gpt'])));
    await settle();
    expect(h.adapters.claude.requests).toHaveLength(callsBefore + 1);
    await vi.advanceTimersByTimeAsync(500);
    const outcomes = (await Promise.all(runs)).map(expectSucceeded);
    expect(outcomes.map((o) => o.provider).sort()).toEqual(['claude', 'gpt', 'gpt', 'gpt']);
    expect(h.adapters.claude.requests).toHaveLength(callsBefore + 1);
    expect(h.gateway.provider('claude').breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
  });

  it.each<[IgnoredErrorClass, number | undefined]>([
    ['auth', 401],
    ['permission', 403],
    ['rate_limited', 429],
    ['quota_exhausted', 402],
  ])('never moves consecutiveFailures on %s', async (errorClass, httpStatus) => {
    const { gateway, adapters } = start({ retry: { max: 0, backoffMs: [1000] } });
    adapters.claude.script(fail('server_error'));
    await gateway.generate(input(['claude']));
    expect(gateway.provider('claude').breaker.consecutiveFailures).toBe(1);
    adapters.claude.script(
      ...[1, 2, 3, 4].map(() => fail(errorClass, httpStatus === undefined ? {} : { httpStatus })),
    );
    for (let i = 0; i < 4; i += 1) {
      const outcome = await gateway.generate(input(['claude']));
      expect(outcome.attempts[0]).toMatchObject({ errorClass, countedByBreaker: false });
    }
    expect(gateway.provider('claude').breaker).toMatchObject({ state: 'closed', consecutiveFailures: 1 });
    expect(gateway.provider('claude').stats).toMatchObject({ failures: 1, ignored: 4 });
  });

  // docs/errors.md: invalid_output never counts and proves nothing. The upstream call validates the answer and
  // reports the verdict with it; the provider actor routes on it (`isAnswerValid`), so an invalid answer
  // reaches the breaker as `call.ignored` (invalid_output), never as `call.succeeded` that would clear the
  // count. Here the one counted failure survives four invalid answers.
  it('never moves consecutiveFailures on invalid_output', async () => {
    const { gateway, adapters } = start({ retry: { max: 0, backoffMs: [1000] } });
    adapters.claude.script(fail('server_error'));
    await gateway.generate(input(['claude']));
    adapters.claude.script(...[1, 2, 3, 4].map(() => ({ kind: 'answer' as const, text: invalidAnswer })));
    await gateway.generate(input(['claude']));
    await gateway.generate(input(['claude']));
    expect(adapters.claude.requests).toHaveLength(5);
    expect(gateway.provider('claude').breaker.consecutiveFailures).toBe(1);
  });

  it('never moves consecutiveFailures on aborted', async () => {
    const { gateway, adapters } = start({ retry: { max: 0, backoffMs: [1000] } });
    adapters.claude.script(fail('server_error'));
    await gateway.generate(input(['claude']));
    adapters.claude.script(fail('aborted'));
    const outcome = await gateway.generate(input(['claude', 'gpt']));
    expect(outcome.attempts[0]).toMatchObject({ errorClass: 'aborted', countedByBreaker: false });
    expect(adapters.gpt.requests).toHaveLength(0);
    expect(gateway.provider('claude').breaker.consecutiveFailures).toBe(1);
  });

  it('stays halfOpen when the probe answers invalid output (inconclusive)', async () => {
    const h = start();
    await openBreakerOf(h, 'claude');
    await vi.advanceTimersByTimeAsync(10_000);
    h.adapters.claude.script(
      { kind: 'answer', text: invalidAnswer },
      { kind: 'answer', text: invalidAnswer },
    );
    const outcome = await h.gateway.generate(input(['claude', 'gpt']));
    expect(outcome.attempts[0]).toMatchObject({ errorClass: 'invalid_output', countedByBreaker: false });
    expect(h.gateway.provider('claude').breaker).toMatchObject({ state: 'halfOpen', consecutiveFailures: 3 });
  });

  it('counts our own deadline as a timeout', async () => {
    const { gateway, adapters } = start({ policy: 'fallback-first' });
    adapters.claude.script({ kind: 'hang' });
    const pending = gateway.generate(input(['claude', 'gpt']));
    await vi.advanceTimersByTimeAsync(4999);
    expect(adapters.gpt.requests).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    const outcome = expectSucceeded(await pending);
    expect(outcome.attempts[0]).toMatchObject({
      provider: 'claude',
      errorClass: 'timeout',
      countedByBreaker: true,
      durationMs: 5000,
    });
    expect(adapters.claude.aborted).toBe(1);
    expect(gateway.provider('claude').breaker.consecutiveFailures).toBe(1);
  });

  it('does not wait out a backoff before a retry into the breaker the failure just opened', async () => {
    const { gateway, adapters } = start({ breaker: { threshold: 2, recoveryMs: 10_000 } });
    adapters.claude.script(fail('server_error'), fail('server_error'));
    let done = false;
    const pending = gateway.generate(input(['claude'])).finally(() => {
      done = true;
    });
    await settle();
    await vi.advanceTimersByTimeAsync(1000);
    expect(adapters.claude.requests).toHaveLength(2);
    expect(gateway.provider('claude').breaker.state).toBe('open');
    // No 2 s backoff: the refusal of the retry is recorded at once.
    await settle();
    expect(done).toBe(true);
    const outcome = expectFailed(await pending);
    expect(summary(outcome.attempts)).toEqual([
      'claude:failed:server_error:0',
      'claude:failed:server_error:1',
      'claude:skipped:circuit_open:2',
    ]);
    expect(outcome.httpStatus).toBe(503);
    expect(outcome.retryAfterSeconds).toBe(10);
    expect(adapters.claude.requests).toHaveLength(2);
  });

  it('answers 503 with Retry-After while the only provider is half-open with its probe in flight', async () => {
    const h = start();
    await openBreakerOf(h, 'claude');
    await vi.advanceTimersByTimeAsync(10_000);
    h.adapters.claude.script({ kind: 'hang' });
    const probe = h.gateway.generate(input(['claude']));
    await settle();
    expect(h.gateway.provider('claude').breaker.state).toBe('halfOpen');
    const outcome = expectFailed(await h.gateway.generate(input(['claude'])));
    expect(summary(outcome.attempts)).toEqual(['claude:skipped:circuit_open:0']);
    expect(outcome.httpStatus).toBe(503);
    expect(outcome.retryAfterSeconds).toBe(1);
    await vi.advanceTimersByTimeAsync(5000);
    await probe;
  });

  it('re-opens when a probe times out, without retrying into its own open breaker', async () => {
    const h = start({ policy: 'fallback-first' });
    await openBreakerOf(h, 'claude');
    await vi.advanceTimersByTimeAsync(10_000);
    h.adapters.claude.script({ kind: 'hang' });
    const pending = h.gateway.generate(input(['claude', 'gpt']));
    await vi.advanceTimersByTimeAsync(5000);
    const outcome = expectSucceeded(await pending);
    expect(summary(outcome.attempts)).toEqual(['claude:failed:timeout:0', 'gpt:succeeded:-:0']);
    expect(h.gateway.provider('claude').breaker.state).toBe('open');
  });
});

describe('gateway: caller abort', () => {
  it('ends aborted, aborts the upstream call, and leaves the breaker untouched', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script({ kind: 'hang' });
    const controller = new AbortController();
    const pending = gateway.generate(input(['claude', 'gpt'], { signal: controller.signal }));
    await settle();
    expect(adapters.claude.requests).toHaveLength(1);
    controller.abort();
    const outcome = await pending;
    expect(outcome.status).toBe('aborted');
    await settle();
    expect(adapters.claude.aborted).toBe(1);
    expect(adapters.gpt.requests).toHaveLength(0);
    expect(gateway.provider('claude').breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    expect(gateway.provider('claude').stats).toMatchObject({ failures: 0, ignored: 1 });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(gateway.provider('claude').breaker.consecutiveFailures).toBe(0);
  });

  it('frees the half-open probe slot when the caller aborts the probe', async () => {
    const h = start();
    await openBreakerOf(h, 'claude');
    await vi.advanceTimersByTimeAsync(10_000);
    h.adapters.claude.script({ kind: 'hang' });
    const controller = new AbortController();
    const probe = h.gateway.generate(input(['claude'], { signal: controller.signal }));
    await settle();
    controller.abort();
    expect((await probe).status).toBe('aborted');
    expect(h.gateway.provider('claude').breaker.state).toBe('halfOpen');
    const next = expectSucceeded(await h.gateway.generate(input(['claude'])));
    expect(next.provider).toBe('claude');
    expect(h.gateway.provider('claude').breaker.state).toBe('closed');
  });

  it('stops waiting out a backoff when the caller aborts', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script(fail('server_error'));
    const controller = new AbortController();
    const pending = gateway.generate(input(['claude'], { signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(500);
    controller.abort();
    expect((await pending).status).toBe('aborted');
    await vi.advanceTimersByTimeAsync(5000);
    expect(adapters.claude.requests).toHaveLength(1);
  });

  it('answers aborted at once for an already aborted signal', async () => {
    const { gateway, adapters } = start();
    const outcome = await gateway.generate(input(['claude'], { signal: AbortSignal.abort() }));
    expect(outcome).toEqual({ status: 'aborted', attempts: [] });
    expect(adapters.claude.requests).toHaveLength(0);
  });
});

describe('gateway: when every provider fails', () => {
  it('answers 503 PROVIDERS_UNAVAILABLE with retryAfterSeconds when every provider is skipped', async () => {
    const h = start({ breaker: { threshold: 1, recoveryMs: 10_000 } });
    h.adapters.claude.script(fail('server_error'));
    h.adapters.gpt.script(fail('connection'));
    // fallback-first: claude fails, gpt fails, the retry on gpt (after 1 s) finds its breaker open.
    const first = h.gateway.generate(input(['claude', 'gpt'], { policy: 'fallback-first' }));
    await vi.advanceTimersByTimeAsync(2500);
    expect(summary((await first).attempts)).toEqual([
      'claude:failed:server_error:0',
      'gpt:failed:connection:0',
      'gpt:skipped:circuit_open:1',
    ]);
    const calls = h.adapters.claude.requests.length + h.adapters.gpt.requests.length;
    const outcome = expectFailed(await h.gateway.generate(input(['claude', 'gpt'])));
    expect(outcome).toMatchObject({ httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE', retryAfterSeconds: 8 });
    expect(summary(outcome.attempts)).toEqual([
      'claude:skipped:circuit_open:0',
      'gpt:skipped:circuit_open:0',
    ]);
    expect(h.adapters.claude.requests.length + h.adapters.gpt.requests.length).toBe(calls);
  });

  it('answers 429 with the earliest retry-after when every provider is rate limited', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script(fail('rate_limited', { httpStatus: 429, retryAfterMs: 7000 }));
    adapters.gpt.script(fail('rate_limited', { httpStatus: 429, retryAfterMs: 3500 }));
    adapters.timelygpt.script(fail('rate_limited', { httpStatus: 429 }));
    const outcome = expectFailed(await gateway.generate(input(['claude', 'gpt', 'timelygpt'])));
    expect(outcome).toMatchObject({ httpStatus: 429, code: 'PROVIDER_RATE_LIMITED', retryAfterSeconds: 4 });
    expect(outcome.attempts).toHaveLength(3);
  });

  it('answers 401 PROVIDER_AUTH_FAILED when every key is refused', async () => {
    const { gateway, adapters } = start();
    adapters.claude.script(fail('auth'));
    adapters.gpt.script(fail('auth'));
    const outcome = expectFailed(await gateway.generate(input(['claude', 'gpt'])));
    expect(outcome).toMatchObject({ httpStatus: 401, code: 'PROVIDER_AUTH_FAILED' });
    expect(outcome.retryAfterSeconds).toBeUndefined();
  });

  it('answers 400 NO_PROVIDER_KEY for an empty chain', async () => {
    const { gateway } = start();
    const outcome = expectFailed(await gateway.generate(input([])));
    expect(outcome).toMatchObject({ httpStatus: 400, code: 'NO_PROVIDER_KEY', attempts: [] });
  });
});

describe('gateway: listeners', () => {
  it('calls onAttempt with each attempt, in order', async () => {
    const { gateway, adapters } = start({ policy: 'fallback-first' });
    adapters.claude.script(fail('auth'));
    adapters.gpt.script({ kind: 'answer', text: invalidAnswer });
    const seen: Attempt[] = [];
    const outcome = await gateway.generate(
      input(['claude', 'gpt', 'timelygpt'], { onAttempt: (a) => seen.push(a) }),
    );
    expect(summary(seen)).toEqual([
      'claude:failed:auth:0',
      'gpt:failed:invalid_output:0',
      'timelygpt:succeeded:-:0',
    ]);
    expect(seen).toEqual(outcome.attempts);
  });

  it('tells breaker transitions, calls and fallbacks to their listeners', async () => {
    const h = start();
    const transitions: BreakerTransition[] = [];
    const calls: CallRecord[] = [];
    const fallbacks: string[] = [];
    h.gateway.onBreakerTransition((t) => transitions.push(t));
    h.gateway.onCall((c) => calls.push(c));
    const off = h.gateway.onFallback((from, to) => fallbacks.push(`${from}->${to}`));
    await openBreakerOf(h, 'claude');
    await h.gateway.generate(input(['claude', 'gpt']));
    await vi.advanceTimersByTimeAsync(10_000);
    await h.gateway.generate(input(['claude', 'gpt']));
    off();
    h.adapters.claude.script(fail('auth'));
    await h.gateway.generate(input(['claude', 'gpt']));
    expect(transitions.map((t) => `${t.provider}:${t.from}->${t.to}`)).toEqual([
      'claude:closed->open',
      'claude:open->halfOpen',
      'claude:halfOpen->closed',
    ]);
    expect(calls.map((c) => `${c.provider}:${c.outcome}:${c.errorClass ?? '-'}`)).toEqual([
      'claude:failed:server_error',
      'claude:failed:server_error',
      'claude:failed:server_error',
      'claude:rejected:circuit_open',
      'gpt:succeeded:-',
      'claude:succeeded:-',
      'claude:failed:auth',
      'gpt:succeeded:-',
    ]);
    expect(fallbacks).toEqual(['claude->gpt']);
  });
});

describe('gateway: operator control', () => {
  it('holds a breaker open on forceOpen until release, and clears it on reset', async () => {
    const { gateway, adapters } = start({ retry: { max: 0, backoffMs: [1000] } });
    const forced = gateway.controlBreaker('claude', 'forceOpen');
    expect(forced.breaker).toMatchObject({ state: 'open', forced: true, retryAt: null });
    await vi.advanceTimersByTimeAsync(60_000);
    const skipped = await gateway.generate(input(['claude', 'gpt']));
    expect(summary(skipped.attempts)[0]).toBe('claude:skipped:circuit_open:0');
    expect(adapters.claude.requests).toHaveLength(0);
    expect(gateway.controlBreaker('claude', 'release').breaker).toMatchObject({
      state: 'closed',
      forced: false,
    });
    adapters.claude.script(fail('server_error'));
    await gateway.generate(input(['claude']));
    expect(gateway.provider('claude').breaker.consecutiveFailures).toBe(1);
    expect(gateway.controlBreaker('claude', 'reset').breaker).toMatchObject({
      state: 'closed',
      consecutiveFailures: 0,
      openedAt: null,
    });
    expect(gateway.provider('claude').stats.opens).toBe(1);
  });
});

describe('gateway: secrets', () => {
  it('never puts an API key in an attempt, an outcome, a status or an inspection event', async () => {
    const events: InspectionEvent[] = [];
    const h = start({ inspect: (event) => events.push(event) });
    h.adapters.claude.script(fail('server_error'), fail('server_error'), fail('server_error'));
    h.adapters.gpt.script(fail('auth'));
    const pending = h.gateway.generate(input(['claude', 'gpt', 'timelygpt']));
    await vi.advanceTimersByTimeAsync(3000);
    const outcome = await pending;
    const texts = [
      JSON.stringify(outcome),
      JSON.stringify(h.gateway.providers()),
      ...events.map((event) => JSON.stringify(event)),
      ...events
        .filter((event) => event.type === '@xstate.event')
        .map((event) => inspect(event.event, { depth: 6 })),
    ];
    expect(events.length).toBeGreaterThan(10);
    const requested = events.filter((e) => e.type === '@xstate.event' && e.event.type === 'call.requested');
    expect(requested.length).toBeGreaterThan(0);
    expect(JSON.stringify(requested[0])).toMatch(/\[secret [0-9a-f]{10}\]/);
    for (const key of Object.values(keys)) {
      for (const text of texts) expect(text).not.toContain(key);
    }
  });
});

describe('gateway: a failing actor', () => {
  it('rejects the waiting request instead of leaving it hanging when a provider actor dies, then serves again', async () => {
    const { gateway, adapters } = start();
    // An answer whose usage cannot be read makes the provider actor's action throw.
    adapters.claude.generate = async () => ({
      text: validAnswer,
      model: 'claude-model',
      truncated: false,
      get usage(): never {
        throw new Error('usage exploded');
      },
    });
    const errors = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    await expect(gateway.generate(input(['claude', 'gpt']))).rejects.toThrow(/actor system failed/);
    expect(errors).toHaveBeenCalledWith(expect.stringContaining('restarting the actor system'));
    errors.mockRestore();
    // A fresh actor system serves the next request.
    expect(expectSucceeded(await gateway.generate(input(['gpt']))).provider).toBe('gpt');
    expect(gateway.provider('claude').breaker.state).toBe('closed');
  });
});

describe('gateway: a quarantined key probed through the provider', () => {
  const keyHealth = { quarantineMs: 10_000, coolingMs: 10_000, maxKeys: 100 };

  it('admits one probe once the quarantine is over, refuses the key while it is in flight, and frees it on success', async () => {
    const h = start({ keyHealth });
    h.adapters.claude.script(fail('auth'));
    expectFailed(await h.gateway.generate(input(['claude'])));
    expect(h.gateway.provider('claude').keys).toEqual({ quarantined: 1, cooling: 0 });

    vi.setSystemTime(Date.now() + 10_000);
    // The probe is held in flight for a while: a second call with the same key meanwhile is skipped.
    h.adapters.claude.script({ kind: 'answer', text: validAnswer, delayMs: 500 });
    const probe = h.gateway.generate(input(['claude']));
    await settle();
    const during = expectFailed(await h.gateway.generate(input(['claude'])));
    expect(during.attempts.map((a) => a.reason)).toEqual(['key_quarantined']);
    await vi.advanceTimersByTimeAsync(500);
    expectSucceeded(await probe);
    expect(h.gateway.provider('claude').keys).toEqual({ quarantined: 0, cooling: 0 });
  });

  it('asks the key book for a healthy key by message, and keeps no actor for it (nothing is kept of keys that work)', async () => {
    const events: InspectionEvent[] = [];
    const h = start({ keyHealth, inspect: (event) => events.push(event) });
    expectSucceeded(await h.gateway.generate(input(['claude'])));
    const toBook = events.filter(
      (e) =>
        e.type === '@xstate.event' &&
        'id' in e.actorRef &&
        e.actorRef.id === 'keyBook' &&
        e.event.type !== 'xstate.init',
    );
    // Asked before the breaker, then told the call's start and answer: a key it does not track changes nothing.
    expect(toBook.map((e) => (e.type === '@xstate.event' ? e.event.type : ''))).toEqual([
      'key.admit',
      'key.called',
      'key.answered',
    ]);
    const idOf = (e: InspectionEvent): string => ('id' in e.actorRef ? String(e.actorRef.id) : '');
    const keyActors = () => events.filter((e) => e.type === '@xstate.actor' && /^(key|shelf)\./.test(idOf(e)));
    expect(keyActors()).toEqual([]);
    // A failure that refuses the key reaches it, and the key gets an actor of its own.
    h.adapters.claude.script(fail('auth'));
    expectFailed(await h.gateway.generate(input(['claude'])));
    expect(
      events.some(
        (e) =>
          e.type === '@xstate.event' &&
          'id' in e.actorRef &&
          e.actorRef.id === 'keyBook' &&
          e.event.type === 'key.failed',
      ),
    ).toBe(true);
    expect(keyActors().map(idOf).filter((id) => id.startsWith('key.'))).toHaveLength(1);
  });
});

describe('gateway: the fleet link', () => {
  /** A fleet link that records what it hears (what `createFleetLink` would apply to Redis). */
  function recordingLink() {
    const heard: string[] = [];
    const link = fromCallback<FleetLinkEvent, FleetLinkInput, FleetLinkReply>(({ receive }) => {
      receive((event) =>
        heard.push(event.type === 'fleet.report' ? `report:${event.event.type}` : event.type),
      );
    });
    return { link, heard };
  }

  it('tells a fleet that shares the breaker every success (one anywhere clears its count)', async () => {
    const { link, heard } = recordingLink();
    const { gateway } = start({ fleetLink: link });
    expectSucceeded(await gateway.generate(input(['claude'])));
    await settle();
    expect(heard).toEqual(['report:call.succeeded']);
  });
});

describe('gateway: a run that fails', () => {
  it('rejects its own request only: the root and the providers go on serving, the requests in flight too', async () => {
    const { gateway, adapters } = start();
    // Another request in flight meanwhile: a root that failed with the run would restart the actor
    // system and fail it ("The actor system failed").
    adapters.gpt.script({ kind: 'answer', text: validAnswer, delayMs: 200 });
    const inFlight = gateway.generate(input(['gpt']));
    await settle();
    const errors = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    // A budget whose check throws makes the run's guard throw: the run actor errors (a bug's shape).
    const broken = {
      maxUsd: 1,
      worstCaseOf: async () => 0.01,
      allows: () => {
        throw new Error('budget bug');
      },
      hold: () => undefined,
      settle: () => undefined,
      release: () => undefined,
    };
    const failed = await gateway.generate(input(['claude'], { budget: broken as never })).then(
      (outcome) => outcome.status,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    expect(failed).not.toBe('succeeded');
    await vi.advanceTimersByTimeAsync(200);
    expect(expectSucceeded(await inFlight).provider).toBe('gpt');
    expect(errors).not.toHaveBeenCalledWith(expect.stringContaining('restarting the actor system'));
    errors.mockRestore();
    const next = expectSucceeded(await gateway.generate(input(['claude'])));
    expect(next.provider).toBe('claude');
  });
});
