/**
 * The `fetch` the provider SDKs (and the TimelyGPT wire) call upstream through: undici's
 * `request` on one shared connection pool, the answer read whole and handed back as a `Response`
 * without a body stream.
 *
 * Why not the global `fetch`: it is the dearest part of a provider call. Every call builds a
 * WHATWG `Request`, a `ReadableStream` for the request body and another for the response body (each
 * made transferable through a C++ object), a fetch controller, and a second `AbortController` linked to
 * the call's signal by a listener and a `FinalizationRegistry` entry. The same call through undici's
 * `request` (the client `fetch` itself runs on) costs about half the CPU (docs/performance.md, "The
 * upstream transport"). The SDKs take a `fetch` option for exactly this.
 *
 * What stays as it was with `fetch`: the same pool behaviour (undici's `Agent` with its defaults: keep-alive,
 * no cap per origin, its connect / headers / body timeouts and error codes, which classify-common.ts
 * knows), the call's signal aborting the request (an `AbortError`, which the SDKs read as the caller's
 * abort), a `Response` that is a real one (`instanceof Response`, its status and headers).
 * What differs, on purpose:
 * - the body is read before the promise settles (a provider answer is a few KB), so a body cut off
 *   midway rejects the call itself, classified like the same cut under `fetch` (a socket error);
 * - what is read is **bounded**: by the call's own answer ceiling when the adapter passes one
 *   (`answerCeiling`, from `GenerationRequest.maxAnswerChars`: a 2xx past it fails `invalid_output` and
 *   the connection is closed), else by `maxUpstreamResponseBytes` / `maxUpstreamStreamBytes`; a provider
 *   that answers without end is cut off instead of growing this process's memory;
 * - no content coding is asked for (no `accept-encoding`), so none needs decoding; a body sent coded
 *   anyway is refused (`server_error`), never handed to the SDK as text it cannot read;
 * - redirects are not followed (no provider API redirects a call): a 3xx fails the call as the provider's
 *   `UnexpectedResponseError` (server_error), never as a status the SDK would read as the caller's error.
 * A request `fetch` would send that this does not handle (a `Request` object, a streamed or form body)
 * goes to the global `fetch` unchanged.
 */
import { Agent, request, type Dispatcher } from 'undici';
import { AnswerTooLongError, UnexpectedResponseError } from './upstream-errors.js';

/**
 * The largest response body read from a provider for a call without an answer ceiling (a call with one
 * reads at most what its ceiling allows, below this): far above every answer's `max_tokens`.
 */
export const maxUpstreamResponseBytes = 8 * 1024 * 1024;

/**
 * The most bytes of one event stream read from a provider (a call with an answer ceiling reads at most
 * what its ceiling allows, below this). An event stream is handed on as it arrives, not kept, so this
 * bounds the time and CPU a provider that streams without end can cost, with room for the events'
 * framing (a text delta of a few characters travels in ~150 bytes); the answer's text itself is bounded
 * by the adapters (streamed-text.ts, the call's `maxAnswerChars`).
 */
export const maxUpstreamStreamBytes = 4 * maxUpstreamResponseBytes;

/**
 * Bytes of event stream read per character of a call's answer ceiling: a provider's text delta costs
 * ~100–250 bytes of framing for a token of ~4 characters, and the ceiling allows 16 characters a token,
 * so an honest answer of the whole `max_tokens` stays far below it (an answer in one-token pieces reaches
 * the character ceiling first). Past it the call has read more than any answer it asked for.
 */
const streamBytesPerAnswerChar = 64;
/** Bytes of a whole (buffered) answer per character of its ceiling: a character JSON-escaped is at most 6. */
const bodyBytesPerAnswerChar = 6;
/** Room for what surrounds the text (a stream's opening events, a body's envelope, an error's body). */
const envelopeBytes = 64 * 1024;

/** Where a call's answer ceiling travels in its `RequestInit` (never sent: only this transport reads it). */
const answerCeilingKey = Symbol('answerCeiling');

/**
 * The `RequestInit` fields that carry a call's answer ceiling (characters) to this transport: an SDK
 * call's per-request `fetchOptions` (both SDKs spread them into the init they hand their `fetch`), or
 * the init of a call made here directly (TimelyGPT).
 */
export function answerCeiling(maxAnswerChars: number): CeilingInit {
  return { [answerCeilingKey]: maxAnswerChars } as CeilingInit;
}

/** A `RequestInit` with none of the fields an SDK sets itself (its `fetchOptions` type forbids them). */
export type CeilingInit = Omit<RequestInit, 'headers' | 'body' | 'method' | 'signal'>;

/** The bytes one call may read: from its answer ceiling, never above the transport's own bounds. */
interface ReadBounds {
  readonly stream: number;
  readonly body: number;
  /** The bounds come from the call's ceiling: a 2xx past them is an answer too long (invalid_output). */
  readonly fromCeiling: boolean;
}

function readBoundsOf(init: RequestInit | undefined): ReadBounds {
  const chars = (init as { [answerCeilingKey]?: unknown } | undefined)?.[answerCeilingKey];
  if (typeof chars !== 'number' || !Number.isFinite(chars) || chars < 0)
    return { stream: maxUpstreamStreamBytes, body: maxUpstreamResponseBytes, fromCeiling: false };
  return {
    stream: Math.min(maxUpstreamStreamBytes, envelopeBytes + chars * streamBytesPerAnswerChar),
    body: Math.min(maxUpstreamResponseBytes, envelopeBytes + chars * bodyBytesPerAnswerChar),
    fromCeiling: true,
  };
}

/** The error for a body past its bound: an answer too long when the bound is the call's ceiling's. */
function overBound(what: 'stream' | 'response', limit: number, size: number, status: number, fromCeiling: boolean): Error {
  if (fromCeiling && status < 300) return new AnswerTooLongError(limit, 'bytes', size);
  return new UnexpectedResponseError(`The provider's ${what} passed ${limit} bytes; it was cut off.`, status);
}

/** The `accept` an adapter sends for a streamed call: a 2xx is then handed on as it arrives. */
export const eventStream = 'text/event-stream';

let pool: Agent | undefined;

/** One pool for every provider call of the process, made on the first call. */
function dispatcher(): Agent {
  pool ??= new Agent();
  return pool;
}

/**
 * A `Response` whose body was read already: its status and headers are the platform's, its body
 * methods answer from the bytes. (`new Response(bytes)` would wrap them in a `ReadableStream` again.)
 */
export class BufferedResponse extends Response {
  readonly #bytes: Uint8Array;
  readonly #url: string;
  #used = false;

  constructor(status: number, headers: Headers, bytes: Uint8Array, url: string) {
    super(null, { status, headers });
    this.#bytes = bytes;
    this.#url = url;
  }

  override get url(): string {
    return this.#url;
  }

  override get bodyUsed(): boolean {
    return this.#used;
  }

  /** The bytes once, as a body is read once. */
  #take(): Uint8Array {
    if (this.#used) throw new TypeError('Body is unusable: Body has already been read');
    this.#used = true;
    return this.#bytes;
  }

  override async arrayBuffer(): Promise<ArrayBuffer> {
    return new Uint8Array(this.#take()).buffer;
  }

  override async bytes(): Promise<Uint8Array<ArrayBuffer>> {
    return new Uint8Array(this.#take());
  }

  override async blob(): Promise<Blob> {
    return new Blob([new Uint8Array(this.#take())], { type: this.headers.get('content-type') ?? '' });
  }

  /** UTF-8, a byte-order mark dropped, as `Response.text()` decodes. */
  override async text(): Promise<string> {
    return utf8.decode(this.#take());
  }

  override async json(): Promise<unknown> {
    return JSON.parse(await this.text()) as unknown;
  }

  override clone(): BufferedResponse {
    if (this.#used) throw new TypeError('Response.clone: Body has already been consumed.');
    return new BufferedResponse(this.status, new Headers(this.headers), this.#bytes, this.#url);
  }
}

const utf8 = new TextDecoder('utf-8');

/** A `Response` whose body is the provider's event stream as it arrives. */
class StreamedResponse extends Response {
  readonly #url: string;

  constructor(status: number, headers: Headers, body: ReadableStream<Uint8Array>, url: string) {
    super(body, { status, headers });
    this.#url = url;
  }

  override get url(): string {
    return this.#url;
  }
}

/**
 * undici's body as a `ReadableStream`, read as the consumer pulls (the socket is paused while the
 * consumer is behind), cut off as `UnexpectedResponseError` once it passes `limit` bytes. The call's
 * signal still aborts it (undici errors the body with an `AbortError`); cancelling it closes the socket.
 */
function streamBody(
  body: Dispatcher.ResponseData['body'],
  limit: number,
  status: number,
  fromCeiling: boolean,
): ReadableStream<Uint8Array> {
  let size = 0;
  let settled = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        body.on('data', (chunk: Buffer) => {
          if (settled) return;
          size += chunk.length;
          if (size > limit) {
            settled = true;
            discard(body);
            controller.error(overBound('stream', limit, size, status, fromCeiling));
            return;
          }
          enqueueEvents(controller, chunk);
          if ((controller.desiredSize ?? 1) <= 0) body.pause();
        });
        body.once('end', () => {
          if (settled) return;
          settled = true;
          controller.close();
        });
        body.on('error', (error: Error) => {
          if (settled) return;
          settled = true;
          controller.error(error);
        });
      },
      pull() {
        body.resume();
      },
      cancel() {
        settled = true;
        discard(body);
      },
    },
    { highWaterMark: 8 },
  );
}

const eventEnd = Buffer.from('\n\n');

/**
 * Hands a chunk of an event stream on one event at a time (views of the same bytes, no copy). openai v6
 * joins and re-slices its pending bytes once per event it finds (`iterSSEChunks`), so a socket read that
 * holds many events (a provider or a proxy that writes faster than it is read) costs it time quadratic in
 * the read's size. Measured on the emulator's notes answer (425 events, sent at once): 7.5–8.9 ms of CPU
 * per call read as the socket gave it, 5.3–6.4 ms handed on an event at a time (3 alternating runs of
 * 3 × 200 calls, load ~16). A chunk without an event's end goes on whole.
 */
function enqueueEvents(controller: ReadableStreamDefaultController<Uint8Array>, chunk: Buffer): void {
  let start = 0;
  for (let end = chunk.indexOf(eventEnd); end !== -1; end = chunk.indexOf(eventEnd, start)) {
    controller.enqueue(chunk.subarray(start, end + 2));
    start = end + 2;
  }
  if (start < chunk.length) controller.enqueue(start === 0 ? chunk : chunk.subarray(start));
}

/** `content-type` without its parameters, lower-cased. */
function mediaType(headers: Record<string, string | string[] | undefined>): string {
  const value = headers['content-type'];
  const first = Array.isArray(value) ? value[0] : value;
  return (first ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
}

/** The request's headers as undici's flat list (`[name, value, name, value, …]`). */
function headerList(headers: Headers): string[] {
  const list: string[] = [];
  headers.forEach((value, name) => list.push(name, value));
  return list;
}

/** The response's headers (undici's record, a list for repeated ones) as a `Headers`. */
function responseHeaders(raw: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers();
  for (const name in raw) {
    const value = raw[name];
    if (value === undefined) continue;
    if (typeof value === 'string') headers.append(name, value);
    else for (const each of value) headers.append(name, each);
  }
  return headers;
}

/**
 * Closes a body that will not be read. undici reports a body destroyed without an error as an `error`
 * event (`AbortError`), which would be an uncaught exception without a listener.
 */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** The body, whole, or a rejection once it passes `limit` bytes (the rest is not read). */
function readBody(
  body: Dispatcher.ResponseData['body'],
  limit: number,
  status: number,
  fromCeiling: boolean,
): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        discard(body);
        reject(overBound('response', limit, size, status, fromCeiling));
        return;
      }
      chunks.push(chunk);
    });
    body.on('error', reject);
    body.once('end', () =>
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size)),
    );
  });
}

/**
 * Why an answer is refused before its body is read (the provider's fault, `server_error`), or undefined:
 * a content coding that was not asked for, a status no `Response` can carry, a redirect (no provider API
 * redirects a call: it says the base URL or the provider is wrong, not the caller).
 */
function refusal(status: number, headers: Record<string, string | string[] | undefined>): string | undefined {
  const coding = headers['content-encoding'];
  if (coding !== undefined && coding !== 'identity')
    return `The provider answered with a content coding that was not asked for (${String(coding)}).`;
  if (status < 200 || status > 599) return `The provider answered with HTTP status ${status}.`;
  if (status >= 300 && status < 400)
    return `The provider answered ${status}, a redirect (not followed) to ${String(headers['location'] ?? 'nowhere')}.`;
  return undefined;
}

/** `fetch` for the upstream calls: see the module's comment for what it keeps and what it changes. */
export async function upstreamFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const body = init?.body;
  if (input instanceof Request || (body !== undefined && body !== null && typeof body !== 'string'))
    return fetch(input, init);
  const url = String(input);
  const bounds = readBoundsOf(init);
  const requestHeaders = init?.headers instanceof Headers ? init.headers : new Headers(init?.headers);
  const {
    statusCode,
    headers,
    body: responseBody,
  } = await request(url, {
    method: (init?.method ?? 'GET').toUpperCase() as Dispatcher.HttpMethod,
    headers: headerList(requestHeaders),
    body: body ?? null,
    signal: init?.signal ?? null,
    dispatcher: dispatcher(),
  });
  const refused = refusal(statusCode, headers);
  if (refused !== undefined) {
    discard(responseBody);
    throw new UnexpectedResponseError(refused, statusCode);
  }
  // A streamed call: a 2xx event stream is handed on as it arrives; a 2xx that is anything else is not
  // the answer that was asked for (a proxy's page, a whole JSON answer), refused before the SDK reads it.
  // An error status keeps its (small) body read whole, for the SDK's error classes.
  if (statusCode < 300 && (requestHeaders.get('accept') ?? '').includes(eventStream)) {
    const type = mediaType(headers);
    if (type !== eventStream) {
      discard(responseBody);
      throw new UnexpectedResponseError(
        `A stream was asked for; the provider answered ${statusCode} ${type || 'without a content type'}.`,
        statusCode,
      );
    }
    const stream = streamBody(responseBody, bounds.stream, statusCode, bounds.fromCeiling);
    return new StreamedResponse(statusCode, responseHeaders(headers), stream, url);
  }
  const bytes = await readBody(responseBody, bounds.body, statusCode, bounds.fromCeiling);
  return new BufferedResponse(statusCode, responseHeaders(headers), bytes, url);
}
