/**
 * The retry-and-fallback run driven as a real actor (createActor, a scripted provider actor answering each
 * `call.requested`): its spending limit, its prices and what its attempts record, judged by docs/cost.md,
 * docs/errors.md and docs/api.md as written there:
 * - "Before each call the fallback run prices it ... its guard `isWithinBudget` lets it out only when
 *   spent + held + that worst case ≤ the budget; the call then holds its worst case until it ends, and is
 *   settled at what it really cost (an answer's priced usage; nothing for a call that failed before any
 *   output or never went out; its whole worst case when its cost is unknown: no usage reported, or a
 *   stream cut after some output)." (docs/cost.md "The budget")
 * - "A call that does not fit is not made: the run ends in its final state `overBudget`" and the request
 *   answers 422 `BUDGET_EXCEEDED` with the attempts so far; a model with no price never gets a call out.
 * - "Without a budget no call waits to be priced (`budgeting` goes straight to `calling`)."
 * - "Every Attempt whose call reported usage and whose model is priced has `costUsd` ... by the model the
 *   answer names (after a fallback, the fallback's model). An answer that failed validation is priced too;
 *   a call that failed without an answer has no `costUsd`." (docs/cost.md "What a request and a job cost")
 * - "An Attempt of a streamed call has `"streamed": {"chunks", "firstTokenMs"}`" (docs/api.md "Attempt").
 * - `invalid_output`: "once (re-ask with the validation errors)" (docs/errors.md), the adapter's own reason
 *   (an answer it stopped reading) included.
 * The budget here is a recorder that states docs/cost.md's rule in one line; the prices are literals.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createActor, fromCallback, toPromise, type AnyActorRef } from 'xstate';
import type { ErrorClass } from '../../src/errors/index.js';
import {
  fallbackMachine,
  type FallbackEvent,
  type FallbackInput,
  type FallbackOutput,
} from '../../src/machines/fallback.machine.js';
import type { CallRequest } from '../../src/machines/call-request.js';
import type {
  AnswerContinuation,
  CallBudget,
  CallPricing,
  GenerationRequest,
  ProviderId,
  TokenUsage,
} from '../../src/machines/types.js';
import { Secret } from '../../src/security/secret.js';
import { request } from './gateway-harness.js';

/** The one answer the run's validator accepts. */
const validText = '{"ok":true}';

/** What the provider actor was asked: each call (its id, request and clock) and each cancel. */
interface Requested {
  readonly type: 'call.requested' | 'call.cancelled';
  readonly callId: string;
  readonly at: number;
  readonly request?: GenerationRequest;
}

/** One scripted reply: how the provider answers the call it was asked (or `hang`: never). */
type Reply =
  | {
      /** `valid` / `invalid`: the text (when not given) the run's validator accepts or refuses. */
      readonly answer: 'valid' | 'invalid' | 'text';
      readonly model?: string;
      readonly usage?: TokenUsage;
      readonly text?: string;
      readonly chunks?: number;
    }
  | {
      readonly failure: ErrorClass;
      readonly chunks?: number;
      readonly partialText?: string;
      readonly validationErrors?: readonly string[];
      readonly httpStatus?: number;
    }
  | { readonly rejected: true }
  | { readonly keySkipped: ErrorClass }
  | { readonly hang: true };

type ReplyEvent = Exclude<FallbackEvent, { type: 'request.aborted' }>;

/** A provider actor that answers each call with the next reply of its script, at the call's own clock + 10 ms. */
function scriptedProvider(providerId: ProviderId, script: Reply[], seen: Requested[]): AnyActorRef {
  const logic = fromCallback<{
    type: string;
    callId: string;
    at: number;
    request?: GenerationRequest;
    replyTo?: AnyActorRef;
    validate?: CallRequest['validate'];
  }>(
    ({ receive }) => {
      receive((event) => {
        seen.push({
          type: event.type as Requested['type'],
          callId: event.callId,
          at: event.at,
          ...(event.request === undefined ? {} : { request: event.request }),
        });
        if (event.type !== 'call.requested' || event.replyTo === undefined || event.validate === undefined) return;
        const reply = script.shift() ?? { answer: 'valid' };
        const base = { callId: event.callId, providerId, at: event.at + 10 };
        let out: ReplyEvent | undefined;
        if ('answer' in reply) {
          const answer = {
            text: reply.text ?? (reply.answer === 'valid' ? validText : '{"ok":false}'),
            model: reply.model ?? `${providerId}-model`,
            usage: reply.usage ?? { inputTokens: null, outputTokens: null },
            truncated: false,
          };
          out = {
            type: 'provider.succeeded',
            ...base,
            answer,
            // Judged next to the call with the call's own validator, as the attempt judges it.
            verdict: event.validate(answer),
            durationMs: 10,
            streamed: reply.chunks === undefined ? null : { chunks: reply.chunks, firstTokenMs: 7 },
          };
        } else if ('failure' in reply) {
          out = {
            type: 'provider.failed',
            ...base,
            failure: {
              errorClass: reply.failure,
              message: `scripted ${reply.failure}`,
              ...(reply.validationErrors === undefined ? {} : { validationErrors: reply.validationErrors }),
              ...(reply.httpStatus === undefined ? {} : { httpStatus: reply.httpStatus }),
            },
            countedByBreaker: reply.failure === 'server_error',
            durationMs: 10,
            streamed: reply.chunks === undefined ? null : { chunks: reply.chunks, firstTokenMs: 7 },
            ...(reply.partialText === undefined ? {} : { partialText: reply.partialText }),
          };
        } else if ('rejected' in reply) {
          out = { type: 'provider.rejected', ...base, retryAt: event.at + 60_000 };
        } else if ('keySkipped' in reply) {
          out = {
            type: 'provider.keySkipped',
            ...base,
            reason: 'key_quarantined',
            errorClass: reply.keySkipped,
            until: event.at + 600_000,
          };
        }
        if (out !== undefined) event.replyTo.send(out);
      });
    },
  );
  return createActor(logic).start();
}

/** What the run asked of its budget, in order. */
type BudgetCall =
  | ['worstCaseOf', string, GenerationRequest]
  | ['allows', number | null]
  | ['hold', string, number]
  | ['settle', string, number | null];

/**
 * docs/cost.md's budget, stated in one line (`allows`): spent + held + worst case ≤ the limit, an unpriced
 * call never. Each model's worst case is a literal of the test (`null`: the model has no price); a
 * worst case given as a promise the test never settles keeps the run in `pricing`.
 */
function recordingBudget(maxUsd: number, worstCase: Record<string, number | null | 'never'>) {
  const calls: BudgetCall[] = [];
  const held = new Map<string, number>();
  let spent = 0;
  const budget: CallBudget = {
    maxUsd,
    worstCaseOf(model, asked) {
      calls.push(['worstCaseOf', model, asked]);
      const usd = worstCase[model];
      if (usd === 'never') return new Promise<never>(() => undefined);
      return Promise.resolve(usd ?? null);
    },
    allows(usd) {
      calls.push(['allows', usd]);
      return usd !== null && spent + [...held.values()].reduce((a, b) => a + b, 0) + usd <= maxUsd;
    },
    hold(callId, usd) {
      calls.push(['hold', callId, usd]);
      held.set(callId, usd);
    },
    settle(callId, usd) {
      calls.push(['settle', callId, usd]);
      const reserved = held.get(callId);
      if (reserved === undefined) return;
      held.delete(callId);
      spent += usd ?? reserved;
    },
  };
  return {
    budget,
    calls,
    get spent() {
      return spent;
    },
  };
}

/** Prices per million tokens, written out: claude-model 3 in / 15 out, gpt-model 1 in / 10 out; others unpriced. */
const pricing: CallPricing = {
  costOf(model, usage) {
    const price = { 'claude-model': [3, 15], 'gpt-model': [1, 10] }[model];
    if (price === undefined || usage.inputTokens === null || usage.outputTokens === null) return null;
    return (usage.inputTokens * (price[0] ?? 0) + usage.outputTokens * (price[1] ?? 0)) / 1_000_000;
  },
};

interface RunOptions {
  readonly scripts: Partial<Record<ProviderId, Reply[]>>;
  readonly budget?: CallBudget;
  readonly pricing?: CallPricing;
  readonly retryMax?: number;
  readonly backoffMs?: number[];
  readonly continuation?: AnswerContinuation;
}

const started: AnyActorRef[] = [];

afterEach(() => {
  for (const actor of started.splice(0)) actor.stop();
});

/** Starts the run over the providers scripted, in the order given. */
function startRun(options: RunOptions) {
  const seen: Record<string, Requested[]> = {};
  const providers = Object.keys(options.scripts) as ProviderId[];
  const links = providers.map((provider) => {
    const log: Requested[] = [];
    seen[provider] = log;
    const ref = scriptedProvider(provider, options.scripts[provider] ?? [], log);
    started.push(ref);
    return { provider, model: `${provider}-model`, apiKey: new Secret(`test-${provider}-key-budget`), keyId: `key-${provider}`, ref };
  });
  const input: FallbackInput = {
    runId: 'run',
    links,
    request,
    // The test continuation's cut mark (`|`) is not part of the answer.
    validate: (answer) =>
      answer.text.replaceAll('|', '') === validText ? { ok: true, value: { ok: true } } : { ok: false, errors: ['ok: expected true'] },
    policy: 'retry-then-fallback',
    retryMax: options.retryMax ?? 0,
    backoffMs: options.backoffMs ?? [0],
    startedAt: 1000,
    ...(options.budget === undefined ? {} : { budget: options.budget }),
    ...(options.pricing === undefined ? {} : { pricing: options.pricing }),
    ...(options.continuation === undefined ? {} : { continuation: options.continuation }),
  };
  const actor = createActor(fallbackMachine, { input });
  started.push(actor);
  const emitted: { type: string; provider?: string; prefix?: string; reason?: string }[] = [];
  actor.on('*', (event) => emitted.push(event));
  actor.start();
  return { actor, seen, emitted, done: toPromise(actor) as Promise<FallbackOutput> };
}

const overBudgetMessage = (provider: string, worst: number, max: number) =>
  `The next call to ${provider} (${provider}-model) could cost up to $${worst}, which would pass options.maxCostUsd ${max} with what was already spent; it was not made.`;

describe('fallback run with a budget: each call priced before it goes out (docs/cost.md "The budget")', () => {
  it('without a budget, the call goes out at once: nothing waits to be priced', () => {
    const { seen } = startRun({ scripts: { claude: [{ hang: true }] } });
    // Synchronously, before any promise could settle: the call was already asked for.
    expect(seen.claude?.map((e) => e.callId)).toEqual(['run:1']);
  });

  it('with a budget, the call waits for its worst case, is let out when it fits, holds it, and is settled at its priced usage', async () => {
    const b = recordingBudget(1, { 'claude-model': 0.4 });
    const { seen, done } = startRun({
      scripts: { claude: [{ answer: 'valid', usage: { inputTokens: 1000, outputTokens: 2000 } }] },
      budget: b.budget,
      pricing,
    });
    expect(seen.claude).toEqual([]);
    const output = await done;
    // 1 000 × $3 + 2 000 × $15 per million tokens = $0.033.
    expect(b.calls).toEqual([
      ['worstCaseOf', 'claude-model', request],
      ['allows', 0.4],
      ['hold', 'run:1', 0.4],
      ['settle', 'run:1', 0.033],
    ]);
    expect(b.spent).toBe(0.033);
    expect(output).toMatchObject({ status: 'succeeded', provider: 'claude', attempts: [{ outcome: 'succeeded', costUsd: 0.033 }] });
  });

  it('does not make a call whose worst case does not fit: 422 BUDGET_EXCEEDED, no call, nothing held', async () => {
    const b = recordingBudget(0.25, { 'claude-model': 0.5 });
    const { seen, done } = startRun({ scripts: { claude: [] }, budget: b.budget });
    expect(await done).toEqual({
      status: 'failed',
      attempts: [],
      httpStatus: 422,
      code: 'BUDGET_EXCEEDED',
      message: overBudgetMessage('claude', 0.5, 0.25),
    });
    expect(seen.claude).toEqual([]);
    expect(b.calls.map((c) => c[0])).toEqual(['worstCaseOf', 'allows']);
  });

  it('lets out a call whose worst case fits exactly (≤, not <)', async () => {
    const b = recordingBudget(0.5, { 'claude-model': 0.5 });
    const { done } = startRun({ scripts: { claude: [{ answer: 'valid' }] }, budget: b.budget });
    expect(await done).toMatchObject({ status: 'succeeded' });
  });

  it('never lets out a call to a model with no price: 422 BUDGET_EXCEEDED saying it cannot be priced', async () => {
    const b = recordingBudget(100, { 'claude-model': null });
    const { seen, done } = startRun({ scripts: { claude: [] }, budget: b.budget });
    expect(await done).toEqual({
      status: 'failed',
      attempts: [],
      httpStatus: 422,
      code: 'BUDGET_EXCEEDED',
      message:
        'The next call to claude (claude-model) cannot be priced (the model has no price: set MODEL_PRICES), so it was not made within options.maxCostUsd 100.',
    });
    expect(seen.claude).toEqual([]);
    expect(b.calls).toEqual([
      ['worstCaseOf', 'claude-model', request],
      ['allows', null],
    ]);
  });

  it('stops before the retry that would pass the limit, with the attempts so far', async () => {
    // Each call's worst case is 0.3 of a 0.5 budget; the first answers without usage, so its whole worst case stays spent.
    const b = recordingBudget(0.5, { 'claude-model': 0.3 });
    const { seen, done } = startRun({
      scripts: { claude: [{ answer: 'invalid' }, { answer: 'valid' }] },
      budget: b.budget,
      retryMax: 2,
    });
    const output = await done;
    expect(output).toMatchObject({
      status: 'failed',
      httpStatus: 422,
      code: 'BUDGET_EXCEEDED',
      attempts: [{ provider: 'claude', outcome: 'failed', errorClass: 'invalid_output', retry: 0 }],
      message: overBudgetMessage('claude', 0.3, 0.5),
    });
    expect(output.attempts).toHaveLength(1);
    expect(seen.claude?.map((e) => e.callId)).toEqual(['run:1']);
    expect(b.calls.filter((c) => c[0] === 'settle')).toEqual([['settle', 'run:1', null]]);
    expect(b.spent).toBe(0.3);
  });

  it('prices the re-ask as it will be sent: the answer and its validation errors added', async () => {
    const b = recordingBudget(10, { 'claude-model': 0.1 });
    const { done } = startRun({ scripts: { claude: [{ answer: 'invalid' }, { answer: 'valid' }] }, budget: b.budget });
    expect(await done).toMatchObject({ status: 'succeeded' });
    const priced = b.calls.filter((c) => c[0] === 'worstCaseOf').map((c) => c[2] as GenerationRequest);
    expect(priced).toHaveLength(2);
    expect(priced[0]).toEqual(request);
    expect(priced[1]?.messages).toEqual([
      ...request.messages,
      { role: 'assistant', content: '{"ok":false}' },
      { role: 'user', content: 'Your answer failed validation:\n- ok: expected true\nAnswer again with only the corrected JSON.' },
    ]);
  });

  it('prices each call at the model of the provider it goes to (after a fallback, the next provider)', async () => {
    const b = recordingBudget(10, { 'claude-model': 0.2, 'gpt-model': 0.1 });
    const { done } = startRun({ scripts: { claude: [{ failure: 'auth' }], gpt: [{ answer: 'valid' }] }, budget: b.budget });
    expect(await done).toMatchObject({ status: 'succeeded', provider: 'gpt', fallback: true });
    expect(b.calls.filter((c) => c[0] !== 'worstCaseOf')).toEqual([
      ['allows', 0.2],
      ['hold', 'run:1', 0.2],
      // auth: failed before any output, so it cost nothing.
      ['settle', 'run:1', 0],
      ['allows', 0.1],
      ['hold', 'run:2', 0.1],
      // An answer without usage: its cost is unknown, so its whole worst case stays spent.
      ['settle', 'run:2', null],
    ]);
    expect(b.calls.filter((c) => c[0] === 'worstCaseOf').map((c) => c[1])).toEqual(['claude-model', 'gpt-model']);
    expect(b.spent).toBe(0.1);
  });

  it('settles a call that failed after some output at its whole worst case (unknown), one before any output at nothing', async () => {
    const b = recordingBudget(10, { 'claude-model': 0.25 });
    const { done } = startRun({
      scripts: { claude: [{ failure: 'server_error', chunks: 3 }, { failure: 'server_error', chunks: 0 }, { answer: 'valid' }] },
      budget: b.budget,
      retryMax: 2,
    });
    expect(await done).toMatchObject({ status: 'succeeded' });
    expect(b.calls.filter((c) => c[0] === 'settle')).toEqual([
      ['settle', 'run:1', null],
      ['settle', 'run:2', 0],
      ['settle', 'run:3', null],
    ]);
    expect(b.spent).toBe(0.5);
  });

  it('settles a skip (breaker refusal, refused key) at nothing: the call never went out', async () => {
    const b = recordingBudget(10, { 'claude-model': 0.25, 'gpt-model': 0.25 });
    const { done } = startRun({
      scripts: { claude: [{ rejected: true }], gpt: [{ keySkipped: 'auth' }] },
      budget: b.budget,
    });
    expect(await done).toMatchObject({ status: 'failed', attempts: [{ outcome: 'skipped' }, { outcome: 'skipped' }] });
    expect(b.calls.filter((c) => c[0] === 'settle')).toEqual([
      ['settle', 'run:1', 0],
      ['settle', 'run:2', 0],
    ]);
    expect(b.spent).toBe(0);
  });

  it('aborted while pricing: no call goes out, nothing is held', async () => {
    const b = recordingBudget(10, { 'claude-model': 'never' });
    const { actor, seen, done } = startRun({ scripts: { claude: [] }, budget: b.budget });
    actor.send({ type: 'request.aborted', at: 2000 });
    expect(await done).toEqual({ status: 'aborted', attempts: [] });
    expect(seen.claude).toEqual([]);
    expect(b.calls.map((c) => c[0])).toEqual(['worstCaseOf']);
  });

  it('aborted mid-call: the call is cancelled and settled as unknown (its worst case stays spent)', async () => {
    const b = recordingBudget(10, { 'claude-model': 0.25 });
    const { actor, seen, done } = startRun({ scripts: { claude: [{ hang: true }] }, budget: b.budget });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(seen.claude?.map((e) => e.type)).toEqual(['call.requested']);
    actor.send({ type: 'request.aborted', at: 2000 });
    expect(await done).toEqual({ status: 'aborted', attempts: [] });
    expect(seen.claude?.map((e) => [e.type, e.callId, e.at])).toEqual([
      ['call.requested', 'run:1', 1000],
      ['call.cancelled', 'run:1', 2000],
    ]);
    expect(b.calls.slice(-1)).toEqual([['settle', 'run:1', null]]);
    expect(b.spent).toBe(0.25);
  });

  it('aborted while backing off: no further call, the earlier one settled already', async () => {
    const b = recordingBudget(10, { 'claude-model': 0.25 });
    const run = startRun({ scripts: { claude: [{ failure: 'server_error' }] }, budget: b.budget, retryMax: 1, backoffMs: [60_000] });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(run.actor.getSnapshot().value).toBe('backingOff');
    run.actor.send({ type: 'request.aborted', at: 3000 });
    expect(await run.done).toMatchObject({ status: 'aborted', attempts: [{ outcome: 'failed', errorClass: 'server_error' }] });
    expect(b.calls.filter((c) => c[0] === 'settle')).toEqual([['settle', 'run:1', 0]]);
  });
});

describe('fallback run with prices: what each attempt cost (docs/cost.md "What a request and a job cost")', () => {
  it('prices an invalid answer and the valid one by the model each answer names; a failure without an answer has no cost', async () => {
    const { done } = startRun({
      scripts: {
        claude: [{ answer: 'invalid', usage: { inputTokens: 100, outputTokens: 10 } }, { failure: 'timeout' }],
        gpt: [{ answer: 'valid', model: 'claude-model', usage: { inputTokens: 2000, outputTokens: 100 } }],
      },
      pricing,
    });
    const output = await done;
    // 100 × $3 + 10 × $15 per million = $0.00045; the fallback's answer names claude-model: 2000 × 3 + 100 × 15 = $0.0075.
    expect(output).toMatchObject({ status: 'succeeded', provider: 'gpt', model: 'claude-model' });
    expect(output.attempts.map((a) => [a.provider, a.outcome, a.costUsd])).toEqual([
      ['claude', 'failed', 0.00045],
      ['claude', 'failed', undefined],
      ['gpt', 'succeeded', 0.0075],
    ]);
    expect(output.attempts[1]).not.toHaveProperty('costUsd');
  });

  it('leaves costUsd out when the model has no price or the answer reported no usage', async () => {
    const { done } = startRun({
      scripts: {
        claude: [
          { answer: 'invalid', model: 'unpriced-model', usage: { inputTokens: 5, outputTokens: 5 } },
          { answer: 'valid', usage: { inputTokens: null, outputTokens: 3 } },
        ],
      },
      pricing,
    });
    const output = await done;
    expect(output.status).toBe('succeeded');
    expect(output.attempts).toHaveLength(2);
    for (const attempt of output.attempts) expect(attempt).not.toHaveProperty('costUsd');
  });

  it('without a price table, no attempt carries a cost', async () => {
    const { done } = startRun({
      scripts: { claude: [{ answer: 'invalid', usage: { inputTokens: 5, outputTokens: 5 } }, { answer: 'valid', usage: { inputTokens: 5, outputTokens: 5 } }] },
    });
    const output = await done;
    expect(output.attempts.map((a) => a.outcome)).toEqual(['failed', 'succeeded']);
    for (const attempt of output.attempts) expect(attempt).not.toHaveProperty('costUsd');
  });
});

describe('fallback run: what its attempts record (docs/api.md "Attempt")', () => {
  it('gives every attempt of a streamed call its streamed pieces, and none to a call that did not stream', async () => {
    const { done } = startRun({
      scripts: {
        claude: [{ failure: 'timeout', chunks: 2 }],
        gpt: [{ answer: 'invalid', chunks: 4 }, { answer: 'valid', chunks: 5 }],
      },
      retryMax: 0,
    });
    const output = await done;
    expect(output.attempts.map((a) => [a.provider, a.outcome, a.streamed])).toEqual([
      ['claude', 'failed', { chunks: 2, firstTokenMs: 7 }],
      ['gpt', 'failed', { chunks: 4, firstTokenMs: 7 }],
      ['gpt', 'succeeded', { chunks: 5, firstTokenMs: 7 }],
    ]);
    const plain = await startRun({ scripts: { claude: [{ failure: 'timeout' }, { answer: 'invalid' }, { answer: 'valid' }] }, retryMax: 1 }).done;
    expect(plain.attempts.map((a) => a.outcome)).toEqual(['failed', 'failed', 'succeeded']);
    for (const attempt of plain.attempts) expect(attempt).not.toHaveProperty('streamed');
  });

  it('gives a failed attempt the upstream HTTP status when there was one, and no httpStatus field when there was none', async () => {
    const { done } = startRun({ scripts: { claude: [{ failure: 'server_error', httpStatus: 503 }, { failure: 'timeout' }] }, retryMax: 1 });
    const output = await done;
    expect(output.attempts.map((a) => [a.errorClass, a.httpStatus])).toEqual([
      ['server_error', 503],
      ['timeout', undefined],
    ]);
    // `"httpStatus"?` (docs/api.md "Attempt"): absent, not present as undefined.
    expect(Object.keys(output.attempts[1] ?? {})).not.toContain('httpStatus');
  });

  it("re-asks with the adapter's own reason for invalid_output (an answer it stopped reading), and only that", async () => {
    const { seen, done } = startRun({
      scripts: {
        claude: [{ failure: 'invalid_output', validationErrors: ['the answer passed 8192 characters'] }, { answer: 'valid' }],
      },
    });
    expect(await done).toMatchObject({ status: 'succeeded' });
    expect(seen.claude?.[1]?.request?.messages).toEqual([
      ...request.messages,
      { role: 'user', content: 'Your answer failed validation:\n- the answer passed 8192 characters\nAnswer again with only the corrected JSON.' },
    ]);
  });
});

/**
 * A test continuation: the text can be continued after its last `|` (nothing before a `|` is no cut); the
 * continuing request carries the prefix as an assistant message; prefix and rest are one answer.
 */
const continuation: AnswerContinuation = {
  pointOf: (written) => (written.includes('|') ? written.slice(0, written.lastIndexOf('|') + 1) : undefined),
  request: (base, prefix) => ({ ...base, messages: [...base.messages, { role: 'assistant', content: prefix }] }),
  merge: (prefix, rest) => prefix + rest,
};

const resetOf = (provider: string, errorClass: string) => ({
  type: 'answer.reset',
  provider,
  reason: `${provider} failed (${errorClass}); the next answer starts over`,
});

describe('fallback run: continue or start over after output (docs/api.md "Streaming")', () => {
  it('judges a call that continues nothing on its own text, even when the run can continue answers', async () => {
    const { done } = startRun({ scripts: { claude: [{ answer: 'valid' }] }, continuation });
    expect(await done).toMatchObject({ status: 'succeeded', value: { ok: true } });
  });

  it('continues from the cut: the rest is asked after the prefix, and prefix and rest are judged as one answer', async () => {
    const { seen, emitted, done } = startRun({
      scripts: { claude: [{ failure: 'connection', chunks: 2, partialText: '{"ok":|tr' }, { answer: 'text', text: 'true}' }] },
      continuation,
      retryMax: 1,
    });
    const output = await done;
    expect(output).toMatchObject({ status: 'succeeded', value: { ok: true } });
    expect(seen.claude?.[1]?.request?.messages).toEqual([...request.messages, { role: 'assistant', content: '{"ok":|' }]);
    expect(output.attempts.map((a) => a.continuation)).toEqual([undefined, true]);
    expect(emitted.filter((e) => e.type.startsWith('answer.'))).toEqual([
      { type: 'answer.continued', provider: 'claude', prefix: '{"ok":|' },
    ]);
  });

  it('without a continuation, never continues a cut answer: a reset, and the next call asks for a whole one', async () => {
    const { seen, emitted, done } = startRun({
      scripts: { claude: [{ failure: 'timeout', chunks: 2, partialText: '{"ok":|tr' }, { answer: 'valid' }] },
      retryMax: 1,
    });
    const output = await done;
    expect(output).toMatchObject({ status: 'succeeded' });
    expect(seen.claude?.[1]?.request).toEqual(request);
    expect(output.attempts[1]).not.toHaveProperty('continuation');
    expect(emitted.filter((e) => e.type.startsWith('answer.'))).toEqual([resetOf('claude', 'timeout')]);
  });

  it('starts over when the cut keeps nothing (an empty prefix is no point to continue from)', async () => {
    const cutAtStart: AnswerContinuation = { ...continuation, pointOf: () => '' };
    const { seen, emitted, done } = startRun({
      scripts: { claude: [{ failure: 'timeout', chunks: 1, partialText: '|x' }, { answer: 'valid' }] },
      continuation: cutAtStart,
      retryMax: 1,
    });
    expect(await done).toMatchObject({ status: 'succeeded' });
    expect(seen.claude?.[1]?.request).toEqual(request);
    expect(emitted.filter((e) => e.type.startsWith('answer.'))).toEqual([resetOf('claude', 'timeout')]);
  });

  it("names in the reset the provider that wrote the void output and how its call ended, after a fallback too", async () => {
    const { emitted, done } = startRun({
      scripts: { claude: [{ failure: 'auth', chunks: 1, partialText: 'no cut here' }], gpt: [{ answer: 'valid' }] },
      continuation,
    });
    expect(await done).toMatchObject({ status: 'succeeded', provider: 'gpt' });
    expect(emitted.filter((e) => e.type.startsWith('answer.') || e.type === 'fallback.taken')).toEqual([
      { type: 'fallback.taken', from: 'claude', to: 'gpt' },
      resetOf('claude', 'auth'),
    ]);
  });

  it('voids a streamed invalid answer (a reset before the re-ask); one that streamed nothing left nothing to void', async () => {
    const streamed = startRun({ scripts: { claude: [{ answer: 'invalid', chunks: 3 }, { answer: 'valid' }] } });
    expect(await streamed.done).toMatchObject({ status: 'succeeded' });
    expect(streamed.emitted.filter((e) => e.type.startsWith('answer.'))).toEqual([resetOf('claude', 'invalid_output')]);

    const whole = startRun({ scripts: { claude: [{ answer: 'invalid' }, { answer: 'valid' }] } });
    const output = await whole.done;
    expect(output).toMatchObject({ status: 'succeeded' });
    // Neither call continued an answer: no `continuation` on either attempt.
    expect(output.attempts.map((a) => 'continuation' in a)).toEqual([false, false]);
    expect(whole.emitted.filter((e) => e.type.startsWith('answer.'))).toEqual([]);
  });

  it('starts the re-ask of an invalid continued answer over: a reset, the whole answer shown back, no continuation', async () => {
    const { seen, emitted, done } = startRun({
      scripts: {
        claude: [
          { failure: 'connection', chunks: 2, partialText: '{"ok":|fa' },
          { answer: 'text', text: 'false}' },
          { answer: 'valid' },
        ],
      },
      continuation,
      retryMax: 1,
    });
    const output = await done;
    expect(output).toMatchObject({ status: 'succeeded' });
    expect(output.attempts.map((a) => [a.outcome, a.errorClass, a.continuation])).toEqual([
      ['failed', 'connection', undefined],
      ['failed', 'invalid_output', true],
      ['succeeded', undefined, undefined],
    ]);
    expect(emitted.filter((e) => e.type.startsWith('answer.'))).toEqual([
      { type: 'answer.continued', provider: 'claude', prefix: '{"ok":|' },
      resetOf('claude', 'invalid_output'),
    ]);
    expect(seen.claude?.[2]?.request?.messages).toEqual([
      ...request.messages,
      { role: 'assistant', content: '{"ok":|false}' },
      { role: 'user', content: 'Your answer failed validation:\n- ok: expected true\nAnswer again with only the corrected JSON.' },
    ]);
  });
});
