/**
 * An upload's body in the main process: its place in the extractor is held before a byte of the body
 * is read (a full queue answers 503 while the client is still sending), and the file streams to disk,
 * never held whole (30 uploads of 20 MB held whole took the process past 1.4 GB).
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readdirSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { dirname } from 'node:path';
import { Readable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore, createPdfExtractor, PdfRejectedError, type PdfExtractor, type PdfInput } from '../../src/documents/index.js';
import { ApiError } from '../../src/http/errors.js';
import { documentsRoutes } from '../../src/http/routes/documents.js';

/** A full garbage collection (V8's `gc`, exposed for this test file). */
const collect = ((): (() => void) => {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();
let before = 0;

const apps: FastifyInstance[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function buildTestApp(extractor: PdfExtractor, maxUploadMb = 32): Promise<FastifyInstance> {
  const app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler((error, _request, reply) => {
    if (error instanceof ApiError) return reply.code(error.statusCode).send(error.toBody());
    return reply.code(500).send({ error: { code: 'INTERNAL_ERROR', message: String(error) } });
  });
  await app.register(documentsRoutes, { store: createMemoryDocumentStore({ ttlSeconds: 60 }), maxUploadMb, maxPdfPages: 50, extractor });
  await app.ready();
  apps.push(app);
  return app;
}

const boundary = 'uploadspoolboundary';
const partHead = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.pdf"\r\nContent-Type: application/pdf\r\n\r\n`;
const partTail = `\r\n--${boundary}--\r\n`;

async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

describe('an upload streams to disk, never held whole', () => {
  it('hands the extractor a file holding exactly the bytes sent, removes it (and a refused one) after the answer, and holds no copy meanwhile', async () => {
    const seen: { path: string; sha256: string; existed: boolean }[] = [];
    let heldWhileExtracting = Number.NaN;
    const extractor: PdfExtractor = {
      extract: async (input: PdfInput) => {
        // What the main process holds once the body is read, garbage collected: the upload, if it kept it.
        collect();
        heldWhileExtracting = process.memoryUsage().arrayBuffers - before;
        if (input instanceof Uint8Array) throw new Error('the upload reached the extractor as bytes held in memory');
        seen.push({ path: input.path, sha256: await sha256OfFile(input.path), existed: existsSync(input.path) });
        throw new PdfRejectedError('INVALID_PDF', 'not a real PDF');
      },
      close: async () => {},
    };
    const app = await buildTestApp(extractor, 25);
    // Past MAX_UPLOAD_MB: refused (its file removed, checked below with the folder).
    const tooLarge = await app.inject({
      method: 'POST',
      url: '/v1/documents',
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
      payload: Buffer.concat([Buffer.from(`${partHead}%PDF-1.7\n`), Buffer.alloc(26 * 1024 * 1024, 0x41), Buffer.from(partTail)]),
    });
    expect(tooLarge.statusCode).toBe(413);
    expect(seen).toHaveLength(0);
    // 24 MB: one 64 KiB buffer sent again and again, so only what the service keeps of it grows.
    const chunk = Buffer.alloc(64 * 1024, 0x41);
    const total = 24 * 1024 * 1024;
    const expected = createHash('sha256').update('%PDF-1.7\n');
    for (let sent = 0; sent < total; sent += chunk.length) expected.update(chunk);
    const body = Readable.from(
      (function* generate() {
        yield Buffer.from(`${partHead}%PDF-1.7\n`);
        for (let sent = 0; sent < total; sent += chunk.length) yield chunk;
        yield Buffer.from(partTail);
      })(),
    );
    collect();
    before = process.memoryUsage().arrayBuffers;
    const response = await app.inject({
      method: 'POST',
      url: '/v1/documents',
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
      payload: body,
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.code).toBe('INVALID_PDF');
    expect(seen).toHaveLength(1);
    const [file] = seen;
    expect(file?.existed).toBe(true);
    expect(file?.sha256).toBe(expected.digest('hex'));
    // Gone once answered, and nothing else left in the spool folder.
    expect(existsSync(file?.path ?? '')).toBe(false);
    expect(readdirSync(dirname(file?.path ?? ''))).toEqual([]);
    // Held whole, the 24 MB body is still there when it is handed over; streamed, a few chunks at most.
    expect(heldWhileExtracting).toBeLessThan(4 * 1024 * 1024);
  }, 60_000);
});

/** Opens a raw connection and sends a request's head and the first `bodyBytes` of a body declared `declared` bytes long. */
async function partialUpload(port: number, declared: number, bodyBytes: number): Promise<{ socket: Socket; answer: Promise<string> }> {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  let received = '';
  const answer = new Promise<string>((resolve) => {
    socket.on('data', (data: Buffer) => {
      received += data.toString('latin1');
      if (/\r\n\r\n[\s\S]*\}/u.test(received)) resolve(received);
    });
    socket.on('close', () => resolve(received));
  });
  socket.on('error', () => {});
  const head = Buffer.from(`${partHead}%PDF-1.7\n`);
  socket.write(
    `POST /v1/documents HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${declared}\r\n\r\n`,
  );
  socket.write(Buffer.concat([head, Buffer.alloc(Math.max(0, bodyBytes - head.length), 0x41)]));
  return { socket, answer };
}

describe('an upload is refused before its body is read', () => {
  it('answers 503 PDF_EXTRACTOR_BUSY to a client still sending its body when every place is held, and gives a place back when its upload is abandoned', async () => {
    // One worker, nobody may wait: one place in all.
    const extractor = createPdfExtractor({ workers: 1, queueMax: 0 });
    const app = await buildTestApp(extractor);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const declared = 8 * 1024 * 1024;
    // The first upload holds the place while its body trickles in.
    const holder = await partialUpload(port, declared, 16 * 1024);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The second has sent 16 KB of its 8 MB: it is answered now, not after its body.
    const refused = await partialUpload(port, declared, 16 * 1024);
    const answer = await Promise.race([refused.answer, new Promise<string>((resolve) => setTimeout(() => resolve('no answer'), 15_000))]);
    expect(answer).toMatch(/^HTTP\/1\.1 503 /u);
    expect(answer).toContain('"code":"PDF_EXTRACTOR_BUSY"');
    // The holder gives up: its place comes back (a non-PDF is then answered 415, not 503).
    holder.socket.destroy();
    let status = 0;
    for (let attempt = 0; attempt < 100 && status !== 415; attempt += 1) {
      const response = await fetch(`http://127.0.0.1:${port}/v1/documents`, {
        method: 'POST',
        body: (() => {
          const form = new FormData();
          form.append('file', new Blob(['just text']), 'notes.txt');
          return form;
        })(),
      });
      status = response.status;
      if (status !== 415) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(status).toBe(415);
  }, 60_000);
});
