/**
 * docs/errors.md's classification rules one signal at a time. The wire fixtures of the per-provider tests
 * carry two signals each (a 529 that also says `overloaded_error`), so either rule could go missing
 * unnoticed; here every fixture carries exactly the signal its rule reads, and the expected class is
 * written out from docs/errors.md, never computed by the code under test.
 */
import {
  APIConnectionError as AnthropicConnectionError,
  APIError as AnthropicAPIError,
} from '@anthropic-ai/sdk';
import { APIConnectionError as OpenAIConnectionError, APIError as OpenAIAPIError } from 'openai';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ErrorClass } from '../../src/errors/index.js';
import {
  classifyTransportError,
  classifyUnknown,
  classOfStatus,
  failure,
  retryAfterMsOf,
} from '../../src/providers/classify-common.js';
import { classifyClaudeError, classifyGptError, classifyTimelyGptError } from '../../src/providers/index.js';
import { TimelyGptHttpError } from '../../src/providers/timelygpt/errors.js';
import { UnexpectedResponseError, UpstreamAbortError } from '../../src/providers/upstream-errors.js';
import { postFault, rejectionOf, useRig } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';
import { Secret } from '../../src/security/secret.js';
import { loadAnthropicSdk } from '../../src/providers/claude-sdk.js';

type Row = readonly [label: string, status: number, body: unknown, expected: ErrorClass];

function anthropicError(type: string, message: string, details?: Record<string, unknown>): unknown {
  return { type: 'error', error: { type, message, ...(details ? { details } : {}) }, request_id: 'req_x' };
}

function openaiError(message: string, type: string | null, code: string | null): unknown {
  return { error: { message, type, param: null, code } };
}

/** Anthropic: each row carries one signal; the comment names the rule it pins. */
const anthropicRows: readonly Row[] = [
  // `overloaded_error` is overloaded whatever the status (without the rule: a 500 is server_error).
  ['overloaded_error type on a 500', 500, anthropicError('overloaded_error', 'Overloaded'), 'overloaded'],
  // 529 is overloaded with no body type at all (a proxy's HTML page).
  ['529 with a non-JSON body', 529, '<html>overloaded</html>', 'overloaded'],
  // 529 is overloaded even when the body's type names another class.
  [
    '529 whose body says request_too_large',
    529,
    anthropicError('request_too_large', 'Too large'),
    'overloaded',
  ],
  // `billing_error` is quota whatever the status (without the rule: a plain 400 is bad_request).
  [
    'billing_error type on a 400',
    400,
    anthropicError('billing_error', 'Billing issue with your account.'),
    'quota_exhausted',
  ],
  ['402 with a non-JSON body', 402, 'payment required', 'quota_exhausted'],
  // 402 is quota even when the body's type names another class.
  ['402 whose body says api_error', 402, anthropicError('api_error', 'Internal error'), 'quota_exhausted'],
  // A 429 is quota only for the two spend-limit codes; any other error_code stays a rate limit.
  [
    '429 with another error_code',
    429,
    anthropicError('rate_limit_error', 'Slow down.', { error_code: 'requests_per_minute' }),
    'rate_limited',
  ],
  [
    '429 with an empty error_code',
    429,
    anthropicError('rate_limit_error', 'Slow down.', { error_code: '' }),
    'rate_limited',
  ],
  ['429 without details', 429, anthropicError('rate_limit_error', 'Slow down.'), 'rate_limited'],
  // A 4xx (other than 400) whose type is `api_error` is Anthropic's own failure: server_error, counted.
  ['422 api_error', 422, anthropicError('api_error', 'Internal error'), 'server_error'],
  ['409 api_error', 409, anthropicError('api_error', 'Internal error'), 'server_error'],
  // ...but a 5xx keeps its status's class: a 504 api_error is a timeout, not server_error.
  ['504 api_error', 504, anthropicError('api_error', 'Upstream timed out'), 'timeout'],
  // `request_too_large` is context_too_long whatever the 4xx status.
  [
    'request_too_large type on a 422',
    422,
    anthropicError('request_too_large', 'Request too large'),
    'context_too_long',
  ],
  // The 400 text rules read the message only on a 400.
  [
    '"prompt is too long" on a 422',
    422,
    anthropicError('invalid_request_error', 'prompt is too long: 300000 tokens'),
    'bad_request',
  ],
  [
    '"credit balance is too low" on a 422',
    422,
    anthropicError('invalid_request_error', 'Your credit balance is too low'),
    'bad_request',
  ],
  [
    '400 whose message is neither',
    400,
    anthropicError('invalid_request_error', 'max_tokens: must be positive'),
    'bad_request',
  ],
  ['408 request timeout', 408, anthropicError('timeout_error', 'Request timeout'), 'timeout'],
  ['501 not implemented', 501, anthropicError('api_error', 'Not implemented'), 'server_error'],
];

/** OpenAI: each row carries one signal. */
const openaiRows: readonly Row[] = [
  // Quota on a 429: the code alone, or the type alone, is enough.
  [
    '429 insufficient_quota code, other type',
    429,
    openaiError('You exceeded your current quota.', 'requests', 'insufficient_quota'),
    'quota_exhausted',
  ],
  [
    '429 insufficient_quota type, no code',
    429,
    openaiError('You exceeded your current quota.', 'insufficient_quota', null),
    'quota_exhausted',
  ],
  [
    '429 credit_balance_exhausted code, other type',
    429,
    openaiError('Credit balance exhausted.', 'requests', 'credit_balance_exhausted'),
    'quota_exhausted',
  ],
  [
    '429 *_spend_limit_exceeded, no quota type',
    429,
    openaiError('Spend limit.', null, 'project_spend_limit_exceeded'),
    'quota_exhausted',
  ],
  [
    '429 *_usage_limit_exceeded, no quota type',
    429,
    openaiError('Usage limit.', null, 'organization_usage_limit_exceeded'),
    'quota_exhausted',
  ],
  // Any other 429 is a rate limit, whatever its code.
  ['429 with no code and no type', 429, openaiError('Too many requests.', null, null), 'rate_limited'],
  [
    '429 tokens rate limit',
    429,
    openaiError('Rate limit reached for tokens.', 'tokens', 'rate_limit_exceeded'),
    'rate_limited',
  ],
  [
    '429 with a spend-limit code not at the end',
    429,
    openaiError('Rate limit.', 'requests', 'project_spend_limit_exceeded_warning'),
    'rate_limited',
  ],
  // The quota codes mean quota only on a 429.
  [
    '400 insufficient_quota',
    400,
    openaiError('Quota.', 'insufficient_quota', 'insufficient_quota'),
    'bad_request',
  ],
  // Context: the code alone, whatever the status.
  [
    '400 request_too_large code',
    400,
    openaiError('Request too large.', 'invalid_request_error', 'request_too_large'),
    'context_too_long',
  ],
  [
    '422 context_length_exceeded code',
    422,
    openaiError('Too many tokens.', 'invalid_request_error', 'context_length_exceeded'),
    'context_too_long',
  ],
  // Overloaded: the code alone (any status), or a 503 that says so.
  [
    '500 server_is_overloaded code, plain message',
    500,
    openaiError('Please retry.', 'server_error', 'server_is_overloaded'),
    'overloaded',
  ],
  [
    '503 "overloaded" message, no code',
    503,
    openaiError('The engine is currently Overloaded.', 'server_error', null),
    'overloaded',
  ],
  [
    '500 "overloaded" message, no code',
    500,
    openaiError('The engine is overloaded.', 'server_error', null),
    'server_error',
  ],
  // model_not_found alone, on a status that would say otherwise.
  [
    '400 model_not_found code',
    400,
    openaiError('The model does not exist.', 'invalid_request_error', 'model_not_found'),
    'not_found',
  ],
  ['408 request timeout', 408, openaiError('Request timeout.', null, null), 'timeout'],
  ['402 payment required', 402, openaiError('Payment required.', null, null), 'quota_exhausted'],
];

// The adapter imports @anthropic-ai/sdk on its first call; errors built here from the SDK's classes are
// classified as the adapter's would be once it has (src/providers/claude-sdk.ts).
beforeAll(async () => {
  await loadAnthropicSdk();
});

describe('single-signal classification over the wire (emulator → SDK → adapter)', () => {
  const suite = useRig((emulator) => emulator.resetFaults());

  it.each(anthropicRows)('Claude: %s → %s', async (_label, status, body, expected) => {
    await postFault(suite.rig.emulator, { provider: 'claude', fault: 'respond', count: 1, status, body });
    const error = await rejectionOf(
      suite.rig.adapters.claude.generate(studyRequest(), new Secret('test-claude-key-rules'), openSignal()),
    );
    const classified = classifyClaudeError(error);
    expect(classified.errorClass).toBe(expected);
    expect(classified.httpStatus).toBe(status);
  });

  it.each(openaiRows)('GPT: %s → %s', async (_label, status, body, expected) => {
    await postFault(suite.rig.emulator, { provider: 'gpt', fault: 'respond', count: 1, status, body });
    const error = await rejectionOf(
      suite.rig.adapters.gpt.generate(studyRequest(), new Secret('test-gpt-key-rules'), openSignal()),
    );
    const classified = classifyGptError(error);
    expect(classified.errorClass).toBe(expected);
    expect(classified.httpStatus).toBe(status);
  });

  it("keeps the Anthropic body's message, and the retry-after of any status", async () => {
    const body = anthropicError('overloaded_error', 'Overloaded, come back later');
    await postFault(suite.rig.emulator, {
      provider: 'claude',
      fault: 'respond',
      count: 1,
      status: 529,
      body,
      headers: { 'retry-after': '3' },
    });
    const classified = classifyClaudeError(
      await rejectionOf(suite.rig.adapters.claude.generate(studyRequest(), new Secret('test-claude-key-rules'), openSignal())),
    );
    expect(classified).toEqual({
      errorClass: 'overloaded',
      message: 'Overloaded, come back later',
      httpStatus: 529,
      retryAfterMs: 3000,
    });
  });
});

describe('classOfStatus: the class of a status when the body says nothing more', () => {
  it.each([
    [400, 'bad_request'],
    [401, 'auth'],
    [402, 'quota_exhausted'],
    [403, 'permission'],
    [404, 'not_found'],
    [405, 'bad_request'],
    [408, 'timeout'],
    [409, 'bad_request'],
    [413, 'context_too_long'],
    [422, 'bad_request'],
    [429, 'rate_limited'],
    [499, 'bad_request'],
    [500, 'server_error'],
    [501, 'server_error'],
    [502, 'server_error'],
    [503, 'server_error'],
    [504, 'timeout'],
    [529, 'overloaded'],
    [599, 'server_error'],
  ] as const)('%i → %s', (status, expected) => {
    expect(classOfStatus(status)).toBe(expected);
  });
});

describe('retryAfterMsOf: retry-after-ms, retry-after in seconds, retry-after as an HTTP date', () => {
  const now = Date.parse('2026-12-01T10:00:00Z');
  const at = (headers: Record<string, string>) => retryAfterMsOf(new Headers(headers), now);

  it('reads retry-after-ms as milliseconds, rounded', () => {
    expect(at({ 'retry-after-ms': '1500' })).toBe(1500);
    expect(at({ 'retry-after-ms': '250.6' })).toBe(251);
    expect(at({ 'retry-after-ms': '0' })).toBe(0);
  });

  it('prefers retry-after-ms over retry-after', () => {
    expect(at({ 'retry-after-ms': '1500', 'retry-after': '9' })).toBe(1500);
  });

  it('falls back to retry-after when retry-after-ms is blank, negative or not a number', () => {
    expect(at({ 'retry-after-ms': '  ', 'retry-after': '2' })).toBe(2000);
    expect(at({ 'retry-after-ms': '-5', 'retry-after': '2' })).toBe(2000);
    expect(at({ 'retry-after-ms': 'soon', 'retry-after': '2' })).toBe(2000);
    expect(at({ 'retry-after-ms': 'Infinity', 'retry-after': '2' })).toBe(2000);
  });

  it('treats a blank value as absent, from a header reader that does not trim either', () => {
    const raw = (values: Record<string, string>) => ({ get: (name: string) => values[name] ?? null });
    expect(retryAfterMsOf(raw({ 'retry-after-ms': '  ', 'retry-after': '2' }), now)).toBe(2000);
    expect(retryAfterMsOf(raw({ 'retry-after': ' \t ' }), now)).toBeUndefined();
  });

  it('never answers an infinite or negative delay', () => {
    expect(at({ 'retry-after': 'Infinity' })).toBeUndefined();
    const negative = at({ 'retry-after': '-3' });
    expect(negative === undefined || negative >= 0).toBe(true);
  });

  it('reads retry-after as seconds, fractions included', () => {
    expect(at({ 'retry-after': '7' })).toBe(7000);
    expect(at({ 'retry-after': '1.5' })).toBe(1500);
    expect(at({ 'retry-after': '0' })).toBe(0);
  });

  it('reads retry-after as an HTTP date, relative to now, never negative', () => {
    expect(at({ 'retry-after': 'Tue, 01 Dec 2026 10:00:30 GMT' })).toBe(30_000);
    expect(at({ 'retry-after': 'Tue, 01 Dec 2026 09:59:00 GMT' })).toBe(0);
  });

  it('reads an HTTP date relative to the clock when no time is given', () => {
    const inAMinute = new Date(Date.now() + 60_000).toUTCString();
    const ms = retryAfterMsOf(new Headers({ 'retry-after': inAMinute }));
    expect(ms).toBeGreaterThan(55_000);
    expect(ms).toBeLessThanOrEqual(60_000);
  });

  it('gives nothing for no header, a blank or negative one, or one that is neither number nor date', () => {
    expect(at({})).toBeUndefined();
    expect(at({ 'retry-after': '   ' })).toBeUndefined();
    expect(at({ 'retry-after': 'later' })).toBeUndefined();
    expect(at({ 'retry-after-ms': '', 'retry-after': '' })).toBeUndefined();
    expect(retryAfterMsOf(undefined, now)).toBeUndefined();
    expect(retryAfterMsOf({ 'retry-after': '7' }, now)).toBeUndefined();
    expect(retryAfterMsOf(null, now)).toBeUndefined();
  });
});

/** An Error carrying a Node/undici `code`, optionally wrapped as the `cause` of a TypeError (fetch). */
function withCode(code: string, wrapped = false): Error {
  const inner = Object.assign(new Error(`failed: ${code}`), { code });
  return wrapped ? new TypeError('fetch failed', { cause: inner }) : inner;
}

describe('classifyTransportError: failures that arrive raw, not as SDK status errors', () => {
  it('a raw AbortError (the caller went away) is aborted, never a counted class', () => {
    const raw = new DOMException('This operation was aborted', 'AbortError');
    expect(classifyTransportError(raw)?.errorClass).toBe('aborted');
    expect(classifyClaudeError(raw).errorClass).toBe('aborted');
    expect(classifyGptError(raw).errorClass).toBe('aborted');
    expect(classifyTimelyGptError(raw).errorClass).toBe('aborted');
  });

  it('a raw TimeoutError (a deadline signal) is timeout', () => {
    expect(
      classifyTransportError(new DOMException('The operation timed out', 'TimeoutError'))?.errorClass,
    ).toBe('timeout');
  });

  it('our abort wrapper says timeout for a deadline and aborted for a caller', () => {
    expect(
      classifyTransportError(new UpstreamAbortError(new DOMException('t', 'TimeoutError')))?.errorClass,
    ).toBe('timeout');
    expect(
      classifyTransportError(new UpstreamAbortError(new DOMException('a', 'AbortError')))?.errorClass,
    ).toBe('aborted');
    expect(classifyTransportError(new UpstreamAbortError(undefined))?.errorClass).toBe('aborted');
  });

  it('a 2xx that is not a valid response is server_error, with its status', () => {
    expect(classifyTransportError(new UnexpectedResponseError('HTML from a proxy', 203))).toEqual({
      errorClass: 'server_error',
      message: 'HTML from a proxy',
      httpStatus: 203,
    });
    expect(classifyTransportError(new SyntaxError('Unexpected token <'))).toEqual({
      errorClass: 'server_error',
      message: 'The response was not valid JSON: Unexpected token <',
    });
  });

  it.each(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])(
    '%s is timeout, raw or as a cause',
    (code) => {
      expect(classifyTransportError(withCode(code))?.errorClass).toBe('timeout');
      expect(classifyTransportError(withCode(code, true))?.errorClass).toBe('timeout');
    },
  );

  it.each([
    'ECONNRESET',
    'ECONNREFUSED',
    'ENOTFOUND',
    'EAI_AGAIN',
    'EPIPE',
    'ETIMEDOUT',
    'EHOSTUNREACH',
    'ENETUNREACH',
    'UND_ERR_SOCKET',
    'UND_ERR_CLOSED',
  ])('%s is connection, raw or as a cause', (code) => {
    expect(classifyTransportError(withCode(code))?.errorClass).toBe('connection');
    expect(classifyTransportError(withCode(code, true))?.errorClass).toBe('connection');
  });

  it('reads six errors along the cause chain, no more (a bounded walk)', () => {
    let deep: Error = withCode('ECONNRESET');
    for (let i = 0; i < 6; i += 1) deep = new Error(`layer ${i}`, { cause: deep });
    expect(classifyTransportError(deep)).toBeUndefined();
    let shallow: Error = withCode('ECONNRESET');
    for (let i = 0; i < 5; i += 1) shallow = new Error(`layer ${i}`, { cause: shallow });
    expect(classifyTransportError(shallow)?.errorClass).toBe('connection');
  });

  it.each(['terminated', 'fetch failed', 'other side closed', 'Socket closed'])(
    'a TypeError "%s" is connection',
    (message) => {
      expect(classifyTransportError(new TypeError(message))?.errorClass).toBe('connection');
    },
  );

  it('a TypeError whose cause says the socket closed is connection', () => {
    expect(
      classifyTransportError(new TypeError('request failed', { cause: new Error('other side closed') }))
        ?.errorClass,
    ).toBe('connection');
  });

  it('leaves anything else unclassified: a TypeError of ours, a plain Error, an unknown code, a string', () => {
    expect(classifyTransportError(new TypeError('x is not a function'))).toBeUndefined();
    expect(classifyTransportError(new Error('terminated'))).toBeUndefined();
    expect(classifyTransportError(withCode('EWHATEVER'))).toBeUndefined();
    expect(classifyTransportError('ECONNRESET')).toBeUndefined();
    expect(classifyTransportError(null)).toBeUndefined();
  });

  it('the last resort is server_error, with the message kept', () => {
    expect(classifyUnknown(new Error('boom'))).toEqual({
      errorClass: 'server_error',
      message: 'Unexpected upstream failure: boom',
    });
    expect(classifyUnknown('broken')).toEqual({
      errorClass: 'server_error',
      message: 'Unexpected upstream failure: broken',
    });
    expect(classifyUnknown(42)).toEqual({
      errorClass: 'server_error',
      message: 'Unexpected upstream failure: unknown upstream failure',
    });
    expect(classifyClaudeError(new Error('boom')).errorClass).toBe('server_error');
    expect(classifyGptError(new Error('boom')).errorClass).toBe('server_error');
  });
});

describe('SDK errors without a status, and connection errors whose cause says more', () => {
  it('an APIError with no status (a broken stream) is an unknown upstream failure: server_error', () => {
    expect(
      classifyClaudeError(new AnthropicAPIError(undefined, undefined, 'stream broke', undefined)).errorClass,
    ).toBe('server_error');
    expect(
      classifyGptError(new OpenAIAPIError(undefined, undefined, 'stream broke', undefined)).errorClass,
    ).toBe('server_error');
  });

  it('a connection error with no cause is connection', () => {
    expect(classifyClaudeError(new AnthropicConnectionError({ message: 'Connection error.' }))).toEqual({
      errorClass: 'connection',
      message: 'Connection error.',
    });
    expect(classifyGptError(new OpenAIConnectionError({ message: 'Connection error.' }))).toEqual({
      errorClass: 'connection',
      message: 'Connection error.',
    });
  });

  it('a connection error whose cause is a headers timeout is timeout, not connection', () => {
    const cause = withCode('UND_ERR_HEADERS_TIMEOUT');
    expect(classifyClaudeError(new AnthropicConnectionError({ cause })).errorClass).toBe('timeout');
    expect(classifyGptError(new OpenAIConnectionError({ cause })).errorClass).toBe('timeout');
  });
});

describe('failure: a classified failure with a scrubbed message, and only the extras given', () => {
  it('has no httpStatus or retryAfterMs keys unless given', () => {
    expect(failure('timeout', new Error('x'), 'slow')).toEqual({ errorClass: 'timeout', message: 'slow' });
    expect(
      Object.keys(
        failure('timeout', new Error('x'), 'slow', { httpStatus: undefined, retryAfterMs: undefined }),
      ),
    ).toEqual(['errorClass', 'message']);
    expect(failure('rate_limited', new Error('x'), 'wait', { httpStatus: 429, retryAfterMs: 0 })).toEqual({
      errorClass: 'rate_limited',
      message: 'wait',
      httpStatus: 429,
      retryAfterMs: 0,
    });
  });

  it('scrubs key-like text from the message', () => {
    const key = ['sk', 'ant', 'api03', 'a'.repeat(24)].join('-');
    expect(failure('auth', new Error('x'), `invalid key ${key}`).message).not.toContain(key);
  });
});

describe('classifyTimelyGptError: the status decides, from either endpoint', () => {
  it.each([
    ['authenticate', 401, 'auth'],
    ['completion', 401, 'auth'],
    ['completion', 402, 'quota_exhausted'],
    ['completion', 403, 'permission'],
    ['completion', 429, 'rate_limited'],
    ['completion', 500, 'server_error'],
    ['authenticate', 503, 'server_error'],
    ['completion', 504, 'timeout'],
  ] as const)('%s %i → %s', (endpoint, status, expected) => {
    const error = new TimelyGptHttpError(
      endpoint,
      status,
      { message: 'no' },
      new Headers({ 'retry-after': '4' }),
    );
    expect(classifyTimelyGptError(error)).toEqual({
      errorClass: expected,
      message: `TimelyGPT ${endpoint}: ${status} no`,
      httpStatus: status,
      retryAfterMs: 4000,
    });
  });

  it('classifies raw transport failures and unknown errors like the others', () => {
    expect(classifyTimelyGptError(withCode('ECONNREFUSED', true)).errorClass).toBe('connection');
    expect(classifyTimelyGptError(new UnexpectedResponseError('{"type":"error"}')).errorClass).toBe(
      'server_error',
    );
    expect(classifyTimelyGptError(new RangeError('odd')).errorClass).toBe('server_error');
  });
});
