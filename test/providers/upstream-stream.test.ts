/**
 * The transport's streamed answers (src/providers/upstream-fetch.ts) and the adapters' bound on an answer's
 * text (src/providers/streamed-text.ts), over real sockets to a server of the test's own.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGptAdapter } from '../../src/providers/index.js';
import { StreamedText } from '../../src/providers/streamed-text.js';
import { AnswerTooLongError, UnexpectedResponseError } from '../../src/providers/upstream-errors.js';
import { answerCeiling, eventStream, maxUpstreamStreamBytes, upstreamFetch } from '../../src/providers/upstream-fetch.js';
import { Secret } from '../../src/security/secret.js';
import { rejectionOf, writeChunks } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';

/** Reads a body to its end; the rejection if it fails. */
async function drain(body: ReadableStream<Uint8Array>): Promise<{ bytes: number; error?: unknown }> {
  const reader = body.getReader();
  let bytes = 0;
  try {
    for (let next = await reader.read(); !next.done; next = await reader.read()) bytes += next.value.length;
    return { bytes };
  } catch (error) {
    return { bytes, error };
  }
}

/** An event stream of `count` chunks of `size` bytes ('a'), written as the client takes them (back-pressure kept). */
function streamOf(size: number, count: number): (request: IncomingMessage, response: ServerResponse) => void {
  return (_request, response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    writeChunks(response, Buffer.alloc(size, 0x61), count);
  };
}

describe('upstreamFetch with a stream asked for', () => {
  let server: Server;
  let base: string;
  let respond: (request: IncomingMessage, response: ServerResponse) => void = (_request, response) => {
    response.end();
  };
  const closed: string[] = [];

  beforeAll(async () => {
    server = createServer((request, response) => {
      request.resume();
      request.on('end', () => respond(request, response));
      response.on('close', () => closed.push(request.url ?? ''));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const asked = { headers: { accept: eventStream } };

  it('hands the first event on while the rest is still to come (nothing is buffered)', async () => {
    let finish: () => void = () => undefined;
    respond = (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      response.write('data: first\n\n');
      finish = () => response.end('data: last\n\n');
    };
    const response = await upstreamFetch(`${base}/stream`, asked);
    expect(response).toBeInstanceOf(Response);
    expect(response.url).toBe(`${base}/stream`);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe('data: first\n\n');
    // Only now does the server send the rest: a buffering transport would never have resolved.
    finish();
    let rest = '';
    for (let next = await reader.read(); !next.done; next = await reader.read())
      rest += new TextDecoder().decode(next.value);
    expect(rest).toBe('data: last\n\n');
  });

  it(`cuts a stream off past ${maxUpstreamStreamBytes} bytes as the provider's UnexpectedResponseError`, async () => {
    respond = streamOf(1024 * 1024, 64);
    const response = await upstreamFetch(`${base}/endless`, asked);
    const { bytes, error } = await drain(response.body as ReadableStream<Uint8Array>);
    expect(error).toBeInstanceOf(UnexpectedResponseError);
    expect(bytes).toBeLessThanOrEqual(maxUpstreamStreamBytes);
    expect((error as UnexpectedResponseError).httpStatus).toBe(200);
  });

  it('refuses a 2xx that is not an event stream, with its status; an error status is read whole', async () => {
    respond = (request, response) => {
      if (request.url === '/json') {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{"id":"whole"}');
      } else {
        response.writeHead(429, { 'content-type': 'application/json' });
        response.end('{"error":{"type":"rate_limit_error"}}');
      }
    };
    const refused = await upstreamFetch(`${base}/json`, asked).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(UnexpectedResponseError);
    expect((refused as UnexpectedResponseError).httpStatus).toBe(200);
    const limited = await upstreamFetch(`${base}/limited`, asked);
    expect(limited.status).toBe(429);
    expect(await limited.json()).toEqual({ error: { type: 'rate_limit_error' } });
  });

  it('a stream the reader cancels closes the connection; a fired signal fails the read as an AbortError', async () => {
    respond = (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('data: one\n\n');
    };
    const cancelled = await upstreamFetch(`${base}/cancelled`, asked);
    const reader = (cancelled.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    await expect.poll(() => closed.includes('/cancelled')).toBe(true);

    const controller = new AbortController();
    const aborted = await upstreamFetch(`${base}/aborted`, { ...asked, signal: controller.signal });
    const abortedReader = (aborted.body as ReadableStream<Uint8Array>).getReader();
    await abortedReader.read();
    controller.abort();
    await expect(abortedReader.read()).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('cuts a 2xx stream off at 64 bytes a character of the call\'s answer ceiling (plus 64 KiB) as an answer too long, and closes it', async () => {
    respond = streamOf(64 * 1024, 256);
    // A ceiling of 1000 characters: 64 000 + 65 536 bytes may be read, not the 16 MiB sent.
    const response = await upstreamFetch(`${base}/ceiling`, { ...asked, ...answerCeiling(1000) });
    const { bytes, error } = await drain(response.body as ReadableStream<Uint8Array>);
    expect(error).toBeInstanceOf(AnswerTooLongError);
    expect(bytes).toBeLessThanOrEqual(64_000 + 65_536);
    await expect.poll(() => closed.includes('/ceiling')).toBe(true);
  });

  it('bounds a whole 2xx body by the ceiling too (6 bytes a character plus 64 KiB); an error status past it is the provider\'s', async () => {
    respond = (request, response) => {
      response.writeHead(request.url === '/whole' ? 200 : 500, { 'content-type': 'application/json' });
      response.end(`{"text":"${'b'.repeat(200_000)}"}`);
    };
    const whole = await rejectionOf(upstreamFetch(`${base}/whole`, answerCeiling(1000)));
    expect(whole).toBeInstanceOf(AnswerTooLongError);
    expect((whole as AnswerTooLongError).limit).toBe(6000 + 65_536);
    const failed = await rejectionOf(upstreamFetch(`${base}/failed`, answerCeiling(1000)));
    expect(failed).toBeInstanceOf(UnexpectedResponseError);
    // Without a ceiling the same body is read whole.
    expect((await upstreamFetch(`${base}/whole`)).status).toBe(200);
  });

  it('stops a streamed answer at the request\'s own ceiling: invalid_output, no more text handed on than the ceiling', async () => {
    // 1 Ki characters a chunk, 64 chunks: far under every byte bound, over a ceiling of 10 000 characters.
    const piece = 'x'.repeat(1024);
    respond = (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let index = 0; index < 64; index += 1)
        response.write(
          `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })}\n\n`,
        );
      response.end('data: [DONE]\n\n');
    };
    const adapter = createGptAdapter({ baseUrl: base, model: 'm' });
    let received = 0;
    const error = await rejectionOf(
      adapter.generate(studyRequest('notes', { maxAnswerChars: 10_000 }), new Secret('test-gpt-key-0001'), openSignal(), {
        onDelta: (text) => (received += text.length),
      }),
    );
    const failure = adapter.classify(error);
    expect(failure.errorClass).toBe('invalid_output');
    expect(failure.message).toContain('10000 characters');
    expect(failure.validationErrors).toHaveLength(1);
    // Nine pieces of 1024 fit under 10 000; the tenth would pass it and is neither kept nor handed on.
    expect(received).toBe(9 * 1024);
  });
});

describe('StreamedText', () => {
  it('hands each non-empty piece on in order and keeps them joined; past its character bound it throws and hands nothing on', () => {
    const seen: string[] = [];
    const text = new StreamedText({ onDelta: (piece) => seen.push(piece) }, { maxChars: 6, maxPieces: 10 });
    text.add('abc');
    text.add('');
    text.add('de');
    expect(() => text.add('fg')).toThrow(AnswerTooLongError);
    expect(seen).toEqual(['abc', 'de']);
    expect(text.text).toBe('abcde');
    expect(text.pieces).toBe(2);
  });

  it('throws at the piece past its piece bound, whatever their length', () => {
    const seen: string[] = [];
    const text = new StreamedText({ onDelta: (piece) => seen.push(piece) }, { maxChars: 1000, maxPieces: 3 });
    for (const piece of ['a', 'b', 'c']) text.add(piece);
    expect(() => text.add('d')).toThrow(AnswerTooLongError);
    expect(seen).toEqual(['a', 'b', 'c']);
  });
});
