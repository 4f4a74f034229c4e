/**
 * `@anthropic-ai/sdk`, imported when something names Claude: its memory (RSS and heap, docs/performance.md) is
 * what a process whose requests never name Claude does not pay for. The service awaits `loadProviderSdks` for
 * its default order before it listens (src/http/service.ts); otherwise it is awaited once a request naming
 * Claude has been admitted, before its first call (and so before the provider actor's deadline) starts; the
 * adapter awaits the same import itself if it is called before that.
 */
import type { ProviderId } from './types.js';

/** The SDK's module namespace. */
export type AnthropicSdk = typeof import('@anthropic-ai/sdk');

let loaded: AnthropicSdk | undefined;
let loading: Promise<AnthropicSdk> | undefined;

/** The SDK once its import has finished; `undefined` before (no error of it can exist yet). */
export function anthropicSdkIfLoaded(): AnthropicSdk | undefined {
  return loaded;
}

/** Imports the SDK once per process; a failed import is tried again on the next call. */
export function loadAnthropicSdk(): Promise<AnthropicSdk> {
  loading ??= import('@anthropic-ai/sdk').then(
    (module) => (loaded = module),
    (error: unknown) => {
      loading = undefined;
      throw error;
    },
  );
  return loading;
}

/**
 * Makes sure the SDKs of a chain's providers are loaded: `undefined` when they already are (nothing to
 * wait for on the hot path), else a promise that settles once they are.
 */
export function loadProviderSdks(
  chain: readonly { readonly provider: ProviderId }[],
): Promise<void> | undefined {
  if (loaded !== undefined) return undefined;
  for (const link of chain) {
    if (link.provider === 'claude') return loadAnthropicSdk().then(() => undefined);
  }
  return undefined;
}
