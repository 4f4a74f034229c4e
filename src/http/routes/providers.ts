/**
 * `GET /v1/providers` reads the live breaker actors; `POST /v1/providers/:id/breaker` is the operator's
 * control (docs/api.md): without ADMIN_TOKEN configured the route does not exist (404 `NOT_FOUND`), a missing
 * or wrong bearer token is 401 `ADMIN_AUTH_REQUIRED`, an unknown provider 404 `PROVIDER_NOT_FOUND`, an
 * unknown action 400 `INVALID_REQUEST`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Gateway } from '../../actors/types.js';
import { providerIds } from '../../providers/index.js';
import type { ProviderId } from '../../providers/index.js';
import { ApiError } from '../errors.js';
import { errorBodySchema, providerStatusSchema } from '../schemas.js';
import { adminSecurity } from '../openapi.js';

export interface ProvidersRoutesOptions {
  readonly gateway: Gateway;
  /** Unset: the breaker control route answers 404. */
  readonly adminToken: string | undefined;
}

const breakerBodySchema = z.strictObject({
  action: z.enum(['reset', 'forceOpen', 'release']).describe('reset: closed, count cleared; forceOpen: open until released; release: back to normal (closed).'),
});

/** Compares digests so neither the length nor a prefix of the token leaks through timing. */
function tokenMatches(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  return /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
}

function isProviderId(value: string): value is ProviderId {
  return (providerIds as readonly string[]).includes(value);
}

export const providersRoutes: FastifyPluginAsyncZod<ProvidersRoutesOptions> = async (app, options) => {
  const { gateway, adminToken } = options;

  app.get(
    '/v1/providers',
    {
      schema: {
        tags: ['providers'],
        summary: 'Live breaker state and call statistics of every provider.',
        response: { 200: z.object({ providers: z.array(providerStatusSchema) }) },
      },
    },
    async () => ({ providers: [...gateway.providers()] }),
  );

  app.post(
    '/v1/providers/:id/breaker',
    {
      schema: {
        tags: ['providers'],
        summary: 'Operator control of a provider breaker. Needs Authorization: Bearer <ADMIN_TOKEN>.',
        params: z.object({ id: z.string().describe('A provider id: claude, gpt or timelygpt.') }),
        body: breakerBodySchema,
        security: adminSecurity,
        response: {
          200: providerStatusSchema,
          400: errorBodySchema,
          401: errorBodySchema,
          404: errorBodySchema,
          // Its address past its share of JSON body bytes (body-share.ts).
          429: errorBodySchema,
        },
      },
      // Authorization and the provider id are checked before the body, so that an unauthenticated
      // caller learns nothing from validation messages.
      onRequest: async (request) => {
        if (adminToken === undefined) {
          throw new ApiError('NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0] ?? ''}.`);
        }
        const given = bearerToken(request);
        if (given === undefined || !tokenMatches(given, adminToken)) {
          throw new ApiError('ADMIN_AUTH_REQUIRED', 'This route needs Authorization: Bearer <ADMIN_TOKEN>.');
        }
      },
      preValidation: async (request) => {
        const { id } = request.params as { id?: unknown };
        if (typeof id !== 'string' || !isProviderId(id)) {
          throw new ApiError('PROVIDER_NOT_FOUND', `Unknown provider; known providers: ${providerIds.join(', ')}.`);
        }
      },
    },
    async (request) => {
      const id = request.params.id;
      if (!isProviderId(id)) throw new ApiError('PROVIDER_NOT_FOUND', `Unknown provider; known providers: ${providerIds.join(', ')}.`);
      request.log.info({ provider: id, action: request.body.action }, 'breaker control');
      return gateway.controlBreaker(id, request.body.action);
    },
  );
};
