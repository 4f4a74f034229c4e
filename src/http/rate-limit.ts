/**
 * Per-client request rates through @fastify/rate-limit: the uploads and the job creations
 * one client may make per window (fixed windows), counted in this instance (the plugin's in-memory LRU
 * store of at most `cachedClients` clients) or, with REDIS_URL, across the fleet (its Redis store). The check runs in `onRequest`, before a byte of the body is read: a
 * refused upload is never parsed, hashed or extracted. A refusal is 429 `TOO_MANY_REQUESTS` with
 * `Retry-After` (the seconds left in the client's window) and `retryAfterSeconds` in the body.
 *
 * Who the client is follows docs/api.md: a job's client is the salted hash of its key headers (or, with no
 * key header, its remote address); an upload, which needs no key, is counted by remote address.
 */
import fastifyRateLimit from '@fastify/rate-limit';
import type { RateLimitOptions } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { clientIdOf } from './admission.js';
import { ApiError } from './errors.js';
import { readProviderKeys } from './keys.js';

/** Clients whose counts one limit remembers; past it the least recently seen is forgotten. */
const cachedClients = 10_000;

/**
 * Where the counts live when they are shared by a fleet (REDIS_URL): the fleet's Redis connection, a key
 * prefix, and the fleet's salt, so that one client has one id on every instance. The counts are then
 * fleet-wide: a client gets its rate once, not once per instance behind the load balancer. While Redis
 * cannot answer (its commands fail fast), requests are let through (`skipOnError`): the per-instance
 * bounds on work in flight (admission, JOB_MAX_JOBS_PER_CLIENT, the PDF queue) still hold.
 */
export interface SharedRateLimitStore {
  /** An ioredis client (the fleet's). */
  readonly redis: FastifyRateLimitRedis;
  /** Key prefix (`<REDIS_PREFIX>rate:`). */
  readonly prefix: string;
  /** The fleet's client-id salt. */
  readonly salt: string;
}

/** What @fastify/rate-limit needs of a Redis client (ioredis: `defineCommand` and the commands it defines). */
type FastifyRateLimitRedis = NonNullable<Parameters<typeof fastifyRateLimit>[1]>['redis'];

/** Registers the plugin for routes that ask for it (`config.rateLimit`); no route is limited by default. */
export async function registerRateLimits(app: FastifyInstance, shared?: SharedRateLimitStore): Promise<void> {
  await app.register(fastifyRateLimit, {
    global: false,
    cache: cachedClients,
    ...(shared === undefined ? {} : { redis: shared.redis, nameSpace: shared.prefix, skipOnError: true }),
  });
}

export interface RouteRateLimit {
  /** Requests one client may make per window; 0 turns the limit off. */
  readonly max: number;
  readonly windowSeconds: number;
  /** What is counted, in the refusal's message ("uploads"). */
  readonly what: string;
  /** The variable that sets `max`, named in the refusal's message. */
  readonly variable: string;
  /** Who the client is: `byKeys` (key headers, else address) or `byAddress`. */
  readonly client: 'byKeys' | 'byAddress';
  /** The salt of the client ids: the fleet's when the counts are shared (SharedRateLimitStore), else this process's. */
  readonly salt?: string;
}

function clientOf(client: RouteRateLimit['client'], salt: string | undefined): (request: FastifyRequest) => string {
  return client === 'byKeys'
    ? (request) => clientIdOf(readProviderKeys(request.headers), request.ip, salt)
    : (request) => clientIdOf({}, request.ip, salt);
}

/** The route's `config.rateLimit`: `false` (no limit) when `max` is 0. */
export function routeRateLimit(limit: RouteRateLimit): RateLimitOptions | false {
  if (limit.max === 0) return false;
  return {
    max: limit.max,
    timeWindow: limit.windowSeconds * 1000,
    keyGenerator: clientOf(limit.client, limit.salt),
    errorResponseBuilder: (_request, context) => {
      const retryAfterSeconds = Math.max(1, Math.ceil(context.ttl / 1000));
      return new ApiError(
        'TOO_MANY_REQUESTS',
        `This client made more than ${context.max} ${limit.what} in ${limit.windowSeconds} s (${limit.variable}, RATE_LIMIT_WINDOW_SECONDS); retry in ${retryAfterSeconds} s.`,
        { retryAfterSeconds },
        { limit: 'rate', what: limit.what.replaceAll(' ', '_') },
      );
    },
  };
}
