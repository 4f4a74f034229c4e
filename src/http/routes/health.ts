/**
 * `GET /healthz` (the process is alive) and `GET /readyz` (ready to serve; reports the state store and any
 * store that cannot write).
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';

export interface Readiness {
  /** Where breaker state and documents live. */
  readonly store: 'memory' | 'redis';
  /** False when the store is configured but unreachable (the service falls back to in-process state). */
  readonly storeReachable: boolean;
  /** The stores whose last write failed, with the cause (a full disk, a read-only folder, Redis refusing). */
  readonly failures?: readonly { readonly store: string; readonly reason: string }[];
}

export interface HealthRoutesOptions {
  readonly readiness: () => Promise<Readiness>;
}

/** `pid` tells the workers of one port apart (WORKERS=n). */
const healthSchema = z.object({ status: z.literal('ok'), uptimeSeconds: z.number(), pid: z.number().int() });
const readySchema = z.looseObject({
  status: z.enum(['ready', 'degraded']),
  store: z.enum(['memory', 'redis']),
  storeReachable: z.boolean(),
  failures: z.array(z.object({ store: z.string(), reason: z.string() })).optional(),
});

export const healthRoutes: FastifyPluginAsyncZod<HealthRoutesOptions> = async (app, options) => {
  app.get(
    '/healthz',
    { schema: { tags: ['health'], summary: 'The process is alive.', response: { 200: healthSchema } } },
    async () => ({ status: 'ok' as const, uptimeSeconds: Math.round(process.uptime()), pid: process.pid }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['health'],
        summary:
          'Ready to serve; reports the state store ("degraded": the store is unreachable and state is in-process, or ' +
          'a store cannot write: `failures` names each store and the cause).',
        response: { 200: readySchema },
      },
    },
    async () => {
      const readiness = await options.readiness();
      const failures = readiness.failures ?? [];
      return {
        status: readiness.storeReachable && failures.length === 0 ? ('ready' as const) : ('degraded' as const),
        store: readiness.store,
        storeReachable: readiness.storeReachable,
        ...(failures.length === 0 ? {} : { failures: [...failures] }),
      };
    },
  );
};
