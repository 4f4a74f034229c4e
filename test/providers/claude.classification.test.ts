import { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError } from '@anthropic-ai/sdk';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ErrorClass } from '../../src/errors/index.js';
import { classifyClaudeError } from '../../src/providers/index.js';
import { postFault, rejectionOf, useRig } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';
import { Secret } from '../../src/security/secret.js';
import { loadAnthropicSdk } from '../../src/providers/claude-sdk.js';

/** docs/errors.md's Anthropic rows, as exact wire bodies. */
function anthropicBody(type: string, message: string, details?: Record<string, unknown>): unknown {
  return { type: 'error', error: { type, message, ...(details ? { details } : {}) }, request_id: 'req_x' };
}

const rows: readonly [string, number, unknown, Record<string, string>, ErrorClass, number | undefined][] = [
  ['401 authentication_error', 401, anthropicBody('authentication_error', 'invalid x-api-key'), {}, 'auth', undefined],
  ['403 permission_error', 403, anthropicBody('permission_error', 'Your API key does not have permission to use the specified resource.'), {}, 'permission', undefined],
  ['403 region not supported', 403, anthropicBody('forbidden', 'Request not allowed'), {}, 'permission', undefined],
  ['400 credit balance too low', 400, anthropicBody('invalid_request_error', 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.'), {}, 'quota_exhausted', undefined],
  ['400 usage limits reached', 400, anthropicBody('invalid_request_error', 'You have reached your specified API usage limits. You will regain access on 2026-08-01 at 00:00 UTC.'), {}, 'quota_exhausted', undefined],
  ['402 billing_error', 402, anthropicBody('billing_error', 'Billing issue with your account.'), {}, 'quota_exhausted', undefined],
  ['429 enforced_spend_limit_reached', 429, anthropicBody('rate_limit_error', 'Spend limit reached.', { error_code: 'enforced_spend_limit_reached' }), {}, 'quota_exhausted', undefined],
  ['429 contract_spend_limit_reached', 429, anthropicBody('rate_limit_error', 'Contract spend limit reached.', { error_code: 'contract_spend_limit_reached' }), {}, 'quota_exhausted', undefined],
  ['429 rate_limit_error, retry-after', 429, anthropicBody('rate_limit_error', 'Number of requests has exceeded your per-minute rate limit'), { 'retry-after': '7' }, 'rate_limited', 7000],
  ['429 rate_limit_error, retry-after-ms', 429, anthropicBody('rate_limit_error', 'Number of requests has exceeded your per-minute rate limit'), { 'retry-after-ms': '1500', 'retry-after': '2' }, 'rate_limited', 1500],
  ['400 invalid_request_error', 400, anthropicBody('invalid_request_error', 'messages: at least one message is required'), {}, 'bad_request', undefined],
  ['409 conflict', 409, anthropicBody('invalid_request_error', 'Conflict'), {}, 'bad_request', undefined],
  ['422 unprocessable', 422, anthropicBody('invalid_request_error', 'Unprocessable'), {}, 'bad_request', undefined],
  ['400 prompt is too long', 400, anthropicBody('invalid_request_error', 'prompt is too long: 215000 tokens > 200000 maximum'), {}, 'context_too_long', undefined],
  ['413 request_too_large', 413, anthropicBody('request_too_large', 'Request exceeds the maximum allowed number of bytes.'), {}, 'context_too_long', undefined],
  ['404 not_found_error', 404, anthropicBody('not_found_error', 'model: claude-unknown'), {}, 'not_found', undefined],
  ['500 api_error', 500, anthropicBody('api_error', 'Internal server error'), {}, 'server_error', undefined],
  ['502 bad gateway', 502, anthropicBody('api_error', 'Bad gateway'), {}, 'server_error', undefined],
  ['503 unavailable', 503, anthropicBody('api_error', 'Service unavailable'), {}, 'server_error', undefined],
  ['529 overloaded_error', 529, anthropicBody('overloaded_error', 'Overloaded'), {}, 'overloaded', undefined],
  ['504 gateway timeout', 504, anthropicBody('timeout_error', 'Gateway timeout'), {}, 'timeout', undefined],
];

// The adapter imports @anthropic-ai/sdk on its first call; errors built here from the SDK's classes are
// classified as the adapter's would be once it has (src/providers/claude-sdk.ts).
beforeAll(async () => {
  await loadAnthropicSdk();
});

describe('classifyClaudeError over the wire (emulator → @anthropic-ai/sdk → adapter)', () => {
  const suite = useRig((emulator) => emulator.resetFaults());

  it.each(rows)('%s → its class', async (_label, status, body, headers, expected, retryAfterMs) => {
    await postFault(suite.rig.emulator, { provider: 'claude', fault: 'respond', count: 1, status, body, headers });
    const error = await rejectionOf(suite.rig.adapters.claude.generate(studyRequest(), new Secret('test-claude-key-0001'), openSignal()));
    const failure = suite.rig.adapters.claude.classify(error);
    expect(failure.errorClass).toBe(expected);
    expect(failure.httpStatus).toBe(status);
    expect(failure.retryAfterMs).toBe(retryAfterMs);
  });

  it.each([
    ['emu-bad-claude-0001', 'auth'],
    ['emu-ratelimit-claude-0001', 'rate_limited'],
    ['emu-quota-claude-0001', 'quota_exhausted'],
    ['emu-forbidden-claude-0001', 'permission'],
  ] as const)('key %s → %s', async (key, expected) => {
    const error = await rejectionOf(suite.rig.adapters.claude.generate(studyRequest(), new Secret(key), openSignal()));
    const failure = suite.rig.adapters.claude.classify(error);
    expect(failure.errorClass).toBe(expected);
    expect(failure.message).not.toContain(key);
    if (expected === 'rate_limited') expect(failure.retryAfterMs).toBe(7000);
  });

  it('answers with the model, usage and stop reason it reported', async () => {
    const answer = await suite.rig.adapters.claude.generate(studyRequest(), new Secret('test-claude-key-0001'), openSignal());
    expect(answer.model).toBe('claude-emu-1');
    expect(answer.usage.inputTokens).toBeGreaterThan(0);
    expect(answer.usage.outputTokens).toBeGreaterThan(0);
    expect(answer.truncated).toBe(false);
    expect(() => JSON.parse(answer.text) as unknown).not.toThrow();
  });

  it('reports a max_tokens stop as truncated', async () => {
    await postFault(suite.rig.emulator, { provider: 'claude', fault: 'truncated', count: 1 });
    const answer = await suite.rig.adapters.claude.generate(studyRequest(), new Secret('test-claude-key-0001'), openSignal());
    expect(answer.truncated).toBe(true);
  });

  it('reports null usage when the provider reports none', async () => {
    await postFault(suite.rig.emulator, {
      provider: 'claude',
      fault: 'respond',
      count: 1,
      status: 200,
      // A whole stream whose events carry no usage at all.
      body: [
        'event: message_start',
        'data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-other","content":[],"stop_reason":null,"stop_sequence":null}}',
        '',
        'event: content_block_delta',
        'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{}"}}',
        '',
        'event: message_delta',
        'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null}}',
        '',
        'event: message_stop',
        'data: {"type":"message_stop"}',
        '',
        '',
      ].join('\n'),
      headers: { 'content-type': 'text/event-stream' },
    });
    const answer = await suite.rig.adapters.claude.generate(studyRequest(), new Secret('test-claude-key-0001'), openSignal());
    expect(answer.usage).toEqual({ inputTokens: null, outputTokens: null });
    expect(answer.model).toBe('claude-other');
    expect(answer.text).toBe('{}');
  });
});

describe('classifyClaudeError on SDK errors without a status', () => {
  it.each([
    ['APIUserAbortError', new APIUserAbortError(), 'aborted'],
    ['APIConnectionTimeoutError', new APIConnectionTimeoutError(), 'timeout'],
    ['APIConnectionError (ECONNREFUSED)', new APIConnectionError({ cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) }), 'connection'],
    ['APIConnectionError (no cause)', new APIConnectionError({}), 'connection'],
  ] as const)('%s → %s', (_label, error, expected) => {
    expect(classifyClaudeError(error).errorClass).toBe(expected);
  });
});
