export { readTelemetryConfig, loggableTelemetry, telemetryVariableNames } from './config.js';
export type { TelemetryConfig } from './config.js';
export { loadTelemetry } from './load.js';
