/**
 * The retry-and-fallback machine's rules that the path walk does not see, event by event through the
 * pure transition function: a key skipped by its health (never retried nor re-asked, its `until` as a
 * hint), a forced-open refusal (no hint), replies to a call the run no longer waits for, the run's clock
 * (time enters through events and backoff delays only), the re-ask's wording, a retry at once into a
 * refusing breaker counted toward RETRY_MAX. Expected values are written out, docs/errors.md's rows too.
 */
import { describe, expect, it } from 'vitest';
import { createActor, initialTransition, setup, transition, type SnapshotFrom } from 'xstate';
import type { ErrorClass } from '../../src/errors/index.js';
import {
  createFallbackMachine,
  currentCallId,
  fallbackMachine,
  withValidationErrors,
  type FallbackEvent,
  type FallbackInput,
} from '../../src/machines/fallback.machine.js';
import type { FallbackPolicy, ProviderId } from '../../src/machines/types.js';
import { Secret } from '../../src/security/secret.js';
import { withRow } from './errors-md.js';
import { request } from './gateway-harness.js';

type Machine = typeof fallbackMachine;
type Snapshot = SnapshotFrom<Machine>;
type Actions = readonly { type: string; params?: unknown }[];

const providerRef = createActor(setup({}).createMachine({}));
const chain: readonly ProviderId[] = ['claude', 'gpt'];

function inputFor(
  providers: number,
  more: { policy?: FallbackPolicy; retryMax?: number } = {},
): FallbackInput {
  return {
    runId: 'run',
    links: chain.slice(0, providers).map((provider) => ({
      provider,
      model: `${provider}-model`,
      apiKey: new Secret(`test-${provider}-key-rules`),
      keyId: `key-${provider}`,
      ref: providerRef,
    })),
    request,
    validate: () => ({ ok: true, value: {} }),
    policy: more.policy ?? 'retry-then-fallback',
    retryMax: more.retryMax ?? 2,
    backoffMs: [1000, 2000],
    startedAt: 0,
  };
}

/** The events the transition's `sendTo` actions send (call requests and cancels). */
function sent(actions: Actions): { type: string; callId?: string; at?: number }[] {
  return actions
    .filter((action) => action.type === 'xstate.sendTo')
    .map((action) => (action.params as { event: { type: string; callId?: string; at?: number } }).event);
}

/** A run that records what it sent: `step` plays one event and returns what the step sent. */
function run(input: FallbackInput, machine: Machine = fallbackMachine) {
  const [first, actions] = initialTransition(machine, input);
  let snapshot: Snapshot = first;
  const requests = sent(actions);
  const announced: { type: string; attempt?: { outcome: string; errorClass?: string } }[] = [];
  return {
    announced,
    get snapshot() {
      return snapshot;
    },
    requests,
    step(event: FallbackEvent) {
      const [next, actionsTaken] = transition(machine, snapshot, event);
      const stepActions: Actions = actionsTaken;
      snapshot = next;
      const out = sent(stepActions);
      requests.push(...out.filter((e) => e.type === 'call.requested'));
      announced.push(
        ...stepActions
          .filter((action) => action.type === 'xstate.emit')
          .map((action) => (action.params as { event: { type: string } }).event),
      );
      return out;
    },
    /** The backoff's delayed event (the pure transition plays no timer). */
    backoff() {
      return this.step({ type: 'xstate.after.retryBackoff.fallback.backingOff' } as unknown as FallbackEvent);
    },
    get callId() {
      return currentCallId(snapshot.context);
    },
    get provider() {
      return snapshot.context.run.links[snapshot.context.index]?.provider ?? 'claude';
    },
  };
}

type Run = ReturnType<typeof run>;

function failed(
  r: Run,
  errorClass: ErrorClass,
  at: number,
  retryAfterMs?: number,
): Extract<FallbackEvent, { type: 'provider.failed' }> {
  return {
    type: 'provider.failed',
    callId: r.callId,
    providerId: r.provider,
    failure: { errorClass, message: errorClass, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) },
    countedByBreaker: errorClass === 'server_error',
    durationMs: 10,
    streamed: null,
    at,
  };
}

function keySkipped(
  r: Run,
  errorClass: ErrorClass,
  until: number,
  at: number,
): Extract<FallbackEvent, { type: 'provider.keySkipped' }> {
  return {
    type: 'provider.keySkipped',
    callId: r.callId,
    providerId: r.provider,
    reason: errorClass === 'rate_limited' ? 'key_cooling' : 'key_quarantined',
    errorClass,
    until,
    at,
  };
}

describe('fallback: a key skipped by its health', () => {
  it('records a skip with the key reason and the refusing class, and falls back without retrying', () => {
    const r = run(inputFor(2));
    r.step(keySkipped(r, 'quota_exhausted', 600_000, 100));
    expect(r.snapshot.context.attempts).toEqual([
      {
        provider: 'claude',
        model: 'claude-model',
        retry: 0,
        task: 'notes',
        outcome: 'skipped',
        errorClass: 'quota_exhausted',
        reason: 'key_quarantined',
        countedByBreaker: false,
        durationMs: 0,
      },
    ]);
    // Column F of quota_exhausted is yes: the next provider is called at once.
    expect(r.requests.map((e) => e.type)).toEqual(['call.requested', 'call.requested']);
    expect(r.provider).toBe('gpt');
  });

  it("answers a cooling key's remaining time as Retry-After (ceil to seconds), never a negative one", () => {
    const r = run(inputFor(1));
    r.step(keySkipped(r, 'rate_limited', 4600, 100));
    expect(r.snapshot.output).toMatchObject({ status: 'failed', httpStatus: 429, retryAfterSeconds: 5 });

    const late = run(inputFor(1));
    late.step(keySkipped(late, 'rate_limited', 100, 5000));
    expect(late.snapshot.output).toMatchObject({ status: 'failed', httpStatus: 429 });
    expect(late.snapshot.output).not.toHaveProperty('retryAfterSeconds');
  });

  it('never retries a skipped key, even under a table whose row would retry the class (it would be skipped again)', () => {
    const retrying = createFallbackMachine(withRow('rate_limited', { retry: 'yes' }));
    const r = run(inputFor(1), retrying);
    r.step(keySkipped(r, 'rate_limited', 5000, 100));
    expect(r.snapshot.status).toBe('done');
    expect(r.requests).toHaveLength(1);
    // The same table retries an upstream rate limit: the row is read, the skip is what stops it.
    const upstream = run(inputFor(1), retrying);
    upstream.step(failed(upstream, 'rate_limited', 100, 5000));
    expect(upstream.snapshot.value).toBe('backingOff');
  });

  it('never re-asks a skipped key, even under a table whose row would re-ask the class', () => {
    const reasking = createFallbackMachine(withRow('quota_exhausted', { retry: 'once' }));
    const r = run(inputFor(1), reasking);
    r.step(keySkipped(r, 'quota_exhausted', 600_000, 100));
    expect(r.snapshot.status).toBe('done');
    expect(r.requests).toHaveLength(1);
  });
});

describe('fallback: refusals and replies', () => {
  it('announces every skip as it happens, a breaker refusal and a key skip alike, and the fallback between them', () => {
    const r = run(inputFor(2));
    r.step({ type: 'provider.rejected', callId: r.callId, providerId: 'claude', retryAt: 9000, at: 100 });
    r.step(keySkipped(r, 'auth', 600_000, 200));
    expect(r.announced.map((e) => [e.type, e.attempt?.outcome, e.attempt?.errorClass])).toEqual([
      ['attempt.recorded', 'skipped', 'circuit_open'],
      ['fallback.taken', undefined, undefined],
      ['attempt.recorded', 'skipped', 'auth'],
    ]);
  });

  it('gives no Retry-After for a forced-open breaker (no retryAt), 1 s at least for a half-open one', () => {
    const forced = run(inputFor(1));
    forced.step({
      type: 'provider.rejected',
      callId: forced.callId,
      providerId: 'claude',
      retryAt: null,
      at: 100,
    });
    expect(forced.snapshot.output).toMatchObject({
      status: 'failed',
      httpStatus: 503,
      code: 'PROVIDERS_UNAVAILABLE',
    });
    expect(forced.snapshot.output).not.toHaveProperty('retryAfterSeconds');

    const probing = run(inputFor(1));
    probing.step({
      type: 'provider.rejected',
      callId: probing.callId,
      providerId: 'claude',
      retryAt: 50,
      at: 100,
    });
    expect(probing.snapshot.output).toMatchObject({
      status: 'failed',
      httpStatus: 503,
      retryAfterSeconds: 1,
    });
  });

  it('ignores a reply to a call it no longer waits for (an earlier call of the run)', () => {
    const r = run(inputFor(1));
    const firstCall = r.callId;
    r.step(failed(r, 'server_error', 100));
    r.backoff();
    expect(r.callId).not.toBe(firstCall);
    for (const stale of [
      { ...failed(r, 'auth', 2000), callId: firstCall },
      {
        type: 'provider.rejected',
        callId: firstCall,
        providerId: 'claude',
        retryAt: 9000,
        at: 2000,
      } as const,
      { ...keySkipped(r, 'auth', 9000, 2000), callId: firstCall },
      {
        type: 'provider.succeeded',
        callId: firstCall,
        providerId: 'claude',
        answer: { text: '{}', model: 'm', usage: { inputTokens: 1, outputTokens: 1 }, truncated: false },
        verdict: { ok: true, value: {} },
        durationMs: 1,
        streamed: null,
        at: 2000,
      } as const,
    ] satisfies FallbackEvent[]) {
      const before = r.snapshot;
      r.step(stale);
      expect(r.snapshot.value).toBe('calling');
      expect(r.snapshot.context.attempts).toHaveLength(1);
      expect(r.snapshot.context).toBe(before.context);
    }
  });

  it('cancels the call in flight at the time the caller went away', () => {
    const r = run(inputFor(1));
    const out = r.step({ type: 'request.aborted', at: 7000 });
    expect(out).toEqual([{ type: 'call.cancelled', callId: r.callId, at: 7000 }]);
    expect(r.snapshot.output).toEqual({ status: 'aborted', attempts: [] });
  });
});

describe("fallback: the run's clock", () => {
  it('moves with the events and the backoff delays, never backwards', () => {
    const r = run(inputFor(1));
    expect(r.requests[0]?.at).toBe(0);
    r.step(failed(r, 'server_error', 5000));
    r.backoff();
    // The failure at 5 000 ms, then the first backoff (1 000 ms).
    expect(r.requests[1]?.at).toBe(6000);
    // A reply carrying an older time (another instance's clock) does not move the clock back.
    r.step(failed(r, 'server_error', 3000));
    r.backoff();
    expect(r.requests[2]?.at).toBe(8000);
  });
});

describe('fallback: the re-ask', () => {
  it('shows the model its answer and every validation error, one per line', () => {
    const reask = withValidationErrors(request, '{"ok":false}', ['ok: expected true', 'terms: too few']);
    expect(reask.messages.slice(-2)).toEqual([
      { role: 'assistant', content: '{"ok":false}' },
      {
        role: 'user',
        content:
          'Your answer failed validation:\n- ok: expected true\n- terms: too few\nAnswer again with only the corrected JSON.',
      },
    ]);
    expect(reask.messages.slice(0, -2)).toEqual(request.messages);
  });

  it('leaves out an answer that was not kept (read no further than its ceiling): only what was wrong follows', () => {
    const reask = withValidationErrors(request, '', ['the answer passed 65536 characters']);
    expect(reask.messages).toEqual([
      ...request.messages,
      { role: 'user', content: 'Your answer failed validation:\n- the answer passed 65536 characters\nAnswer again with only the corrected JSON.' },
    ]);
  });
});

describe('fallback: a retry at once into a refusing breaker', () => {
  it('retries at once, without a backoff, when the failure says the breaker now refuses', () => {
    const r = run(inputFor(1, { retryMax: 1 }));
    r.step({ ...failed(r, 'server_error', 100), breakerRefusing: true });
    expect(r.snapshot.value).toBe('calling');
    expect(r.requests).toHaveLength(2);
  });

  it('waits out the backoff when the failure says nothing of a refusing breaker', () => {
    const r = run(inputFor(1, { retryMax: 1 }));
    r.step(failed(r, 'server_error', 100));
    expect(r.snapshot.value).toBe('backingOff');
    expect(r.requests).toHaveLength(1);
  });

  it('counts toward RETRY_MAX like a retry after a backoff', () => {
    // The breaker says it refuses, but the provider still answers each call with a failure.
    const r = run(inputFor(1, { retryMax: 1 }));
    r.step({ ...failed(r, 'server_error', 100), breakerRefusing: true });
    expect(r.snapshot.value).toBe('calling');
    r.step({ ...failed(r, 'server_error', 200), breakerRefusing: true });
    expect(r.snapshot.output).toMatchObject({ status: 'failed', httpStatus: 503 });
    expect(r.requests).toHaveLength(2);
  });
});
