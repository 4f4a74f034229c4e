import { createClaudeAdapter } from './claude.js';
import { createGptAdapter } from './gpt.js';
import { createTimelyGptAdapter } from './timelygpt/index.js';
import type { ProviderAdapter, ProviderId } from './types.js';

export interface AdaptersConfig {
  readonly anthropicBaseUrl: string;
  /** Includes `/v1`. */
  readonly openaiBaseUrl: string;
  readonly timelygptBaseUrl: string;
  readonly claudeModel: string;
  readonly gptModel: string;
  readonly timelygptModel: string;
  readonly timelygptTokenTtlMs: number;
}

/** One adapter per provider, from the service configuration (docs/api.md "Configuration"). */
export function createAdapters(config: AdaptersConfig): Record<ProviderId, ProviderAdapter> {
  return {
    claude: createClaudeAdapter({ baseUrl: config.anthropicBaseUrl, model: config.claudeModel }),
    gpt: createGptAdapter({ baseUrl: config.openaiBaseUrl, model: config.gptModel }),
    timelygpt: createTimelyGptAdapter({
      baseUrl: config.timelygptBaseUrl,
      model: config.timelygptModel,
      tokenTtlMs: config.timelygptTokenTtlMs,
    }),
  };
}
