/**
 * End-to-end plumbing: the real actor system (createGateway) running the real adapters
 * (createAdapters: @anthropic-ai/sdk, openai, TimelyGPT over fetch) against the emulator on 127.0.0.1.
 */
import { createGateway, type GatewayOptions } from '../../src/actors/gateway.js';
import type { ChainLink, Gateway } from '../../src/actors/types.js';
import type { Emulator } from '../../src/emulator/index.js';
import { createAdapters, providerIds, type ProviderId } from '../../src/providers/index.js';
import { Secret } from '../../src/security/secret.js';

/** Obviously fake keys the emulator accepts. */
export const keys: Readonly<Record<ProviderId, string>> = {
  claude: 'test-claude-key-0001',
  gpt: 'test-gpt-key-0001',
  timelygpt: 'test-timelygpt-key-0001',
};

/** A key the emulator answers with a per-key fault (docs/emulator.md "Faults per key"). */
export function prefixedKey(prefix: string, provider: ProviderId): string {
  return `${prefix}${provider}-0001`;
}

// recoveryMs: long enough that the three "open" calls finish inside it on a loaded machine.
export const breakerSettings = { threshold: 3, recoveryMs: 1500 } as const;

export function startGateway(emulator: Emulator, options: Partial<Omit<GatewayOptions, 'adapters'>> = {}): Gateway {
  const adapters = createAdapters({
    anthropicBaseUrl: emulator.anthropicBaseUrl,
    openaiBaseUrl: emulator.openaiBaseUrl,
    timelygptBaseUrl: emulator.timelygptBaseUrl,
    claudeModel: 'claude-emu-1',
    gptModel: 'gpt-emu-1',
    timelygptModel: 'timely-emu-1',
    timelygptTokenTtlMs: 3_300_000,
  });
  return createGateway({
    adapters,
    breaker: breakerSettings,
    retry: { max: 0, backoffMs: [5, 10] },
    policy: 'retry-then-fallback',
    providerTimeoutMs: 3000,
    ...options,
  });
}

/** The provider after `provider` in the fixed order: the fallback target of a two-link chain. */
export function nextProvider(provider: ProviderId): ProviderId {
  const index = providerIds.indexOf(provider);
  return providerIds[(index + 1) % providerIds.length] ?? 'claude';
}

/** `[provider, its fallback]`, both with accepted keys unless `key` overrides the first. */
export function chainOf(provider: ProviderId, key: string = keys[provider]): ChainLink[] {
  const other = nextProvider(provider);
  return [
    { provider, apiKey: new Secret(key) },
    { provider: other, apiKey: new Secret(keys[other]) },
  ];
}

/** Generation calls the emulator has seen for one provider, read over the control endpoint. */
export async function upstreamCalls(emulator: Emulator, provider: ProviderId): Promise<number> {
  const response = await fetch(`${emulator.url}/_emulator/stats`);
  const stats = (await response.json()) as Record<ProviderId, { calls: number; authCalls: number }>;
  return stats[provider].calls;
}
