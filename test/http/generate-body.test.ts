/**
 * The 200 body of POST /v1/generate is written without a second pass through
 * its response schema (src/http/schemas.ts `alreadyValidated`), so it must already be exactly what that
 * schema would let through. Real service, real SDKs, the emulator; each provider, each task, a fallback.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generateResponseSchema } from '../../src/http/routes/generate.js';
import { postJson, startHarness, studyText } from './blackbox-support.js';
import type { Harness } from './blackbox-support.js';

let harness: Harness;

beforeAll(async () => {
  harness = await startHarness();
});

afterAll(async () => {
  await harness.close();
});

beforeEach(async () => {
  await harness.reset();
});

const keys = { 'x-claude-key': 'body-test-Qz8Lm3Rt7Wv2', 'x-gpt-key': 'body-test-Hb4Nc9Xs1Kd6', 'x-timelygpt-key': 'body-test-Pw5Jf2Vy8Mg3' };

/** What the zod serializer would have sent: the body through the schema (unknown keys stripped; no codecs, so parse is encode). */
function throughSchema(body: unknown): unknown {
  const encoded = generateResponseSchema.safeParse(body);
  if (!encoded.success) throw new Error(`the body does not match its schema: ${encoded.error.message}`);
  return JSON.parse(JSON.stringify(encoded.data));
}

describe('POST /v1/generate 200 body, written without a second schema pass', () => {
  it.each([
    ['claude', 'notes'],
    ['gpt', 'mcq'],
    ['timelygpt', 'fill'],
  ] as const)('%s %s: the body is exactly what the response schema lets through', async (provider, task) => {
    const answer = await postJson(`${harness.url}/v1/generate`, { task, text: studyText, providers: [provider], options: { lang: 'en', ...(task === 'notes' ? {} : { count: 3 }) } }, keys);
    expect(answer.status).toBe(200);
    expect(throughSchema(answer.body)).toEqual(answer.body);
  });

  it('a fallback after a failed attempt: attempts with their messages stay within the schema too', async () => {
    harness.fault({ provider: 'claude', fault: 'http500' });
    const answer = await postJson(`${harness.url}/v1/generate`, { task: 'notes', text: studyText, providers: ['claude', 'gpt'], options: { lang: 'en' } }, keys);
    expect(answer.status).toBe(200);
    const body = answer.body as { meta: { fallback: boolean; attempts: unknown[] } };
    expect(body.meta.fallback).toBe(true);
    expect(body.meta.attempts.length).toBeGreaterThan(1);
    expect(throughSchema(answer.body)).toEqual(answer.body);
  });
});
