export { providerIds, tasks } from './types.js';
export type {
  ApiKey,
  ProviderId,
  Task,
  ChatMessage,
  GenerationRequest,
  TokenUsage,
  ProviderAnswer,
  ProviderAdapter,
  UpstreamStreamObserver,
} from './types.js';
export { createClaudeAdapter, classifyClaudeError } from './claude.js';
export { loadProviderSdks } from './claude-sdk.js';
export type { ClaudeAdapterOptions } from './claude.js';
export { createGptAdapter, classifyGptError } from './gpt.js';
export type { GptAdapterOptions } from './gpt.js';
export { createTimelyGptAdapter, classifyTimelyGptError } from './timelygpt/index.js';
export type { TimelyGptAdapter, TimelyGptAdapterOptions } from './timelygpt/index.js';
export { createAdapters } from './create-adapters.js';
export type { AdaptersConfig } from './create-adapters.js';
