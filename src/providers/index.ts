export { providerIds, tasks } from './types.js';
export type {
  ProviderId,
  Task,
  ChatMessage,
  GenerationRequest,
  TokenUsage,
  ProviderAnswer,
  ProviderAdapter,
} from './types.js';
