/** `GET /metrics`: the Prometheus text exposition (docs/api.md "Metrics"). */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ProviderMetrics } from '../../metrics/index.js';

export interface MetricsRoutesOptions {
  readonly metrics: ProviderMetrics;
}

export const metricsRoutes: FastifyPluginAsyncZod<MetricsRoutesOptions> = async (app, options) => {
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
      const text = await options.metrics.render();
      return reply.type(options.metrics.contentType).send(text);
    },
  );
};
