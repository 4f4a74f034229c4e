export { providerIds, tasks } from './types.js';
export type {
  ApiKey,
  ProviderId,
  Task,
  GenerationRequest,
  TokenUsage,
  ProviderAnswer,
  ProviderAdapter,
  UpstreamStreamObserver,
} from './types.js';
export { createClaudeAdapter, classifyClaudeError } from './claude.js';
export { loadProviderSdks } from './claude-sdk.js';
export { createGptAdapter, classifyGptError } from './gpt.js';
export { createTimelyGptAdapter, classifyTimelyGptError } from './timelygpt/index.js';
export type { TimelyGptAdapter } from './timelygpt/index.js';
export { createAdapters } from './create-adapters.js';
