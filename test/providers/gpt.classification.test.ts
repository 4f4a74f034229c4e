import { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError } from 'openai';
import { describe, expect, it } from 'vitest';
import type { ErrorClass } from '../../src/errors/index.js';
import { classifyGptError } from '../../src/providers/index.js';
import { postFault, rejectionOf, useRig } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';
import { Secret } from '../../src/security/secret.js';

/** docs/errors.md's OpenAI rows, as exact wire bodies. */
function openaiBody(message: string, type: string, code: string | null, param: string | null = null): unknown {
  return { error: { message, type, param, code } };
}

const rows: readonly [string, number, unknown, Record<string, string>, ErrorClass, number | undefined][] = [
  ['401 invalid_api_key', 401, openaiBody('Incorrect API key provided: sk-proj-ab*****************wxyz. You can find your API key at https://platform.openai.com/account/api-keys.', 'invalid_request_error', 'invalid_api_key'), {}, 'auth', undefined],
  ['403 unsupported region', 403, openaiBody('Country, region, or territory not supported', 'request_forbidden', 'unsupported_country_region_territory'), {}, 'permission', undefined],
  ['429 insufficient_quota', 429, openaiBody('You exceeded your current quota, please check your plan and billing details.', 'insufficient_quota', 'insufficient_quota'), {}, 'quota_exhausted', undefined],
  ['429 credit_balance_exhausted', 429, openaiBody('Your credit balance is exhausted.', 'insufficient_quota', 'credit_balance_exhausted'), {}, 'quota_exhausted', undefined],
  ['429 *_spend_limit_exceeded', 429, openaiBody('Monthly spend limit exceeded.', 'requests', 'organization_spend_limit_exceeded'), {}, 'quota_exhausted', undefined],
  ['429 *_usage_limit_exceeded', 429, openaiBody('Project usage limit exceeded.', 'requests', 'project_usage_limit_exceeded'), {}, 'quota_exhausted', undefined],
  ['429 rate_limit_exceeded, retry-after-ms', 429, openaiBody('Rate limit reached for requests. Please try again in 1.5s.', 'requests', 'rate_limit_exceeded'), { 'retry-after-ms': '1500' }, 'rate_limited', 1500],
  ['429 rate_limit_exceeded, retry-after', 429, openaiBody('Rate limit reached for requests.', 'requests', 'rate_limit_exceeded'), { 'retry-after': '20' }, 'rate_limited', 20000],
  ['400 invalid_request_error', 400, openaiBody("Invalid value for 'temperature'.", 'invalid_request_error', 'invalid_value', 'temperature'), {}, 'bad_request', undefined],
  ['409 conflict', 409, openaiBody('Conflict', 'invalid_request_error', null), {}, 'bad_request', undefined],
  ['422 unprocessable', 422, openaiBody('Unprocessable', 'invalid_request_error', null), {}, 'bad_request', undefined],
  ['400 context_length_exceeded', 400, openaiBody("This model's maximum context length is 128000 tokens.", 'invalid_request_error', 'context_length_exceeded', 'messages'), {}, 'context_too_long', undefined],
  ['413 request_too_large', 413, openaiBody('Request too large.', 'invalid_request_error', 'request_too_large'), {}, 'context_too_long', undefined],
  ['404 model_not_found', 404, openaiBody('The model `gpt-nope` does not exist or you do not have access to it.', 'invalid_request_error', 'model_not_found'), {}, 'not_found', undefined],
  ['500 server_error', 500, openaiBody('The server had an error while processing your request. Sorry about that!', 'server_error', null), {}, 'server_error', undefined],
  ['502 bad gateway', 502, openaiBody('Bad gateway.', 'server_error', null), {}, 'server_error', undefined],
  ['503 unavailable', 503, openaiBody('Service Unavailable', 'server_error', null), {}, 'server_error', undefined],
  ['503 server_is_overloaded', 503, openaiBody('The server is overloaded or not ready yet.', 'server_error', 'server_is_overloaded'), {}, 'overloaded', undefined],
  ['504 gateway timeout', 504, openaiBody('Gateway timeout.', 'server_error', null), {}, 'timeout', undefined],
];

describe('classifyGptError over the wire (emulator → openai → adapter)', () => {
  const suite = useRig((emulator) => emulator.resetFaults());

  it.each(rows)('%s → its class', async (_label, status, body, headers, expected, retryAfterMs) => {
    await postFault(suite.rig.emulator, { provider: 'gpt', fault: 'respond', count: 1, status, body, headers });
    const error = await rejectionOf(suite.rig.adapters.gpt.generate(studyRequest(), new Secret('test-gpt-key-0001'), openSignal()));
    const failure = suite.rig.adapters.gpt.classify(error);
    expect(failure.errorClass).toBe(expected);
    expect(failure.httpStatus).toBe(status);
    expect(failure.retryAfterMs).toBe(retryAfterMs);
    expect(failure.message).not.toMatch(/sk-proj|\*\*\*|wxyz/);
  });

  it.each([
    ['emu-bad-gpt-key-0001', 'auth'],
    ['emu-ratelimit-gpt-key-0001', 'rate_limited'],
    ['emu-quota-gpt-key-0001', 'quota_exhausted'],
    ['emu-forbidden-gpt-key-0001', 'permission'],
  ] as const)('key %s → %s, no key fragment in the message', async (key, expected) => {
    const error = await rejectionOf(suite.rig.adapters.gpt.generate(studyRequest(), new Secret(key), openSignal()));
    const failure = suite.rig.adapters.gpt.classify(error);
    expect(failure.errorClass).toBe(expected);
    expect(failure.message).not.toContain(key.slice(0, 8));
    expect(failure.message).not.toContain(key.slice(-4));
  });

  it('answers with the model, usage and finish reason it reported', async () => {
    const answer = await suite.rig.adapters.gpt.generate(studyRequest('fill', { count: 2 }), new Secret('test-gpt-key-0001'), openSignal());
    expect(answer.model).toBe('gpt-emu-1');
    expect(answer.usage.inputTokens).toBeGreaterThan(0);
    expect(answer.truncated).toBe(false);
    expect((JSON.parse(answer.text) as { questions: unknown[] }).questions).toHaveLength(2);
  });

  it('reports finish_reason length as truncated', async () => {
    await postFault(suite.rig.emulator, { provider: 'gpt', fault: 'truncated', count: 1 });
    const answer = await suite.rig.adapters.gpt.generate(studyRequest(), new Secret('test-gpt-key-0001'), openSignal());
    expect(answer.truncated).toBe(true);
  });
});

describe('classifyGptError on SDK errors without a status', () => {
  it.each([
    ['APIUserAbortError', new APIUserAbortError(), 'aborted'],
    ['APIConnectionTimeoutError', new APIConnectionTimeoutError(), 'timeout'],
    ['APIConnectionError (ECONNRESET)', new APIConnectionError({ cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) }), 'connection'],
  ] as const)('%s → %s', (_label, error, expected) => {
    expect(classifyGptError(error).errorClass).toBe(expected);
  });
});
