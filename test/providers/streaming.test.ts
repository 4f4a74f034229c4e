/**
 * Streamed calls through the real SDKs against the emulator over real HTTP: the deltas, the
 * answer they make, the usage read from the stream, and every mid-stream failure with its class.
 * Expected classes are written out from docs/errors.md; expected texts and usage come from the emulator's
 * own non-streamed answer to the same request (a second, independent path), never from the adapter.
 */
import { describe, expect, it } from 'vitest';
import type { ErrorClass } from '../../src/errors/index.js';
import type { UpstreamStreamObserver } from '../../src/providers/index.js';
import { withJsonInstruction } from '../../src/providers/json-instruction.js';
import { Secret } from '../../src/security/secret.js';
import { postFault, rejectionOf, useRig, type Rig } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';

type Streaming = 'claude' | 'gpt';

/** An observer that keeps every delta. */
function recorder(): UpstreamStreamObserver & { deltas: string[] } {
  const deltas: string[] = [];
  return { deltas, onDelta: (text) => deltas.push(text) };
}

/** The same request, not streamed, straight to the emulator: its text and usage are the oracle. */
async function wholeAnswer(
  rig: Rig,
  provider: Streaming,
): Promise<{ text: string; inputTokens: number; outputTokens: number }> {
  const request = studyRequest();
  if (provider === 'claude') {
    const response = await fetch(`${rig.emulator.anthropicBaseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': 'test-claude-key-0001', 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      // The system prompt as the adapter sends it (the JSON instruction appended): usage counts it.
      body: JSON.stringify({ model: 'claude-emu-1', max_tokens: 2048, system: withJsonInstruction(request), messages: request.messages }),
    });
    const body = (await response.json()) as {
      content: { text: string }[];
      usage: { input_tokens: number; output_tokens: number };
    };
    return { text: body.content[0]?.text ?? '', inputTokens: body.usage.input_tokens, outputTokens: body.usage.output_tokens };
  }
  const response = await fetch(`${rig.emulator.openaiBaseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer test-gpt-key-0001', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-emu-1', messages: [{ role: 'system', content: request.system }, ...request.messages] }),
  });
  const body = (await response.json()) as {
    choices: { message: { content: string } }[];
    usage: { prompt_tokens: number; completion_tokens: number };
  };
  return {
    text: body.choices[0]?.message.content ?? '',
    inputTokens: body.usage.prompt_tokens,
    outputTokens: body.usage.completion_tokens,
  };
}

/** An Anthropic in-band error event's body, as the API sends it. */
function anthropicEvent(type: string, message: string): unknown {
  return { type: 'error', error: { type, message } };
}

/** An OpenAI in-band error chunk's body, as the API sends it. */
function openaiChunk(message: string, type: string | null, code: string | null): unknown {
  return { error: { message, type, param: null, code } };
}

/** Real in-band error bodies → docs/errors.md's class, exactly as the same error over HTTP. */
const inBandRows: Record<Streaming, readonly (readonly [string, unknown, ErrorClass])[]> = {
  claude: [
    ['overloaded_error', anthropicEvent('overloaded_error', 'Overloaded'), 'overloaded'],
    ['api_error', anthropicEvent('api_error', 'Internal server error'), 'server_error'],
    ['rate_limit_error', anthropicEvent('rate_limit_error', 'Number of requests has exceeded your rate limit'), 'rate_limited'],
    ['billing_error', anthropicEvent('billing_error', 'Billing issue with your account.'), 'quota_exhausted'],
    [
      'invalid_request_error: credit balance',
      anthropicEvent('invalid_request_error', 'Your credit balance is too low to access the Anthropic API.'),
      'quota_exhausted',
    ],
    ['invalid_request_error: prompt is too long', anthropicEvent('invalid_request_error', 'prompt is too long: 215000 tokens > 200000 maximum'), 'context_too_long'],
    ['invalid_request_error', anthropicEvent('invalid_request_error', 'max_tokens: must be positive'), 'bad_request'],
    ['authentication_error', anthropicEvent('authentication_error', 'invalid x-api-key'), 'auth'],
    ['permission_error', anthropicEvent('permission_error', 'Not allowed'), 'permission'],
    ['not_found_error', anthropicEvent('not_found_error', 'model: claude-unknown'), 'not_found'],
    ['request_too_large', anthropicEvent('request_too_large', 'Request too large'), 'context_too_long'],
    ['timeout_error', anthropicEvent('timeout_error', 'Timed out'), 'timeout'],
    ['a type no API documents', anthropicEvent('mystery_error', 'Something'), 'server_error'],
  ],
  gpt: [
    ['insufficient_quota', openaiChunk('You exceeded your current quota.', 'insufficient_quota', 'insufficient_quota'), 'quota_exhausted'],
    ['rate_limit_exceeded', openaiChunk('Rate limit reached for requests.', 'requests', 'rate_limit_exceeded'), 'rate_limited'],
    ['tokens rate limit, no code', openaiChunk('Rate limit reached for tokens.', 'tokens', null), 'rate_limited'],
    ['*_spend_limit_exceeded', openaiChunk('Spend limit.', null, 'project_spend_limit_exceeded'), 'quota_exhausted'],
    ['server_error', openaiChunk('The server had an error while processing your request.', 'server_error', null), 'server_error'],
    ['server_is_overloaded', openaiChunk('The server is overloaded or not ready yet.', 'server_error', 'server_is_overloaded'), 'overloaded'],
    ['invalid_api_key', openaiChunk('Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key'), 'auth'],
    ['context_length_exceeded', openaiChunk("This model's maximum context length is 128000 tokens.", 'invalid_request_error', 'context_length_exceeded'), 'context_too_long'],
    ['model_not_found', openaiChunk('The model does not exist.', 'invalid_request_error', 'model_not_found'), 'not_found'],
    ['invalid_request_error', openaiChunk('Invalid value.', 'invalid_request_error', 'invalid_value'), 'bad_request'],
    ['requests rate limit, no code', openaiChunk('Rate limit reached for requests.', 'requests', null), 'rate_limited'],
    ['authentication_error, no code', openaiChunk('Invalid authentication.', 'authentication_error', null), 'auth'],
    ['invalid_api_key, no type', openaiChunk('Incorrect API key provided.', null, 'invalid_api_key'), 'auth'],
    ['request_forbidden', openaiChunk('You are not allowed to make this request.', 'request_forbidden', null), 'permission'],
    ['unsupported region, no type', openaiChunk('Country, region, or territory not supported.', null, 'unsupported_country_region_territory'), 'permission'],
    ['request_too_large', openaiChunk('Request too large.', 'invalid_request_error', 'request_too_large'), 'context_too_long'],
    ['context_length_exceeded, no type', openaiChunk("This model's maximum context length is 128000 tokens.", null, 'context_length_exceeded'), 'context_too_long'],
    ['server_is_overloaded, no type', openaiChunk('The server is overloaded.', null, 'server_is_overloaded'), 'overloaded'],
    ['model_not_found, no type', openaiChunk('The model does not exist.', null, 'model_not_found'), 'not_found'],
    ['nothing named', openaiChunk('Something went wrong.', null, null), 'server_error'],
  ],
};

/** The emulator's own error kinds, rendered as each provider's real in-band body → their class. */
const kindRows: readonly (readonly [string, ErrorClass])[] = [
  ['overloaded', 'overloaded'],
  ['http500', 'server_error'],
  ['http503', 'server_error'],
  ['rateLimit', 'rate_limited'],
  ['quota', 'quota_exhausted'],
  ['auth', 'auth'],
  ['permission', 'permission'],
  ['contextTooLong', 'context_too_long'],
  ['notFound', 'not_found'],
  ['badRequest', 'bad_request'],
];

describe.each(['claude', 'gpt'] as const)('%s: streamed calls through the real SDK', (provider) => {
  const suite = useRig((emulator) => {
    emulator.resetFaults();
    emulator.setSpeed(0);
  });
  const key = new Secret(`test-${provider}-key-0001`);

  it('hands each piece on in order; the pieces join to the answer, which is the whole answer', async () => {
    const observer = recorder();
    const answer = await suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), observer);
    const whole = await wholeAnswer(suite.rig, provider);
    expect(answer.text).toBe(whole.text);
    expect(observer.deltas.join('')).toBe(whole.text);
    // One piece per emulated token (4 characters), the last one shorter or equal.
    expect(observer.deltas).toHaveLength(Math.ceil(whole.text.length / 4));
    expect(observer.deltas.slice(0, -1).every((piece) => piece.length === 4)).toBe(true);
    expect(answer.truncated).toBe(false);
    expect(answer.model).toBe(`${provider}-emu-1`);
  });

  it('reads the usage from the stream', async () => {
    const answer = await suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), recorder());
    const whole = await wholeAnswer(suite.rig, provider);
    expect(answer.usage).toEqual({ inputTokens: whole.inputTokens, outputTokens: whole.outputTokens });
  });

  it('hands the first piece on before the answer has arrived (paced at 2000 tokens a second)', async () => {
    suite.rig.emulator.setSpeed(2000);
    let resolved = false;
    const seenBeforeEnd: boolean[] = [];
    const call = suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), {
      onDelta: () => seenBeforeEnd.push(!resolved),
    });
    const answer = await call.finally(() => (resolved = true));
    expect(seenBeforeEnd.length).toBeGreaterThan(1);
    expect(seenBeforeEnd.every(Boolean)).toBe(true);
    expect(answer.text.length).toBeGreaterThan(0);
  });

  it('works without an observer', async () => {
    const answer = await suite.rig.adapters[provider].generate(studyRequest(), key, openSignal());
    expect(answer.text).toBe((await wholeAnswer(suite.rig, provider)).text);
  });

  it('reports a max_tokens / length stop as truncated', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'truncated', count: 1 });
    const answer = await suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), recorder());
    expect(answer.truncated).toBe(true);
  });

  it('a connection cut after 3 chunks: connection, after exactly those 3 pieces', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'cut', after: 3, count: 1 });
    const observer = recorder();
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), observer));
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('connection');
    expect(observer.deltas).toHaveLength(3);
  });

  it('a stream stalled after 2 chunks: the deadline signal ends it as timeout', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'stall', after: 2, count: 1 });
    const observer = recorder();
    const error = await rejectionOf(
      suite.rig.adapters[provider].generate(studyRequest(), key, AbortSignal.timeout(300), observer),
    );
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('timeout');
    expect(observer.deltas).toHaveLength(2);
  });

  it('a caller abort mid-stream rejects as aborted, and no piece arrives after it', async () => {
    suite.rig.emulator.setSpeed(200);
    const controller = new AbortController();
    const observer = recorder();
    let afterAbort = 0;
    const call = suite.rig.adapters[provider].generate(studyRequest(), key, controller.signal, {
      onDelta: (text) => {
        if (controller.signal.aborted) afterAbort += 1;
        observer.onDelta(text);
        if (observer.deltas.length === 3) controller.abort();
      },
    });
    const failure = suite.rig.adapters[provider].classify(await rejectionOf(call));
    expect(failure.errorClass).toBe('aborted');
    expect(afterAbort).toBe(0);
    expect(observer.deltas).toHaveLength(3);
  });

  it('a caller abort while the stream stalls rejects as aborted (the stall never ends by itself)', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'stall', after: 1, count: 1 });
    const controller = new AbortController();
    const call = suite.rig.adapters[provider].generate(studyRequest(), key, controller.signal, {
      onDelta: () => setTimeout(() => controller.abort(), 20),
    });
    expect(suite.rig.adapters[provider].classify(await rejectionOf(call)).errorClass).toBe('aborted');
  });

  it('a slow first token: the answer arrives whole after it; a deadline before it is timeout with no piece', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'slowFirstToken', ms: 30, count: 1 });
    const answer = await suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), recorder());
    expect(answer.text).toBe((await wholeAnswer(suite.rig, provider)).text);

    await postFault(suite.rig.emulator, { provider, fault: 'slowFirstToken', ms: 60_000, count: 1 });
    const observer = recorder();
    const error = await rejectionOf(
      suite.rig.adapters[provider].generate(studyRequest(), key, AbortSignal.timeout(200), observer),
    );
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('timeout');
    expect(observer.deltas).toEqual([]);
  });

  it('a malformed chunk after 2 chunks: server_error', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'malformedChunk', after: 2, count: 1 });
    const observer = recorder();
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), observer));
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('server_error');
    expect(observer.deltas).toHaveLength(2);
  });

  it.each(inBandRows[provider])('an in-band %s after 2 chunks → its class', async (_label, body, expected) => {
    await postFault(suite.rig.emulator, { provider, fault: 'streamError', after: 2, body, count: 1 });
    const observer = recorder();
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), observer));
    const failure = suite.rig.adapters[provider].classify(error);
    expect(failure.errorClass).toBe(expected);
    expect(observer.deltas).toHaveLength(2);
  });

  it.each(kindRows)("the emulator's in-band %s (the provider's own body) → %s", async (kind, expected) => {
    await postFault(suite.rig.emulator, {
      provider,
      fault: 'streamError',
      after: 1,
      error: kind as 'http500',
      count: 1,
    });
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), recorder()));
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe(expected);
  });

  it('an in-band error before any text (after 0 chunks) is classed the same', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'streamError', after: 0, error: 'quota', count: 1 });
    const observer = recorder();
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), observer));
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('quota_exhausted');
    expect(observer.deltas).toEqual([]);
  });

  it('a stream that ends cleanly before its end event: connection', async () => {
    const cutShort =
      provider === 'claude'
        ? 'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"claude-emu-1","content":[]}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\\"a\\""}}\n\n'
        : 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-emu-1","choices":[{"index":0,"delta":{"content":"{\\"a\\""},"finish_reason":null}]}\n\n';
    await postFault(suite.rig.emulator, {
      provider,
      fault: 'respond',
      count: 1,
      status: 200,
      body: cutShort,
      headers: { 'content-type': 'text/event-stream' },
    });
    const observer = recorder();
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), observer));
    expect(suite.rig.adapters[provider].classify(error).errorClass).toBe('connection');
    expect(observer.deltas).toEqual(['{"a"']);
  });

  it('a whole JSON answer where a stream was asked for: server_error with its status', async () => {
    await postFault(suite.rig.emulator, {
      provider,
      fault: 'respond',
      count: 1,
      status: 200,
      // JSON, but neither an event stream nor a whole answer the emulator would stream in its place.
      body: { id: 'x', note: 'not a stream' },
    });
    const error = await rejectionOf(suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), recorder()));
    const failure = suite.rig.adapters[provider].classify(error);
    expect(failure.errorClass).toBe('server_error');
    expect(failure.httpStatus).toBe(200);
  });

  it("a replayed whole answer (the provider's own success body) arrives streamed: its text, model, usage, stop", async () => {
    const text = '{"keyConcepts":[],"sections":[],"glossary":[]}';
    const body =
      provider === 'claude'
        ? {
            id: 'msg_replay',
            type: 'message',
            role: 'assistant',
            model: 'claude-replayed',
            content: [{ type: 'text', text }],
            stop_reason: 'max_tokens',
            stop_sequence: null,
            usage: { input_tokens: 11, output_tokens: 22 },
          }
        : {
            id: 'chatcmpl-replay',
            object: 'chat.completion',
            created: 1,
            model: 'gpt-replayed',
            choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'length' }],
            usage: { prompt_tokens: 11, completion_tokens: 22, total_tokens: 33 },
          };
    await postFault(suite.rig.emulator, { provider, fault: 'respond', count: 1, status: 200, body, headers: { 'content-type': 'application/json' } });
    const observer = recorder();
    const answer = await suite.rig.adapters[provider].generate(studyRequest(), key, openSignal(), observer);
    expect(answer).toEqual({
      text,
      model: `${provider}-replayed`,
      usage: { inputTokens: 11, outputTokens: 22 },
      truncated: true,
    });
    expect(observer.deltas.join('')).toBe(text);
    expect(observer.deltas.length).toBeGreaterThan(1);
  });

  it('sends each concurrent call with its own key, through one client', async () => {
    const keys = [`test-${provider}-key-0101`, `test-${provider}-key-0102`, `test-${provider}-key-0103`];
    suite.rig.emulator.resetStats();
    await Promise.all(
      [0, 1, 2, 0, 1, 2, 0].map((index) =>
        suite.rig.adapters[provider].generate(studyRequest(), new Secret(keys[index] ?? ''), openSignal(), recorder()),
      ),
    );
    expect(suite.rig.emulator.stats()[provider].byKey).toEqual({
      [suite.rig.emulator.fingerprint(keys[0] ?? '')]: 3,
      [suite.rig.emulator.fingerprint(keys[1] ?? '')]: 2,
      [suite.rig.emulator.fingerprint(keys[2] ?? '')]: 2,
    });
  });
});

describe('timelygpt: an API without a stream', () => {
  const suite = useRig(() => undefined);

  it('hands the whole text on as one piece, once it has arrived', async () => {
    const observer = recorder();
    const answer = await suite.rig.adapters.timelygpt.generate(
      studyRequest(),
      new Secret('test-timelygpt-key-0001'),
      openSignal(),
      observer,
    );
    expect(observer.deltas).toEqual([answer.text]);
    expect(answer.text.length).toBeGreaterThan(0);
  });
});
