/**
 * The fallback runs stepped without an actor per run (src/actors/fallback-runs.ts): what an actor would
 * do for them by itself — its backoff timer armed and cancelled, events that arrive while a step's
 * actions run taken after them, nothing kept once a run is over — checked against rules written out here.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createActor, fromCallback } from 'xstate';
import { createFallbackRuns, type RunObserver } from '../../src/actors/fallback-runs.js';
import type { FallbackEmitted, FallbackOutput } from '../../src/machines/fallback.machine.js';
import type { ProviderReply, ProviderRequestEvent } from '../../src/machines/provider.machine.js';
import { Secret } from '../../src/security/secret.js';
import { request } from './gateway-harness.js';

type CallRequested = Extract<ProviderRequestEvent, { type: 'call.requested' }>;

/** A stand-in provider actor: `answer` decides each call's reply (undefined: no reply yet). */
function provider(answer: (call: CallRequested) => ProviderReply | undefined) {
  const calls: CallRequested[] = [];
  const ref = createActor(
    fromCallback<ProviderRequestEvent>(({ receive }) => {
      receive((event) => {
        if (event.type !== 'call.requested') return;
        calls.push(event);
        const reply = answer(event);
        if (reply !== undefined) event.replyTo.send(reply);
      });
    }),
  ).start();
  return { ref, calls };
}

const serverError = (call: CallRequested): ProviderReply => ({
  type: 'provider.failed',
  callId: call.callId,
  providerId: 'claude',
  failure: { errorClass: 'server_error', message: 'down' },
  countedByBreaker: true,
  durationMs: 1,
  at: call.at,
});
const answered = (call: CallRequested): ProviderReply => ({
  type: 'provider.succeeded',
  callId: call.callId,
  providerId: 'claude',
  answer: { text: 'ok', model: 'm', truncated: false, usage: { inputTokens: 1, outputTokens: 2 } },
  verdict: { ok: true, value: 'ok' },
  durationMs: 1,
  at: call.at,
});

function observer() {
  const emitted: FallbackEmitted[] = [];
  const outputs: FallbackOutput[] = [];
  const errors: Error[] = [];
  const watch: RunObserver = {
    emitted: (event) => emitted.push(event),
    done: (output) => outputs.push(output),
    error: (error) => errors.push(error),
  };
  return { watch, emitted, outputs, errors };
}

function inputFor(ref: ReturnType<typeof provider>['ref']) {
  return {
    runId: 'run',
    links: [
      {
        provider: 'claude' as const,
        model: 'm',
        apiKey: new Secret('test-claude-key-runs'),
        keyId: 'k',
        ref,
      },
    ],
    request,
    validate: () => ({ ok: true as const, value: 'ok' }),
    policy: 'retry-then-fallback' as const,
    retryMax: 2,
    backoffMs: [1000, 2000],
    startedAt: 0,
  };
}

/** Starts a run whose observer stops it on the first event it emits. */
function startStoppedOnFirstEmit(
  runs: ReturnType<typeof createFallbackRuns>,
  ref: ReturnType<typeof provider>['ref'],
  seen: ReturnType<typeof observer>,
): void {
  const run = runs.create(inputFor(ref), {
    ...seen.watch,
    emitted: (event) => {
      seen.emitted.push(event);
      run.stop();
    },
  });
  run.start();
}

afterEach(() => {
  vi.useRealTimers();
});

describe('fallback runs stepped without an actor per run', () => {
  it('retries after each backoff (1000 then 2000 ms) and keeps no run and no timer once it ends', async () => {
    vi.useFakeTimers();
    const runs = createFallbackRuns();
    let failures = 2;
    // Synchronous replies: each arrives while the step that sent the request still runs its actions.
    const claude = provider((call) => (failures-- > 0 ? serverError(call) : answered(call)));
    const seen = observer();
    runs.create(inputFor(claude.ref), seen.watch).start();
    expect(claude.calls).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(999);
    expect(claude.calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(claude.calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1999);
    expect(claude.calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(claude.calls).toHaveLength(3);
    expect(seen.errors).toEqual([]);
    expect(seen.outputs).toHaveLength(1);
    expect(seen.outputs[0]?.status).toBe('succeeded');
    expect(seen.outputs[0]?.attempts.map((a) => [a.outcome, a.retry])).toEqual([
      ['failed', 0],
      ['failed', 1],
      ['succeeded', 2],
    ]);
    // Each attempt announced as it happened.
    expect(seen.emitted.filter((e) => e.type === 'attempt.recorded')).toHaveLength(3);
    expect(runs.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    runs.stop();
  });

  it('an abort during the backoff ends the run aborted and clears its timer', () => {
    vi.useFakeTimers();
    const runs = createFallbackRuns();
    const claude = provider(serverError);
    const seen = observer();
    const run = runs.create(inputFor(claude.ref), seen.watch);
    run.start();
    expect(vi.getTimerCount()).toBe(1);
    run.send({ type: 'request.aborted', at: 5 });
    expect(seen.outputs.map((o) => o.status)).toEqual(['aborted']);
    expect(vi.getTimerCount()).toBe(0);
    expect(runs.size).toBe(0);
    runs.stop();
  });

  it('a reply that comes after the run ended reaches no run and changes nothing', () => {
    const runs = createFallbackRuns();
    const claude = provider(() => undefined);
    const seen = observer();
    const run = runs.create(inputFor(claude.ref), seen.watch);
    run.start();
    expect(runs.size).toBe(1);
    run.send({ type: 'request.aborted', at: 5 });
    const call = claude.calls[0];
    if (call === undefined) throw new Error('no call went out');
    call.replyTo.send(answered(call));
    expect(seen.outputs.map((o) => o.status)).toEqual(['aborted']);
    expect(seen.errors).toEqual([]);
    expect(runs.size).toBe(0);
    runs.stop();
  });

  it('a retry moves the run to its new call: a late reply to the first call reaches no run', async () => {
    vi.useFakeTimers();
    const runs = createFallbackRuns();
    const claude = provider((call) =>
      call.callId === claude.calls[0]?.callId ? serverError(call) : undefined,
    );
    const seen = observer();
    runs.create(inputFor(claude.ref), seen.watch).start();
    await vi.advanceTimersByTimeAsync(1000);
    const [first, second] = claude.calls;
    if (first === undefined || second === undefined) throw new Error('no retry went out');
    first.replyTo.send(answered(first));
    expect(seen.outputs).toEqual([]);
    expect(runs.size).toBe(1);
    second.replyTo.send(answered(second));
    expect(seen.outputs.map((o) => o.status)).toEqual(['succeeded']);
    runs.stop();
  });

  it('a run stopped where it is reports nothing more and leaves no timer', async () => {
    vi.useFakeTimers();
    const runs = createFallbackRuns();
    const claude = provider(serverError);
    const seen = observer();
    const run = runs.create(inputFor(claude.ref), seen.watch);
    run.start();
    expect(vi.getTimerCount()).toBe(1);
    run.stop();
    expect(vi.getTimerCount()).toBe(0);
    expect(runs.size).toBe(0);
    run.send({ type: 'request.aborted', at: 5 });
    await vi.advanceTimersByTimeAsync(5000);
    expect(claude.calls).toHaveLength(1);
    expect(seen.outputs).toEqual([]);
    expect(seen.emitted.filter((e) => e.type === 'attempt.recorded')).toHaveLength(1);
  });

  it("a run its observer stops during a step runs none of that step's remaining actions", async () => {
    vi.useFakeTimers();
    const runs = createFallbackRuns();
    const claude = provider(serverError);
    const seen = observer();
    // The failure's attempt is announced before the step arms its backoff: stopping here, no backoff.
    startStoppedOnFirstEmit(runs, claude.ref, seen);
    expect(seen.emitted.map((e) => e.type)).toEqual(['attempt.recorded']);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(5000);
    expect(claude.calls).toHaveLength(1);
    expect(seen.outputs).toEqual([]);
  });

  it('a run its observer stops during its last step reports no output', () => {
    const runs = createFallbackRuns();
    const claude = provider(answered);
    const seen = observer();
    startStoppedOnFirstEmit(runs, claude.ref, seen);
    expect(seen.emitted.map((e) => e.type)).toEqual(['attempt.recorded']);
    expect(seen.outputs).toEqual([]);
    expect(runs.size).toBe(0);
  });

  it('stopping the runs ends every run in progress and clears their timers', () => {
    vi.useFakeTimers();
    const runs = createFallbackRuns();
    const waiting = provider(() => undefined);
    const failing = provider(serverError);
    const seen = observer();
    runs.create(inputFor(waiting.ref), seen.watch).start();
    runs.create({ ...inputFor(failing.ref), runId: 'run-2' }, seen.watch).start();
    expect(runs.size).toBe(2);
    expect(vi.getTimerCount()).toBe(1);
    runs.stop();
    expect(runs.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    const call = waiting.calls[0];
    if (call === undefined) throw new Error('no call went out');
    call.replyTo.send(answered(call));
    expect(seen.outputs).toEqual([]);
  });

  it('a step that throws ends the run with that error, once, and keeps nothing of it', () => {
    vi.useFakeTimers();
    const runs = createFallbackRuns();
    const claude = provider(serverError);
    const seen = observer();
    const failure = new Error('observer broke');
    const run = runs.create(inputFor(claude.ref), {
      ...seen.watch,
      emitted: () => {
        throw failure;
      },
    });
    run.start();
    expect(seen.errors).toEqual([failure]);
    expect(seen.outputs).toEqual([]);
    expect(runs.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    run.send({ type: 'request.aborted', at: 5 });
    expect(seen.errors).toHaveLength(1);
  });

  it('a step that throws something other than an Error ends the run with an Error saying what it was', () => {
    const runs = createFallbackRuns();
    const claude = provider(serverError);
    const seen = observer();
    runs
      .create(inputFor(claude.ref), {
        ...seen.watch,
        emitted: () => {
          throw 'not an error';
        },
      })
      .start();
    expect(seen.errors.map((error) => [error instanceof Error, error.message])).toEqual([
      [true, 'not an error'],
    ]);
    runs.stop();
  });
});

describe('fallback runs as actors (with an inspector)', () => {
  it('counts a run from its start to its end, reports its output, and shows it to the inspector', () => {
    const inspected: string[] = [];
    const runs = createFallbackRuns({ inspect: (event) => inspected.push(event.type) });
    const claude = provider(answered);
    const seen = observer();
    const waiting = provider(() => undefined);
    runs.create(inputFor(waiting.ref), observer().watch).start();
    expect(runs.size).toBe(1);
    runs.create(inputFor(claude.ref), seen.watch).start();
    expect(seen.outputs.map((o) => o.status)).toEqual(['succeeded']);
    expect(seen.emitted.filter((e) => e.type === 'attempt.recorded')).toHaveLength(1);
    expect(runs.size).toBe(1);
    expect(inspected).toContain('@xstate.actor');
    runs.stop();
  });

  it('hands the events it is sent to the run: an abort ends it aborted', () => {
    const runs = createFallbackRuns({ inspect: () => undefined });
    const waiting = provider(() => undefined);
    const seen = observer();
    const run = runs.create(inputFor(waiting.ref), seen.watch);
    run.start();
    run.send({ type: 'request.aborted', at: 5 });
    expect(seen.outputs.map((o) => o.status)).toEqual(['aborted']);
    expect(runs.size).toBe(0);
  });

  it('reports nothing for a run stopped before its end, and counts it out', () => {
    const runs = createFallbackRuns({ inspect: () => undefined });
    const waiting = provider(() => undefined);
    const seen = observer();
    const run = runs.create(inputFor(waiting.ref), seen.watch);
    run.start();
    run.stop();
    expect(runs.size).toBe(0);
    expect(seen.outputs).toEqual([]);
    expect(seen.errors).toEqual([]);
  });
});
