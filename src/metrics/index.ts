export { createProviderMetrics } from './provider-metrics.js';
export type { ProviderMetrics } from './provider-metrics.js';
