export { createGateway } from './gateway.js';
export type { GatewayOptions } from './gateway.js';
export { fallbackPolicies } from './types.js';
export type {
  Attempt,
  BreakerAction,
  BreakerStateName,
  BreakerTransition,
  BreakerView,
  CallRecord,
  ChainLink,
  FallbackPolicy,
  Gateway,
  GenerateInput,
  GenerateOutcome,
  ProviderStats,
  ProviderStatus,
  Validation,
} from './types.js';
