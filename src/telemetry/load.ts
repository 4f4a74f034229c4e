/**
 * The one door to the tracing SDK: a dynamic import, taken only when an OTLP endpoint is configured. A
 * service without one never loads an OpenTelemetry package, so tracing off costs nothing per request.
 */
import type { TelemetryConfig } from './config.js';
import type { Telemetry } from './types.js';

/** Loads the OpenTelemetry SDK and starts exporting traces as `config` says. */
export async function loadTelemetry(config: TelemetryConfig): Promise<Telemetry> {
  const { startTelemetry } = await import('./sdk.js');
  return startTelemetry(config);
}
