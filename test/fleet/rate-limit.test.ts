/**
 * With REDIS_URL the request rates (RATE_LIMIT_JOBS, RATE_LIMIT_UPLOADS) are counted fleet-wide: a client
 * gets its rate once, not once per instance behind the load balancer. Two services in this process, one
 * real Redis, one prefix; the rule written out: a client may make RATE_LIMIT_JOBS job creations per window
 * whichever instances they reach, the next is 429 TOO_MANY_REQUESTS with Retry-After, another client is
 * untouched. Job creations with an empty body are refused 400 by the route, but counted first (the
 * limit runs before the body is read), which is all the count needs.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startService, type Service } from '../../src/http/service.js';
import { redisTestUrl, uniquePrefix } from './support.js';

const prefix = uniquePrefix('rate-limit');
const services: Service[] = [];

beforeAll(async () => {
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    PORT: '0',
    HOST: '127.0.0.1',
    REDIS_URL: redisTestUrl,
    REDIS_PREFIX: prefix,
    RATE_LIMIT_JOBS: '3',
    RATE_LIMIT_UPLOADS: '2',
    RATE_LIMIT_WINDOW_SECONDS: '60',
    REFUSAL_DELAY_MS: '0',
  });
  for (let index = 0; index < 2; index += 1) services.push(await startService(config, { log: { level: 'silent' } }));
}, 60_000);

afterAll(async () => {
  await Promise.all(services.map((service) => service.close()));
  const redis = new Redis(redisTestUrl);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

async function createJob(service: Service | undefined, key: string): Promise<Response> {
  if (service === undefined) throw new Error('no service');
  return fetch(`${service.url}/v1/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gpt-key': key }, body: '{}' });
}

describe('request rates shared by the fleet (REDIS_URL)', () => {
  it('counts one client’s job creations across instances: the fourth of three per window is refused wherever it lands', async () => {
    const [first, second] = services;
    const key = 'fleet-rate-gpt-key-00001';
    const statuses = [
      (await createJob(first, key)).status,
      (await createJob(second, key)).status,
      (await createJob(first, key)).status,
    ];
    // Counted, then refused by the route for the empty body.
    expect(statuses).toEqual([400, 400, 400]);
    const fourth = await createJob(second, key);
    expect(fourth.status).toBe(429);
    const retryAfter = Number(fourth.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    const body = (await fourth.json()) as { error: { code: string; retryAfterSeconds: number } };
    expect(body.error.code).toBe('TOO_MANY_REQUESTS');
    expect(body.error.retryAfterSeconds).toBe(retryAfter);
    // Refused on the other instance too; another client is not.
    expect((await createJob(first, key)).status).toBe(429);
    expect((await createJob(first, 'fleet-rate-gpt-key-00002')).status).toBe(400);
  });

  it('counts one address’s uploads across instances', async () => {
    const [first, second] = services;
    // A file that is no PDF: counted, then refused by the route (415 NOT_A_PDF).
    const upload = (service: Service | undefined): Promise<Response> => {
      const form = new FormData();
      form.append('file', new Blob(['not a pdf at all'], { type: 'application/pdf' }), 'a.pdf');
      return fetch(`${service?.url ?? ''}/v1/documents`, { method: 'POST', body: form });
    };
    const statuses = [];
    for (const service of [first, second, first, second]) statuses.push((await upload(service)).status);
    expect(statuses.slice(2)).toEqual([429, 429]);
    expect(statuses.slice(0, 2)).not.toContain(429);
  });

  it('keeps no key and no address in Redis: the counts are under salted ids', async () => {
    const redis = new Redis(redisTestUrl);
    try {
      const keys = await redis.keys(`${prefix}rate:*`);
      expect(keys.length).toBeGreaterThan(0);
      for (const name of keys) {
        expect(name).not.toContain('fleet-rate-gpt-key');
        expect(name).not.toContain('127.0.0.1');
        // <prefix>rate:<method><route>-<client id>
        expect(name.slice(prefix.length)).toMatch(/^rate:POST\/v1\/(jobs|documents)-(keys|address):[0-9a-f]{24}$/);
      }
    } finally {
      await redis.quit();
    }
  });

  it('lets requests through, never a 500, while Redis cannot answer (the in-flight bounds still hold)', async () => {
    const config = loadConfig({
      LOG_LEVEL: 'silent',
      PORT: '0',
      HOST: '127.0.0.1',
      REDIS_URL: 'redis://127.0.0.1:1',
      REDIS_PREFIX: uniquePrefix('rate-limit-down'),
      RATE_LIMIT_JOBS: '1',
      REFUSAL_DELAY_MS: '0',
    });
    const alone = await startService(config, { log: { level: 'silent' } });
    try {
      const statuses = [];
      for (let index = 0; index < 3; index += 1) statuses.push((await createJob(alone, 'fleet-rate-gpt-key-00003')).status);
      expect(statuses).toEqual([400, 400, 400]);
    } finally {
      await alone.close();
    }
  }, 30_000);
});
