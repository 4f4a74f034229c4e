/**
 * A server span per HTTP request through `@fastify/otel`: named `<METHOD> <route>`, with
 * `http.request.method`, `http.route` and `http.response.status_code`; an incoming W3C `traceparent`
 * makes it a child of the caller's span. The plugin ends the span when the reply is sent, or for an event
 * stream (a hijacked reply) when the response ends (its `onResponse` hook).
 */
import { FastifyOtelInstrumentation } from '@fastify/otel';
import type { TracerProvider } from '@opentelemetry/api';
import type { FastifyInstance } from 'fastify';

/** Registers the server spans on `app` (the root instance, before any route). */
export async function registerServerSpans(app: FastifyInstance, provider: TracerProvider): Promise<void> {
  const instrumentation = new FastifyOtelInstrumentation({
    // One span per request: no child span per hook or handler (attempts sit right under the request).
    instrumentHooks: false,
    instrumentHandler: false,
    requestHook: (span, request) => {
      span.updateName(`${request.method} ${request.routeOptions.url ?? 'unknown route'}`);
    },
  });
  instrumentation.setTracerProvider(provider);
  await app.register(instrumentation.plugin());
}
