/** `GET /metrics`: the Prometheus text exposition (docs/api.md "Metrics"). */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ProviderMetrics } from '../../metrics/index.js';

export interface MetricsRoutesOptions {
  readonly metrics: ProviderMetrics;
  /**
   * While this says so (the instance is busy: load-gauge.ts), scrapes within `busyCacheMs` of a rendering
   * share it: a flood of keep-alive connections asking for `/metrics` had the whole registry rendered for
   * each, and every other client waited on it. An idle instance renders every scrape afresh.
   */
  readonly busy?: () => boolean;
  /** How long a rendering serves the scrapes of a busy instance (default 1 s). */
  readonly busyCacheMs?: number;
}

export const metricsRoutes: FastifyPluginAsyncZod<MetricsRoutesOptions> = async (app, options) => {
  const cacheMs = options.busyCacheMs ?? 1000;
  let last: { readonly at: number; readonly text: Promise<string> } | undefined;
  const render = (): Promise<string> => {
    const now = performance.now();
    if (last !== undefined && now - last.at < cacheMs && options.busy?.() === true) return last.text;
    const text = options.metrics.render();
    last = { at: now, text };
    // A failed rendering is not served again.
    text.catch(() => {
      if (last?.text === text) last = undefined;
    });
    return text;
  };
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['operations'],
        summary: 'Prometheus metrics: breaker state and transitions, calls, fallbacks, durations, tokens.',
        produces: ['text/plain'],
        response: { 200: z.string().describe('Prometheus text format 0.0.4') },
      },
    },
    async (_request, reply) => {
      const text = await render();
      return reply.type(options.metrics.contentType).send(text);
    },
  );
};
