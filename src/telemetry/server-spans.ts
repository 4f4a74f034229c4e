/**
 * A server span per HTTP request through `@fastify/otel`: named `<METHOD> <route>`, with
 * `http.request.method`, `http.route` and `http.response.status_code`; an incoming W3C `traceparent`
 * makes it a child of the caller's span. The plugin ends the span when the reply is sent; an event stream
 * (a hijacked reply) is never "sent", so its span ends when its socket's response closes.
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
  app.addHook('onRequest', (request, reply, done) => {
    const { span } = request.opentelemetry();
    if (span !== null) {
      reply.raw.once('close', () => {
        if (!span.isRecording()) return;
        span.setAttribute('http.response.status_code', reply.raw.statusCode);
        span.end();
      });
    }
    done();
  });
}
