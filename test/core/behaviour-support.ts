/**
 * Plumbing of the behaviour tests (test/core/*.behaviour.test.ts): a gateway built through its public
 * API with an upstream scripted here, so the tests hold whatever shape the machines inside take.
 */
import { vi } from 'vitest';
import { createGateway } from '../../src/actors/gateway.js';
import type { Gateway, GenerateOutcome, Validation } from '../../src/actors/types.js';
import type { ProviderFailure } from '../../src/errors/index.js';
import type { ProviderAdapter, ProviderAnswer, ProviderId, TokenUsage } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';

/** One scripted call: an answer (valid or not, with its usage), a classified failure, or no answer ever. */
export type Call =
  | { readonly answer: 'valid' | 'invalid'; readonly usage?: TokenUsage }
  | { readonly failure: ProviderFailure['errorClass'] }
  | { readonly hang: true };

class Scripted extends Error {
  constructor(readonly failure: ProviderFailure) {
    super(failure.message);
  }
}

export interface Upstream extends ProviderAdapter {
  /** Milliseconds since `t0` at which each call reached the upstream. */
  readonly calledAt: number[];
  /** More calls to play, after the ones given at the start. */
  script(...calls: Call[]): void;
}

export const t0 = Date.parse('2026-01-01T00:00:00Z');

function upstream(id: ProviderId, calls: Call[]): Upstream {
  const calledAt: number[] = [];
  return {
    id,
    model: `${id}-model`,
    calledAt,
    script: (...more) => void calls.push(...more),
    generate(_request, _apiKey, signal): Promise<ProviderAnswer> {
      calledAt.push(Date.now() - t0);
      const call = calls.shift() ?? { answer: 'valid' };
      return new Promise((resolve, reject) => {
        signal.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')), {
          once: true,
        });
        if ('hang' in call) return;
        if ('failure' in call) {
          reject(new Scripted({ errorClass: call.failure, message: `scripted ${call.failure}` }));
          return;
        }
        resolve({
          text: call.answer === 'valid' ? '{"ok":true}' : '{"ok":false}',
          model: `${id}-model`,
          usage: call.usage ?? { inputTokens: null, outputTokens: null },
          truncated: false,
        });
      });
    },
    classify: (error) => {
      if (error instanceof Scripted) return error.failure;
      if (error instanceof DOMException) return { errorClass: 'aborted', message: 'aborted' };
      return { errorClass: 'connection', message: 'unexpected' };
    },
  };
}

function validate(answer: ProviderAnswer): Validation<true> {
  return answer.text === '{"ok":true}'
    ? { ok: true, value: true }
    : { ok: false, errors: ['ok: expected true'] };
}

export interface Rig {
  readonly gateway: Gateway;
  readonly upstreams: Readonly<Record<ProviderId, Upstream>>;
  /** Starts one generation over `providers`, in order; resolves when the run ends. */
  generate(providers: ProviderId[], signal?: AbortSignal): Promise<GenerateOutcome<true>>;
}

export interface RigOptions {
  readonly scripts?: Partial<Record<ProviderId, Call[]>>;
  readonly retry?: { max: number; backoffMs: number[] };
  readonly breaker?: { threshold: number; recoveryMs: number };
}

/** A gateway with scripted upstreams (fake timers must be on: the clock starts at `t0`). */
export function startRig(options: RigOptions = {}): Rig {
  const scripts = options.scripts ?? {};
  const upstreams = {
    claude: upstream('claude', scripts.claude ?? []),
    gpt: upstream('gpt', scripts.gpt ?? []),
    timelygpt: upstream('timelygpt', scripts.timelygpt ?? []),
  };
  const gateway = createGateway({
    adapters: upstreams,
    breaker: options.breaker ?? { threshold: 100, recoveryMs: 60_000 },
    retry: options.retry ?? { max: 0, backoffMs: [0] },
    policy: 'retry-then-fallback',
    providerTimeoutMs: 60_000,
  });
  return {
    gateway,
    upstreams,
    generate: (providers, signal) =>
      gateway.generate({
        request: {
          task: 'notes',
          lang: 'en',
          system: 'You write study notes.',
          messages: [{ role: 'user', content: 'Light becomes chemical energy.' }],
          jsonSchema: { type: 'object' },
          maxOutputTokens: 256,
          maxAnswerChars: 256 * 16,
        },
        validate,
        chain: providers.map((provider) => ({ provider, apiKey: new Secret(`test-${provider}-key-behaviour`) })),
        ...(signal === undefined ? {} : { signal }),
      }),
  };
}

/** Lets scripted answers and actor messages run without moving the clock. */
export async function settle(): Promise<void> {
  await vi.advanceTimersByTimeAsync(0);
}
