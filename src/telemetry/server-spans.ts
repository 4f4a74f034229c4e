/**
 * A server span per HTTP request through `@fastify/otel`: named `<METHOD> <route>`, with
 * `http.request.method`, `http.route` and `http.response.status_code`; an incoming W3C `traceparent`
 * makes it a child of the caller's span. The plugin ends the span when the reply is sent, or for an event
 * stream (a hijacked reply) when the response ends (its `onResponse` hook). `url.path` is the URL with
 * anything key-shaped taken out, as the request log line has it.
 */
import { FastifyOtelInstrumentation } from '@fastify/otel';
import type { TracerProvider } from '@opentelemetry/api';
import type { FastifyInstance } from 'fastify';
import { safeUrl } from '../security/safe-url.js';

/** Registers the server spans on `app` (the root instance, before any route). */
export async function registerServerSpans(app: FastifyInstance, provider: TracerProvider): Promise<void> {
  const instrumentation = new FastifyOtelInstrumentation({
    // One span per request: no child span per hook or handler (attempts sit right under the request).
    instrumentHooks: false,
    instrumentHandler: false,
    requestHook: (span, request) => {
      span.updateName(`${request.method} ${request.routeOptions.url ?? 'unknown route'}`);
      // The plugin records the URL as sent; a key put in its query or path (by mistake, or to plant it in
      // our traces) must not reach the collector, so the span carries the URL the request log shows.
      span.setAttribute('url.path', safeUrl(request.url));
    },
  });
  instrumentation.setTracerProvider(provider);
  await app.register(instrumentation.plugin());
}
