/**
 * The OpenTelemetry SDK as this service runs it: a tracer provider of its own (never registered as the
 * global one, so libraries that trace through the global API, such as the Anthropic SDK, stay silent and
 * nothing they record can reach the export), a batch span processor and an OTLP/HTTP exporter. The W3C
 * trace-context propagator and the AsyncLocalStorage context manager are set globally, once: the server
 * spans read `traceparent` and follow a request through its awaits with them. Loaded only through
 * `loadTelemetry`.
 */
import { context, propagation } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { FastifyInstance } from 'fastify';
import type { Gateway } from '../actors/types.js';
import { traceGateway } from './attempt-spans.js';
import type { TelemetryConfig } from './config.js';
import { createJobTracer } from './job-spans.js';
import { registerServerSpans } from './server-spans.js';
import type { Telemetry } from './types.js';

/** The service's own instrumentation scope. */
const scopeName = 'study-helper';

let globalsSet = false;

/** The context manager and propagator, once per process (several apps in one test process share them). */
function setGlobals(): void {
  if (globalsSet) return;
  globalsSet = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
}

/** Starts exporting traces as `config` says. */
export function startTelemetry(config: TelemetryConfig): Telemetry {
  setGlobals();
  const exporterOptions = {
    url: config.tracesUrl,
    headers: { ...config.headers },
    timeoutMillis: config.exportTimeoutMs,
  };
  const exporter =
    config.protocol === 'http/json'
      ? new JsonTraceExporter(exporterOptions)
      : new ProtobufTraceExporter(exporterOptions);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ ...config.resourceAttributes, 'service.name': config.serviceName }),
    spanProcessors: [new BatchSpanProcessor(exporter, config.batch)],
  });
  const tracer = provider.getTracer(scopeName);
  return {
    registerServerSpans: (app: FastifyInstance) => registerServerSpans(app, provider),
    traceGateway: (gateway: Gateway) => traceGateway(gateway, tracer),
    jobs: createJobTracer(tracer),
    shutdown: () => provider.shutdown(),
  };
}
