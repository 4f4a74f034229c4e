/**
 * The emulator's streams on the wire (docs/emulator.md "Streams"), read with a parser of the test's own:
 * the event order and shapes of each API, the text they carry equal to the non-streamed answer, the usage,
 * the pacing, the stream faults, and the control endpoint's checks.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';

interface SseEvent {
  readonly event: string | undefined;
  readonly data: string;
}

/** Server-sent events as the test reads them: blocks split by a blank line, `event:` and `data:` lines. */
function parseSse(text: string): SseEvent[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      let event: string | undefined;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice('event: '.length);
        else if (line.startsWith('data: ')) data.push(line.slice('data: '.length));
      }
      return { event, data: data.join('\n') };
    });
}

const system = 'You write study material.\nstudy-helper-task: {"task":"notes","lang":"en"}';
const document = 'Photosynthesis converts light energy into chemical energy. Chlorophyll absorbs light.';

function claude(emulator: Emulator, stream: boolean): Promise<Response> {
  return fetch(`${emulator.anthropicBaseUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'test-claude-key-0001', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'claude-emu', max_tokens: 1000, system, messages: [{ role: 'user', content: document }], stream }),
  });
}

function gpt(emulator: Emulator, stream: boolean, includeUsage = true): Promise<Response> {
  return fetch(`${emulator.openaiBaseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer test-gpt-key-0001' },
    body: JSON.stringify({
      model: 'gpt-emu',
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: document },
      ],
      stream,
      ...(stream && includeUsage ? { stream_options: { include_usage: true } } : {}),
    }),
  });
}

async function claudeWholeText(emulator: Emulator): Promise<string> {
  const body = (await (await claude(emulator, false)).json()) as { content: { text: string }[] };
  return body.content[0]?.text ?? '';
}

async function gptWholeText(emulator: Emulator): Promise<string> {
  const body = (await (await gpt(emulator, false)).json()) as { choices: { message: { content: string } }[] };
  return body.choices[0]?.message.content ?? '';
}

function anthropicText(events: SseEvent[]): string {
  return events
    .filter((event) => event.event === 'content_block_delta')
    .map((event) => (JSON.parse(event.data) as { delta: { text: string } }).delta.text)
    .join('');
}

function openaiChunks(events: SseEvent[]): { choices: { delta: { content?: string; role?: string }; finish_reason: string | null }[]; usage?: unknown; object: string }[] {
  return events.filter((event) => event.data !== '[DONE]').map((event) => JSON.parse(event.data) as never);
}

describe('emulator streams', () => {
  let emulator: Emulator;
  beforeAll(async () => {
    emulator = await startEmulator();
  });
  afterAll(async () => {
    await emulator.close();
  });
  beforeEach(() => {
    emulator.resetFaults();
    emulator.setSpeed(0);
    emulator.setStreamPieces(0);
  });

  it('Anthropic: message_start, content_block_start, ping, text deltas, content_block_stop, message_delta, message_stop', async () => {
    const response = await claude(emulator, true);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(response.headers.get('request-id')).toMatch(/^req_emu/);
    const events = parseSse(await response.text());
    const names = events.map((event) => event.event);
    const deltas = names.filter((name) => name === 'content_block_delta').length;
    expect(names).toEqual([
      'message_start',
      'content_block_start',
      'ping',
      ...Array<string>(deltas).fill('content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    // Every event's data names its own type, as the API's do.
    for (const event of events) expect((JSON.parse(event.data) as { type: string }).type).toBe(event.event);
    const whole = await claudeWholeText(emulator);
    expect(anthropicText(events)).toBe(whole);
    expect(deltas).toBe(Math.ceil(whole.length / 4));
    const messageDelta = JSON.parse(events.at(-2)?.data ?? '') as { delta: { stop_reason: string }; usage: { output_tokens: number } };
    expect(messageDelta.delta.stop_reason).toBe('end_turn');
    expect(messageDelta.usage.output_tokens).toBe(Math.ceil(whole.length / 4));
  });

  it('OpenAI: chat.completion.chunk with the role first, the finish_reason, the usage chunk, then [DONE]', async () => {
    const response = await gpt(emulator, true);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = parseSse(await response.text());
    expect(events.at(-1)?.data).toBe('[DONE]');
    expect(events.every((event) => event.event === undefined)).toBe(true);
    const chunks = openaiChunks(events);
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0]?.choices[0]?.delta.role).toBe('assistant');
    const usageChunk = chunks.at(-1);
    expect(usageChunk?.choices).toEqual([]);
    const whole = await gptWholeText(emulator);
    expect(usageChunk?.usage).toMatchObject({ completion_tokens: Math.ceil(whole.length / 4) });
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true);
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe('stop');
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe(whole);
  });

  it('OpenAI: no usage chunk and no usage fields unless stream_options.include_usage asks', async () => {
    const chunks = openaiChunks(parseSse(await (await gpt(emulator, true, false)).text()));
    expect(chunks.every((chunk) => !('usage' in chunk))).toBe(true);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop');
  });

  it('a request without stream: true still gets the whole JSON answer', async () => {
    expect((await claude(emulator, false)).headers.get('content-type')).toBe('application/json');
    expect((await gpt(emulator, false)).headers.get('content-type')).toBe('application/json');
  });

  it('paces the tokens at the speed set (POST /_emulator/speed)', async () => {
    const tokens = Math.ceil((await claudeWholeText(emulator)).length / 4);
    const speed = await fetch(`${emulator.url}/_emulator/speed`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tokensPerSecond: 2000 }),
    });
    expect(speed.status).toBe(200);
    const started = performance.now();
    const response = await claude(emulator, true);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const arrivals: number[] = [];
    for (let next = await reader.read(); !next.done; next = await reader.read()) arrivals.push(performance.now() - started);
    // 2000 tokens a second go out as 20 tokens every 10 ms: the last cannot leave before (tokens − 20) / 2 ms.
    expect(arrivals.at(-1) ?? 0).toBeGreaterThanOrEqual(((tokens - 20) / 2000) * 1000 * 0.9);
    expect(arrivals.length).toBeGreaterThan(2);
  });

  it.each([
    [{ tokensPerSecond: -1 }],
    [{ tokensPerSecond: 'fast' }],
    [{ tokensPerSecond: 2_000_000 }],
    [{}],
  ])('refuses the speed %j', async (body) => {
    const response = await fetch(`${emulator.url}/_emulator/speed`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(400);
  });

  it.each([7, 20, 1000])('cuts an answer into the %i pieces set (POST /_emulator/pieces), never more than its characters', async (pieces) => {
    const set = await fetch(`${emulator.url}/_emulator/pieces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ pieces }),
    });
    expect(set.status).toBe(200);
    const chunks = openaiChunks(parseSse(await (await gpt(emulator, true)).text()));
    const texts = chunks
      .filter((chunk) => chunk.choices[0]?.delta.role === undefined && chunk.choices[0]?.finish_reason === null)
      .map((chunk) => chunk.choices[0]?.delta.content ?? '');
    const whole = await gptWholeText(emulator);
    expect(texts.join('')).toBe(whole);
    expect(texts).toHaveLength(Math.min(pieces, whole.length));
    // Near-equal pieces: no two differ by more than one character.
    const lengths = texts.map((text) => text.length);
    expect(Math.max(...lengths) - Math.min(...lengths)).toBeLessThanOrEqual(1);
    const events = parseSse(await (await claude(emulator, true)).text());
    expect(events.filter((event) => event.event === 'content_block_delta')).toHaveLength(Math.min(pieces, (await claudeWholeText(emulator)).length));
  });

  it.each([[{ pieces: -1 }], [{ pieces: 2.5 }], [{ pieces: 'many' }], [{}]])('refuses the pieces %j', async (body) => {
    const response = await fetch(`${emulator.url}/_emulator/pieces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(400);
  });

  it.each([
    [{ provider: 'gpt', fault: 'cut', after: -1 }],
    [{ provider: 'gpt', fault: 'stall', after: 1.5 }],
    [{ provider: 'gpt', fault: 'streamError', error: 'meltdown' }],
  ])('refuses the fault %j', async (spec) => {
    const response = await fetch(`${emulator.url}/_emulator/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(spec),
    });
    expect(response.status).toBe(400);
  });

  it("streamError sends Anthropic's event: error with the error's type after N deltas, then ends", async () => {
    emulator.setFault({ provider: 'claude', fault: 'streamError', after: 2, error: 'overloaded' });
    const events = parseSse(await (await claude(emulator, true)).text());
    expect(events.filter((event) => event.event === 'content_block_delta')).toHaveLength(2);
    expect(events.at(-1)?.event).toBe('error');
    expect(JSON.parse(events.at(-1)?.data ?? '')).toEqual({
      type: 'error',
      error: { type: 'overloaded_error', message: 'Overloaded' },
    });
  });

  it("streamError sends OpenAI's data-only error chunk after N deltas, without [DONE]", async () => {
    emulator.setFault({ provider: 'gpt', fault: 'streamError', after: 3, error: 'quota' });
    const events = parseSse(await (await gpt(emulator, true)).text());
    expect(events.map((event) => event.data)).not.toContain('[DONE]');
    const last = JSON.parse(events.at(-1)?.data ?? '') as { error: { type: string; code: string } };
    expect(last.error).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota' });
    // The role chunk, then the 3 deltas.
    expect(events).toHaveLength(1 + 3 + 1);
  });

  it('malformedChunk sends a chunk whose data is not JSON after N deltas', async () => {
    emulator.setFault({ provider: 'claude', fault: 'malformedChunk', after: 1 });
    const events = parseSse(await (await claude(emulator, true)).text());
    expect(events.filter((event) => event.event === 'content_block_delta')).toHaveLength(2);
    expect(() => JSON.parse(events.at(-1)?.data ?? '') as unknown).toThrow(SyntaxError);
  });

  it('cut destroys the socket after N deltas (the body fails, after those bytes)', async () => {
    emulator.setFault({ provider: 'gpt', fault: 'cut', after: 2 });
    const response = await gpt(emulator, true);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let received = '';
    const failure = await (async () => {
      try {
        for (let next = await reader.read(); !next.done; next = await reader.read())
          received += new TextDecoder().decode(next.value);
        return undefined;
      } catch (error) {
        return error;
      }
    })();
    expect(failure).toBeInstanceOf(TypeError);
    expect(parseSse(received)).toHaveLength(1 + 2);
  });

  it('stall sends N deltas, then nothing until the client goes away', async () => {
    emulator.setFault({ provider: 'claude', fault: 'stall', after: 1 });
    const controller = new AbortController();
    const response = await fetch(`${emulator.anthropicBaseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'test-claude-key-0001', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-emu', max_tokens: 100, system, messages: [{ role: 'user', content: document }], stream: true }),
      signal: controller.signal,
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let received = '';
    while (parseSse(received).filter((event) => event.event === 'content_block_delta').length < 1) {
      const next = await reader.read();
      received += new TextDecoder().decode(next.value);
    }
    const more = reader.read();
    const waited = await Promise.race([more.then(() => 'more'), new Promise((resolve) => setTimeout(() => resolve('nothing'), 150))]);
    expect(waited).toBe('nothing');
    controller.abort();
    await more.catch(() => undefined);
  });

  it('slowFirstToken opens the stream at once and holds the first token back', async () => {
    emulator.setFault({ provider: 'gpt', fault: 'slowFirstToken', ms: 60_000 });
    const controller = new AbortController();
    const response = await fetch(`${emulator.openaiBaseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer test-gpt-key-0001' },
      body: JSON.stringify({ model: 'gpt-emu', messages: [{ role: 'user', content: document }], stream: true }),
      signal: controller.signal,
    });
    expect(response.status).toBe(200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    const chunks = openaiChunks(parseSse(new TextDecoder().decode(first.value)));
    expect(chunks.map((chunk) => chunk.choices[0]?.delta)).toEqual([{ role: 'assistant', content: '', refusal: null }]);
    controller.abort();
    await reader.read().catch(() => undefined);
  });

  it('stream faults leave a call that did not ask for a stream answered whole (and are used up by it)', async () => {
    emulator.setFault({ provider: 'claude', fault: 'streamError', count: 1 });
    const response = await claude(emulator, false);
    expect(response.status).toBe(200);
    expect(((await response.json()) as { type: string }).type).toBe('message');
    expect(parseSse(await (await claude(emulator, true)).text()).at(-1)?.event).toBe('message_stop');
  });

  it('TimelyGPT answers whole whatever the body says about streaming', async () => {
    const auth = (await (
      await fetch(`${emulator.timelygptBaseUrl}/sdk-auth/authenticate`, { headers: { 'x-timely-api': 'test-timelygpt-key-0001' } })
    ).json()) as { data: { access_token: string } };
    const response = await fetch(`${emulator.timelygptBaseUrl}/llm-completion`, {
      method: 'POST',
      headers: { authorization: `Bearer ${auth.data.access_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: 's', messages: [{ role: 'user', content: document }], model: 't', stream: true, locale: 'en' }),
    });
    expect(((await response.json()) as { type: string }).type).toBe('final_response');
  });
});
