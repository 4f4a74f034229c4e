/**
 * Smaller edges of hostile requests: headers over Node's limit get 431 with the code docs/errors.md gives
 * (`HEADERS_TOO_LARGE`, not `INVALID_REQUEST`); an upload's file name is cut to 255 UTF-8 bytes at a
 * character boundary, without bidi overrides, before it is stored or echoed.
 */
import { connect, type AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { staticGateway, testConfig } from '../http/support.js';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(): Promise<FastifyInstance> {
  const app = await buildApp({ config: testConfig({}), gateway: staticGateway(), documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }), processMetrics: false });
  apps.push(app);
  return app;
}

/** Writes `raw` on a new socket and reads everything the server sends until it closes. */
function exchange(port: number, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
  });
}

describe('431', () => {
  it('answers headers over 16 KiB with 431 HEADERS_TOO_LARGE in the contract body', async () => {
    const app = await start();
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    const answer = await exchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nx-padding: ${'a'.repeat(20 * 1024)}\r\n\r\n`);
    expect(answer.startsWith('HTTP/1.1 431 ')).toBe(true);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: { code: string } };
    expect(body.error.code).toBe('HEADERS_TOO_LARGE');
  });
});

describe('upload file names', () => {
  it('cuts a 100 KB name to 255 UTF-8 bytes at a character boundary, without bidi overrides', async () => {
    const app = await start();
    const form = new FormData();
    // 3 bytes a character: 255 bytes are 85 whole characters.
    form.append('file', new Blob([new Uint8Array(await englishTextPdf(1))], { type: 'application/pdf' }), `\u202e${'가'.repeat(34_000)}.pdf`);
    const request = new Request('http://localhost/', { method: 'POST', body: form });
    const response = await app.inject({
      method: 'POST',
      url: '/v1/documents',
      payload: Buffer.from(await request.arrayBuffer()),
      headers: { 'content-type': request.headers.get('content-type') ?? '' },
    });
    expect(response.statusCode).toBe(201);
    const fileName = (response.json() as { fileName: string }).fileName;
    expect(fileName).toBe('가'.repeat(85));
    expect(Buffer.byteLength(fileName)).toBe(255);
  }, 60_000);
});
