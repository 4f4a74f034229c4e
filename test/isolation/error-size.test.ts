/**
 * A refused body's error stays small: a 400 names at most three unknown fields and five issues, each cut
 * short, so it never echoes a request's keys or values wholesale (a 1.45 MB body of 130 000 unknown fields
 * earned a 1.58 MB message listing every one). And a body with more than 50 000 values in its arrays and
 * objects is refused before it is parsed (far more than any honest body: a notes result of 64 Ki
 * characters holds at most some 22 000).
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig } from '../http/support.js';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(): Promise<FastifyInstance> {
  const app = await buildApp({
    config: testConfig({ REFUSAL_DELAY_MS: '0' }),
    gateway: staticGateway(),
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
  });
  apps.push(app);
  return app;
}

const post = (app: FastifyInstance, payload: string) =>
  app.inject({ method: 'POST', url: '/v1/generate', payload, headers: { 'content-type': 'application/json', 'x-gpt-key': 'test-gpt-key-0001' } });

/** `count` unknown fields, each named `field-<n>-` and padded to `keyChars` characters. */
function unknownFields(count: number, keyChars = 12): Record<string, number> {
  return Object.fromEntries(Array.from({ length: count }, (_, index) => [`field-${index}-`.padEnd(keyChars, 'k'), index]));
}

describe('the error of a refused body', () => {
  it('names three of 20 000 unknown fields, says how many more, and stays under 2 KB', async () => {
    const app = await start();
    const body = JSON.stringify({ task: 'notes', text: 'Photosynthesis.', ...unknownFields(20_000) });
    const answer = await post(app, body);
    expect(answer.statusCode).toBe(400);
    expect(answer.json().error.code).toBe('INVALID_REQUEST');
    expect(answer.body.length).toBeLessThan(2048);
    const message: string = answer.json().error.message;
    expect(message).toContain('20000 unrecognized keys');
    expect(message).toContain('and 19997 more');
    expect(message.match(/field-\d+-/g)).toHaveLength(3);
  });

  it('cuts a long unknown field name, and an issue path through long keys', async () => {
    const app = await start();
    const longKey = 'x'.repeat(100_000);
    const answer = await post(app, JSON.stringify({ task: 'notes', text: 'Photosynthesis.', [longKey]: 1 }));
    expect(answer.statusCode).toBe(400);
    expect(answer.body.length).toBeLessThan(2048);
    expect(answer.json().error.message).toContain('Unrecognized key');
  });

  it('refuses a body of more than 50 000 values before parsing it, saying so', async () => {
    const app = await start();
    const answer = await post(app, JSON.stringify({ task: 'notes', text: 'Photosynthesis.', ...unknownFields(50_000, 8) }));
    expect(answer.statusCode).toBe(400);
    expect(answer.json().error.message).toBe('The JSON body holds more than 50000 values in its arrays and objects.');
    // Commas inside strings are text, not values.
    const prose = await post(app, JSON.stringify({ task: 'notes', text: ','.repeat(60_000), extra: 1 }));
    expect(prose.json().error.message).not.toContain('values');
  });
});
