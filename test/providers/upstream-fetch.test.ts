import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import {
  createAdapters,
  createClaudeAdapter,
  createGptAdapter,
  type ProviderAdapter,
} from '../../src/providers/index.js';
import { loadProviderSdks } from '../../src/providers/claude-sdk.js';
import {
  BufferedResponse,
  maxUpstreamResponseBytes,
  upstreamFetch,
} from '../../src/providers/upstream-fetch.js';
import { UnexpectedResponseError } from '../../src/providers/upstream-errors.js';
import { Secret } from '../../src/security/secret.js';
import { writeChunks } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';

/**
 * The upstream transport (src/providers/upstream-fetch.ts): what the SDKs and the TimelyGPT wire read
 * from it is what `fetch` gave them, its bounds hold, and every adapter sends through it, not through
 * the global `fetch`. Over real sockets to a server of the test's own (and the emulator).
 */
describe('upstreamFetch', () => {
  let server: Server;
  let base: string;
  let connections = 0;
  const seen: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[] = [];
  let respond: (request: IncomingMessage, response: ServerResponse) => void = (_request, response) => {
    response.end();
  };

  beforeAll(async () => {
    server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        seen.push({
          method: request.method ?? '',
          url: request.url ?? '',
          headers: request.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        });
        respond(request, response);
      });
    });
    server.keepAliveTimeout = 30_000;
    server.on('connection', () => {
      connections += 1;
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  afterEach(() => {
    seen.length = 0;
  });

  it('sends the method (upper-cased), the headers and the body as given', async () => {
    respond = (_request, response) => response.end('{}');
    const headers = new Headers({ 'content-type': 'application/json', 'x-test': 'one' });
    await upstreamFetch(`${base}/v1/chat?x=1`, {
      method: 'post',
      headers,
      body: '{"a":1}',
      signal: openSignal(),
    });
    await upstreamFetch(`${base}/plain`, { headers: { accept: 'text/plain' } });
    expect(seen[0]).toMatchObject({
      method: 'POST',
      url: '/v1/chat?x=1',
      body: '{"a":1}',
      headers: { 'content-type': 'application/json', 'x-test': 'one' },
    });
    // No content coding asked for, so none has to be decoded.
    expect(seen[0]?.headers['accept-encoding']).toBeUndefined();
    expect(seen[1]).toMatchObject({
      method: 'GET',
      url: '/plain',
      body: '',
      headers: { accept: 'text/plain' },
    });
  });

  it('answers a real Response: status, headers (repeated ones kept), the body read once, as text or JSON', async () => {
    respond = (_request, response) => {
      response.statusCode = 429;
      response.setHeader('content-type', 'application/json; charset=utf-8');
      response.setHeader('retry-after', '7');
      response.setHeader('set-cookie', ['a=1', 'b=2']);
      // A byte-order mark, which Response.text() drops.
      response.end(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"error":"slow down, ü"}')]));
    };
    const url = `${base}/limited`;
    const response = await upstreamFetch(url, { method: 'POST', body: '{}' });
    expect(response).toBeInstanceOf(Response);
    expect(response.status).toBe(429);
    expect(response.ok).toBe(false);
    expect(response.url).toBe(url);
    expect(response.headers.get('retry-after')).toBe('7');
    expect(response.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    const copy = response.clone();
    expect(await response.json()).toEqual({ error: 'slow down, ü' });
    expect(response.bodyUsed).toBe(true);
    await expect(response.text()).rejects.toThrow(TypeError);
    expect(await copy.text()).toBe('{"error":"slow down, ü"}');
    const bytes = await (await upstreamFetch(url)).bytes();
    expect(bytes[0]).toBe(0xef);
  });

  it('keeps its connections open across calls (one pool for the process)', async () => {
    respond = (_request, response) => response.end('ok');
    await upstreamFetch(`${base}/warm`);
    const before = connections;
    for (let index = 0; index < 5; index += 1)
      expect(await (await upstreamFetch(`${base}/again`)).text()).toBe('ok');
    expect(connections).toBe(before);
  });

  it(`cuts a body off past ${maxUpstreamResponseBytes} bytes: the call fails, the memory is not spent`, async () => {
    respond = (_request, response) => {
      response.setHeader('content-type', 'application/json');
      writeChunks(response, Buffer.alloc(1024 * 1024, 0x20), 64);
    };
    const rejection = await upstreamFetch(`${base}/endless`).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(rejection).toBeInstanceOf(UnexpectedResponseError);
    expect((rejection as Error).message).toContain(String(maxUpstreamResponseBytes));
  });

  it.each(['gpt', 'claude'] as const)(
    "an oversized, content-coded or redirecting answer fails the %s call as the provider's server_error",
    async (provider) => {
      await loadProviderSdks([{ provider: 'claude' }]);
      const adapter = (
        provider === 'gpt'
          ? createGptAdapter({ baseUrl: base, model: 'm' })
          : createClaudeAdapter({ baseUrl: base, model: 'm' })
      ) as ProviderAdapter;
      const classes: string[] = [];
      for (const answer of ['oversized', 'gzip', 'redirect']) {
        respond = (_request, response) => {
          response.setHeader('content-type', 'application/json');
          if (answer === 'redirect') {
            response.statusCode = 307;
            response.setHeader('location', 'https://elsewhere.invalid/v1');
            response.end();
          } else if (answer === 'gzip') {
            response.setHeader('content-encoding', 'gzip');
            response.end(gzipSync('{}'));
          } else response.end(Buffer.alloc(maxUpstreamResponseBytes + 1, 0x20));
        };
        const error = await adapter.generate(studyRequest(), new Secret('test-key-0001'), openSignal()).then(
          () => undefined,
          (rejection: unknown) => rejection,
        );
        classes.push(adapter.classify(error).errorClass);
      }
      expect(classes).toEqual(['server_error', 'server_error', 'server_error']);
    },
  );

  it('refuses a body sent with a content coding it did not ask for', async () => {
    respond = (_request, response) => {
      response.setHeader('content-encoding', 'gzip');
      response.end(gzipSync('{"a":1}'));
    };
    await expect(upstreamFetch(`${base}/gzip`)).rejects.toBeInstanceOf(UnexpectedResponseError);
  });

  it("rejects as an AbortError when the call's signal fires, headers or body still to come", async () => {
    respond = (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"partial":');
    };
    const controller = new AbortController();
    const pending = upstreamFetch(`${base}/stall`, { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('hands a body it does not send itself (bytes, a stream) to the global fetch, unchanged', async () => {
    respond = (_request, response) => response.end('done');
    const response = await upstreamFetch(`${base}/bytes`, {
      method: 'POST',
      body: new TextEncoder().encode('raw'),
    });
    expect(response).not.toBeInstanceOf(BufferedResponse);
    expect(await response.text()).toBe('done');
    // Found by its path: the request an earlier test abandoned (the stalled one) may be seen after this began.
    expect(seen.find((request) => request.url === '/bytes')?.body).toBe('raw');
  });
});

describe('every adapter sends through upstreamFetch, never the global fetch', () => {
  let emulator: Emulator;
  beforeAll(async () => {
    emulator = await startEmulator();
    await loadProviderSdks([{ provider: 'claude' }]);
  });
  afterAll(async () => {
    await emulator.close();
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it.each(['gpt', 'claude', 'timelygpt'] as const)(
    '%s answers with the global fetch out of reach',
    async (provider) => {
      const adapters = createAdapters({
        anthropicBaseUrl: emulator.anthropicBaseUrl,
        openaiBaseUrl: emulator.openaiBaseUrl,
        timelygptBaseUrl: emulator.timelygptBaseUrl,
        claudeModel: 'claude-emu-1',
        gptModel: 'gpt-emu-1',
        timelygptModel: 'timely-emu-1',
        timelygptTokenTtlMs: 60_000,
      });
      const globalFetch = vi.fn(() => Promise.reject(new Error('the global fetch was called')));
      vi.stubGlobal('fetch', globalFetch);
      const answer = await adapters[provider].generate(
        studyRequest(),
        new Secret(`test-${provider}-key-0001`),
        openSignal(),
      );
      expect(answer.text.length).toBeGreaterThan(0);
      expect(globalFetch).not.toHaveBeenCalled();
    },
  );
});
