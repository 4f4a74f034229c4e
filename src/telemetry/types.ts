import type { FastifyInstance } from 'fastify';
import type { Gateway } from '../actors/types.js';
import type { JobTracer } from '../jobs/index.js';

/** The service's tracing, loaded only when an OTLP endpoint is configured (docs/telemetry.md). */
export interface Telemetry {
  /** A server span per request on every route: registered on the root instance before any route. */
  registerServerSpans(app: FastifyInstance): Promise<void>;
  /** The gateway whose every provider attempt is a span under the caller's active span. */
  traceGateway(gateway: Gateway): Gateway;
  /** Spans for each job's stages and parts. */
  readonly jobs: JobTracer;
  /** Exports the spans still queued, then stops (the app's close). */
  shutdown(): Promise<void>;
}
