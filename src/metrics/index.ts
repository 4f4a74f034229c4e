export { createProviderMetrics } from './provider-metrics.js';
export type { ProviderMetrics, ProviderMetricsOptions } from './provider-metrics.js';
