/**
 * Property: whatever body a client throws at a JSON endpoint, the service answers without a 5xx, without
 * hanging, and with the contract error body whose code and status come from the registry.
 */
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorCodes } from '../../src/http/errors.js';
import { adminToken, startHarness, studyText } from './blackbox-support.js';
import type { Harness } from './blackbox-support.js';

let harness: Harness;
let app: FastifyInstance;

beforeAll(async () => {
  // A valid body reaches the emulator, which refuses its key at once; on a loaded machine that answer
  // can take longer than the black-box harness's 500 ms PROVIDER_TIMEOUT_MS, and a 504 from a slow
  // provider is not what this property judges.
  harness = await startHarness({ PROVIDER_TIMEOUT_MS: '30000' });
  app = harness.service.app;
});

afterAll(async () => {
  await harness.close();
});

interface Answer {
  readonly statusCode: number;
  readonly body: string;
}

function assertContract(response: Answer): void {
  expect(response.statusCode, response.body).toBeLessThan(500);
  if (response.statusCode < 400) return;
  const body = JSON.parse(response.body) as { error?: { code?: unknown; message?: unknown } };
  const code = body.error?.code;
  expect(typeof code, response.body).toBe('string');
  expect(typeof body.error?.message).toBe('string');
  expect(Object.hasOwn(errorCodes, code as string), `${String(code)} is in the registry`).toBe(true);
  expect(errorCodes[code as keyof typeof errorCodes].status).toBe(response.statusCode);
}

const validGenerate = { task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en', count: 3 } };

/** A valid body with one thing broken: a field removed, replaced by anything, or one added. */
const mutatedGenerate = fc.oneof(
  fc.constantFrom('task', 'text', 'providers', 'options').map((field) => {
    const copy: Record<string, unknown> = { ...validGenerate };
    delete copy[field];
    return copy;
  }),
  fc.tuple(fc.constantFrom('task', 'text', 'documentId', 'providers', 'options'), fc.jsonValue()).map(([field, value]) => ({ ...validGenerate, [field]: value })),
  fc.tuple(fc.constantFrom('lang', 'count', 'notes', 'extra'), fc.jsonValue()).map(([field, value]) => ({ ...validGenerate, options: { ...validGenerate.options, [field]: value } })),
  fc.tuple(fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue()).map(([field, value]) => ({ ...validGenerate, [field]: value })),
  fc.array(fc.string({ maxLength: 12 }), { maxLength: 5 }).map((providers) => ({ ...validGenerate, providers })),
  fc.integer().map((count) => ({ ...validGenerate, options: { lang: 'en', count } })),
);

const anyBody = fc.oneof(fc.jsonValue(), mutatedGenerate);

/** Bodies as bytes: JSON of the above, or arbitrary text that is probably not JSON at all. */
const payload = fc.oneof(
  { weight: 4, arbitrary: anyBody.map((value) => JSON.stringify(value) ?? 'null') },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: anyBody.map((value) => (JSON.stringify(value) ?? 'null').slice(0, -1)) },
);

const contentType = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', undefined);

/** A key the emulator refuses at once, so a body that happens to be valid still ends quickly (401). */
const keyHeaders = fc.constantFrom<Record<string, string>>({}, { 'x-claude-key': 'emu-bad-fuzz-0001' });

describe('fuzzed bodies', () => {
  it('POST /v1/generate never answers a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(payload, contentType, keyHeaders, async (body, type, keys) => {
        const response = await app.inject({
          method: 'POST',
          url: '/v1/generate',
          headers: { ...keys, ...(type === undefined ? {} : { 'content-type': type }) },
          payload: body,
        });
        assertContract(response);
      }),
      { numRuns: 300 },
    );
  });

  it('POST /v1/providers/:id/breaker never answers a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(payload, fc.constantFrom('claude', 'gpt', 'gemini', '%00', 'a'.repeat(300)), fc.boolean(), async (body, id, authorized) => {
        const response = await app.inject({
          method: 'POST',
          url: `/v1/providers/${encodeURIComponent(id)}/breaker`,
          headers: { 'content-type': 'application/json', ...(authorized ? { authorization: `Bearer ${adminToken}` } : {}) },
          payload: body,
        });
        assertContract(response);
      }),
      { numRuns: 200 },
    );
    await harness.reset();
  });

  it('POST /v1/documents refuses JSON and text bodies with the contract body', async () => {
    await fc.assert(
      fc.asyncProperty(payload, contentType, async (body, type) => {
        const response = await app.inject({
          method: 'POST',
          url: '/v1/documents',
          headers: type === undefined ? {} : { 'content-type': type },
          payload: body,
        });
        assertContract(response);
        expect(response.statusCode).toBeGreaterThanOrEqual(400);
      }),
      { numRuns: 100 },
    );
  });

  it('GET endpoints ignore or refuse junk query strings without a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('/healthz', '/readyz', '/v1/providers', '/metrics', '/openapi.json', '/v1/generate'), fc.string({ maxLength: 40 }), async (path, query) => {
        const response = await app.inject({ method: 'GET', url: `${path}?${encodeURIComponent(query)}=${encodeURIComponent(query)}` });
        assertContract(response);
      }),
      { numRuns: 100 },
    );
  });
});
