/**
 * `GET /v1/keys/status` (docs/api.md "key health"): the caller's own keys, sent in the same headers as a
 * generation, each looked up by its salted fingerprint in its provider's key book. It answers for those
 * keys only (never another caller's), never echoes a key, and stores nothing: the fingerprint is made
 * for the lookup and dropped.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Gateway } from '../../actors/types.js';
import { errorClasses } from '../../errors/index.js';
import { providerIds } from '../../providers/index.js';
import { ApiError } from '../errors.js';
import { routeRateLimit, type RouteRateLimit } from '../rate-limit.js';
import { keyHeaders, readProviderKeys } from '../keys.js';
import { errorBodySchema, providerIdSchema } from '../schemas.js';
import { keySecurity } from '../openapi.js';

export interface KeyRoutesOptions {
  readonly gateway: Gateway;
  /** Lookups per address per window (RATE_LIMIT_KEY_STATUS); none when absent. */
  readonly rateLimit?: Pick<RouteRateLimit, 'max' | 'windowSeconds' | 'salt'>;
}

const keyStatusSchema = z
  .object({
    provider: providerIdSchema,
    state: z
      .enum(['healthy', 'quarantined', 'cooling'])
      .describe(
        'quarantined: auth, permission or quota (KEY_QUARANTINE_MS); cooling: rate limited (Retry-After).',
      ),
    errorClass: z
      .enum(errorClasses)
      .optional()
      .describe('The class that made the key unhealthy (docs/errors.md).'),
    until: z
      .string()
      .optional()
      .describe(
        'ISO 8601: calls with this key are skipped until then; the next one after it is let through.',
      ),
  })
  .describe("The health of the caller's key for one provider.");

export const keyRoutes: FastifyPluginAsyncZod<KeyRoutesOptions> = async (app, options) => {
  app.get(
    '/v1/keys/status',
    {
      // A key's state says whether it is genuine without a provider call: per address, whatever keys
      // it sends, so the route is no oracle for lists of candidate keys.
      config: {
        rateLimit:
          options.rateLimit === undefined
            ? false
            : routeRateLimit({ ...options.rateLimit, what: 'key status lookups', variable: 'RATE_LIMIT_KEY_STATUS', client: 'byAddress' }),
      },
      schema: {
        tags: ['providers'],
        summary:
          "The health of the caller's own provider keys: healthy, quarantined or cooling, why, and until when.",
        description: `Send the keys in the same headers as a generation (${Object.values(keyHeaders).join(', ')}); one item per key sent. Keys are never echoed.`,
        security: keySecurity,
        response: { 200: z.object({ providers: z.array(keyStatusSchema) }), 400: errorBodySchema },
      },
    },
    async (request) => {
      const keys = readProviderKeys(request.headers);
      const providers = providerIds.flatMap((id) => {
        const key = keys[id];
        if (key === undefined) return [];
        const status = options.gateway.keyHealth(id, key);
        return [
          {
            provider: id,
            state: status.state,
            ...(status.errorClass === undefined ? {} : { errorClass: status.errorClass }),
            ...(status.until === undefined ? {} : { until: new Date(status.until).toISOString() }),
          },
        ];
      });
      if (providers.length === 0) {
        throw new ApiError(
          'NO_PROVIDER_KEY',
          `No key header: send one of ${Object.values(keyHeaders).join(', ')}.`,
        );
      }
      return { providers };
    },
  );
};
