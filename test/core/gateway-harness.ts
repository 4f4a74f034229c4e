import { createGateway, type GatewayOptions } from '../../src/actors/gateway.js';
import type { ChainLink, Gateway, GenerateInput, Validation } from '../../src/actors/types.js';
import type { GenerationRequest, ProviderAnswer, ProviderId } from '../../src/providers/index.js';
import { scriptedAdapter, type ScriptedAdapter } from './scripted-adapter.js';
import { Secret } from '../../src/security/secret.js';

/** Obviously fake keys: the tests check none of them ever leaks. */
export const keys: Readonly<Record<ProviderId, string>> = {
  claude: 'test-claude-key-0001',
  gpt: 'test-gpt-key-0001',
  timelygpt: 'test-timelygpt-key-0001',
};

export const request: GenerationRequest = {
  task: 'notes',
  lang: 'en',
  system: 'You write study notes.',
  messages: [{ role: 'user', content: 'Photosynthesis turns light into chemical energy.' }],
  jsonSchema: { type: 'object' },
  maxOutputTokens: 512,
  maxAnswerChars: 512 * 16,
};

export const validAnswer = '{"ok":true}';
export const invalidAnswer = '{"ok":false}';

/** Valid when the answer is JSON with `ok: true`. */
export function validate(answer: ProviderAnswer): Validation<{ ok: true }> {
  try {
    const parsed: unknown = JSON.parse(answer.text);
    if (typeof parsed === 'object' && parsed !== null && 'ok' in parsed && parsed.ok === true) {
      return { ok: true, value: { ok: true } };
    }
    return { ok: false, errors: ['ok: expected true'] };
  } catch {
    return { ok: false, errors: ['not JSON'] };
  }
}

export interface Harness {
  readonly gateway: Gateway;
  readonly adapters: Readonly<Record<ProviderId, ScriptedAdapter>>;
}

export type HarnessOptions = Partial<Omit<GatewayOptions, 'adapters'>>;

export function startHarness(options: HarnessOptions = {}): Harness {
  const adapters = {
    claude: scriptedAdapter('claude', validAnswer),
    gpt: scriptedAdapter('gpt', validAnswer),
    timelygpt: scriptedAdapter('timelygpt', validAnswer),
  };
  const gateway = createGateway({
    adapters,
    breaker: { threshold: 3, recoveryMs: 10_000 },
    retry: { max: 2, backoffMs: [1000, 2000] },
    policy: 'retry-then-fallback',
    providerTimeoutMs: 5000,
    ...options,
  });
  return { gateway, adapters };
}

function chainOf(...providers: ProviderId[]): ChainLink[] {
  return providers.map((provider) => ({ provider, apiKey: new Secret(keys[provider]) }));
}

export function input(
  providers: ProviderId[],
  more: Partial<GenerateInput<{ ok: true }>> = {},
): GenerateInput<{ ok: true }> {
  return { request, validate, chain: chainOf(...providers), ...more };
}
