import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createMemoryDocumentStore,
  createPdfExtractor,
  type DocumentStore,
  type PdfExtractor,
} from '../../src/documents/index.js';
import { ApiError } from '../../src/http/errors.js';
import { documentsRoutes, loadDocumentOrThrow } from '../../src/http/routes/documents.js';
import {
  corruptPdf,
  encryptedPdf,
  englishTextPdf,
  koreanTextPdf,
  scannedPdf,
} from '../fixtures/pdf/generate.js';

interface TestApp {
  app: FastifyInstance;
  store: DocumentStore;
}

/** A minimal app: the zod compilers, an ApiError renderer, and the documents plugin. */
async function buildTestApp(
  options: { maxUploadMb?: number; maxPdfPages?: number; extractor?: PdfExtractor } = {},
): Promise<TestApp> {
  const store = createMemoryDocumentStore({ ttlSeconds: 7200 });
  const app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler((error, _request, reply) => {
    if (error instanceof ApiError) return reply.code(error.statusCode).send(error.toBody());
    return reply
      .code(500)
      .send({
        error: { code: 'INTERNAL_ERROR', message: error instanceof Error ? error.message : 'unknown' },
      });
  });
  await app.register(documentsRoutes, {
    store,
    maxUploadMb: options.maxUploadMb ?? 20,
    maxPdfPages: options.maxPdfPages ?? 50,
    ...(options.extractor === undefined ? {} : { extractor: options.extractor }),
  });
  await app.ready();
  return { app, store };
}

/** A multipart/form-data body built by the platform's own FormData encoder. */
async function multipartBody(
  parts: Record<string, { bytes: Uint8Array; fileName: string; type?: string } | string>,
) {
  const form = new FormData();
  for (const [name, value] of Object.entries(parts)) {
    if (typeof value === 'string') form.append(name, value);
    else
      form.append(
        name,
        new Blob([new Uint8Array(value.bytes)], { type: value.type ?? 'application/pdf' }),
        value.fileName,
      );
  }
  const request = new Request('http://localhost/', { method: 'POST', body: form });
  return {
    payload: Buffer.from(await request.arrayBuffer()),
    headers: { 'content-type': request.headers.get('content-type') ?? '' },
  };
}

async function upload(app: FastifyInstance, bytes: Uint8Array, fileName = 'notes.pdf', type?: string) {
  const body = await multipartBody({ file: { bytes, fileName, ...(type === undefined ? {} : { type }) } });
  return app.inject({ method: 'POST', url: '/v1/documents', ...body });
}

describe('POST /v1/documents', () => {
  let testApp: TestApp;
  beforeAll(async () => {
    testApp = await buildTestApp();
  });
  afterAll(async () => {
    await testApp.app.close();
  });

  it('201: stores an English PDF and answers its summary', async () => {
    const pdf = await englishTextPdf(3);
    const response = await upload(testApp.app, pdf, 'biology chapter.pdf');
    expect(response.statusCode).toBe(201);
    const body = response.json();
    expect(Object.keys(body).sort()).toEqual([
      'charCount',
      'documentId',
      'fileName',
      'outline',
      'pageCount',
      'pagesUsed',
      'sha256',
      'warnings',
      'wordCount',
    ]);
    expect(body).toMatchObject({
      fileName: 'biology chapter.pdf',
      pageCount: 3,
      pagesUsed: 3,
      wordCount: 180,
      warnings: [],
      outline: [],
    });
    expect(body.sha256).toBe(createHash('sha256').update(pdf).digest('hex'));
    const stored = await testApp.store.get(body.documentId);
    expect(stored?.text.split('\n\n')).toHaveLength(3);
    expect(stored).toMatchObject({ sha256: body.sha256, wordCount: 180, charCount: body.charCount });
    // Where each page begins: page N opens with its chapter line (the fixture's rule).
    expect(stored?.pageStarts).toHaveLength(3);
    stored?.pageStarts?.forEach((start, index) => expect(stored.text.startsWith(`Chapter ${index + 1}:`, start)).toBe(true));
  });

  it('201: the sha256 of a file that arrives in many chunks (hashed chunk by chunk) is the sha256 of its bytes', async () => {
    const { PDFDocument, StandardFonts } = await import('pdf-lib');
    const document = await PDFDocument.create();
    const page = document.addPage();
    page.drawText('Chlorophyll absorbs light in the chloroplasts.', { x: 50, y: 700, size: 12, font: await document.embedFont(StandardFonts.Helvetica) });
    // 600 KB of bytes no compressor shrinks, embedded as an attachment: the upload spans ten chunks and more.
    const padding = new Uint8Array(randomBytes(600 * 1024));
    await document.attach(padding, 'padding.bin', { mimeType: 'application/octet-stream' });
    const pdf = await document.save({ useObjectStreams: false });
    expect(pdf.byteLength).toBeGreaterThan(600 * 1024);
    // Streamed in 16 KiB pieces, as a socket delivers it: busboy hands the file over in many chunks.
    const body = await multipartBody({ file: { bytes: pdf, fileName: 'padded.pdf' } });
    const pieces = Array.from({ length: Math.ceil(body.payload.length / 16_384) }, (_, index) => body.payload.subarray(index * 16_384, (index + 1) * 16_384));
    const response = await testApp.app.inject({ method: 'POST', url: '/v1/documents', headers: body.headers, payload: Readable.from(pieces) });
    expect(response.statusCode, response.body).toBe(201);
    expect(response.json().sha256).toBe(createHash('sha256').update(pdf).digest('hex'));
  });

  it('201: a Korean PDF keeps its Hangul text', async () => {
    const response = await upload(testApp.app, await koreanTextPdf(2), '광합성.pdf');
    expect(response.statusCode).toBe(201);
    const body = response.json();
    expect(body).toMatchObject({ fileName: '광합성.pdf', pageCount: 2, wordCount: 60 });
    expect((await testApp.store.get(body.documentId))?.text).toContain(
      '엽록소는 주로 청색광과 적색광을 흡수하고',
    );
  });

  it('201: detects a PDF by its bytes, whatever its name and declared type', async () => {
    const response = await upload(testApp.app, await englishTextPdf(1), 'scan.txt', 'text/plain');
    expect(response.statusCode).toBe(201);
  });

  it('201: a PDF encrypted with an empty user password is accepted', async () => {
    const response = await upload(testApp.app, await encryptedPdf('aes256', false));
    expect(response.statusCode).toBe(201);
    expect(response.json()).toMatchObject({ pageCount: 2, pagesUsed: 2, wordCount: 120 });
  });

  it('201: only the path-free file name is kept', async () => {
    const response = await upload(testApp.app, await englishTextPdf(1), '../../etc/passwd.pdf');
    expect(response.json().fileName).toBe('passwd.pdf');
  });

  it('415 UNSUPPORTED_MEDIA_TYPE: a file named .pdf whose bytes are not a PDF', async () => {
    const response = await upload(
      testApp.app,
      Buffer.from('just some text, not a PDF at all'),
      'fake.pdf',
      'application/pdf',
    );
    expect(response.statusCode).toBe(415);
    expect(response.json().error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });

  it('415 UNSUPPORTED_MEDIA_TYPE: an empty file', async () => {
    const response = await upload(testApp.app, new Uint8Array(0));
    expect(response.statusCode).toBe(415);
    expect(response.json().error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });

  it.each([
    ['application/json', JSON.stringify({ file: 'x' })],
    ['application/pdf', '%PDF-1.7 raw bytes, not a form'],
    ['application/octet-stream', 'bytes'],
    ['text/plain', 'hello'],
  ])('415 UNSUPPORTED_MEDIA_TYPE: a %s body, not multipart', async (contentType, payload) => {
    const response = await testApp.app.inject({
      method: 'POST',
      url: '/v1/documents',
      headers: { 'content-type': contentType },
      payload,
    });
    expect(response.statusCode).toBe(415);
    expect(response.json()).toEqual({
      error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('multipart/form-data') },
    });
  });

  it('415 UNSUPPORTED_MEDIA_TYPE: no content type at all', async () => {
    const response = await testApp.app.inject({ method: 'POST', url: '/v1/documents' });
    expect(response.statusCode).toBe(415);
  });

  it('400 INVALID_REQUEST: a form without the field "file"', async () => {
    const body = await multipartBody({
      upload: { bytes: await englishTextPdf(1), fileName: 'a.pdf' },
      note: 'hello',
    });
    const response = await testApp.app.inject({ method: 'POST', url: '/v1/documents', ...body });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringContaining('"file"'),
    });
  });

  it('400 INVALID_REQUEST: a form with text fields only', async () => {
    const body = await multipartBody({ file: 'not a file, a text field' });
    const response = await testApp.app.inject({ method: 'POST', url: '/v1/documents', ...body });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.code).toBe('INVALID_REQUEST');
  });

  it('400 INVALID_REQUEST: a malformed multipart body', async () => {
    const response = await testApp.app.inject({
      method: 'POST',
      url: '/v1/documents',
      headers: { 'content-type': 'multipart/form-data; boundary=abc' },
      payload:
        '--abc\r\nContent-Disposition: form-data; name="file"; filename="a.pdf"\r\n\r\n%PDF-1.7 cut off',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.code).toBe('INVALID_REQUEST');
  });

  it('400 INVALID_REQUEST: multipart/form-data without a boundary', async () => {
    const response = await testApp.app.inject({
      method: 'POST',
      url: '/v1/documents',
      headers: { 'content-type': 'multipart/form-data' },
      payload: '%PDF-1.7',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.code).toBe('INVALID_REQUEST');
  });

  it('400 INVALID_PDF: a truncated PDF', async () => {
    const response = await upload(testApp.app, await corruptPdf());
    expect(response.statusCode).toBe(400);
    expect(response.json().error.code).toBe('INVALID_PDF');
  });

  it('400 ENCRYPTED_PDF: a PDF that needs a password', async () => {
    const response = await upload(testApp.app, await encryptedPdf('rc4', true));
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatchObject({
      code: 'ENCRYPTED_PDF',
      message: expect.stringContaining('password'),
    });
  });

  it('422 NO_EXTRACTABLE_TEXT: a scanned PDF (images only)', async () => {
    const response = await upload(testApp.app, await scannedPdf(3));
    expect(response.statusCode).toBe(422);
    expect(response.json().error.code).toBe('NO_EXTRACTABLE_TEXT');
  });
});

describe('POST /v1/documents limits', () => {
  it('413 FILE_TOO_LARGE: a 2 MB file over MAX_UPLOAD_MB=1, never reaching extraction', async () => {
    let extractions = 0;
    const inline = createPdfExtractor({ mode: 'inline' });
    const counting: PdfExtractor = {
      extract: (bytes, options) => {
        extractions += 1;
        return inline.extract(bytes, options);
      },
      close: () => inline.close(),
    };
    const { app } = await buildTestApp({ maxUploadMb: 1, extractor: counting });
    try {
      const big = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(2 * 1024 * 1024, 0x41)]);
      const response = await upload(app, big);
      expect(response.statusCode).toBe(413);
      expect(response.json().error).toMatchObject({ code: 'FILE_TOO_LARGE', maxUploadMb: 1 });
      expect(extractions).toBe(0);
      // Just under the limit still goes through to the PDF checks.
      const underLimit = await upload(
        app,
        Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(1024 * 1024 - 100, 0x41)]),
      );
      expect(underLimit.json().error.code).toBe('INVALID_PDF');
      expect(extractions).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('413 FILE_TOO_LARGE: a 64 MB upload streamed in chunks is refused while streaming', async () => {
    const { app } = await buildTestApp({ maxUploadMb: 1 });
    try {
      const boundary = 'studyhelperboundary';
      const chunk = Buffer.alloc(64 * 1024, 0x42);
      let sent = 0;
      const total = 64 * 1024 * 1024;
      const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="huge.pdf"\r\nContent-Type: application/pdf\r\n\r\n%PDF-1.7\n`;
      const body = Readable.from(
        (function* generate() {
          yield Buffer.from(head);
          while (sent < total) {
            sent += chunk.length;
            yield chunk;
          }
          yield Buffer.from(`\r\n--${boundary}--\r\n`);
        })(),
      );
      const heapBefore = process.memoryUsage().heapUsed;
      const response = await app.inject({
        method: 'POST',
        url: '/v1/documents',
        headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
        payload: body,
      });
      expect(response.statusCode).toBe(413);
      expect(response.json().error.code).toBe('FILE_TOO_LARGE');
      // The whole body was read through and dropped, not held: far less than 64 MB stayed on the heap.
      expect(sent).toBe(total);
      expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(32 * 1024 * 1024);
    } finally {
      await app.close();
    }
  });

  it('leaves pages past MAX_PDF_PAGES out with a warning (60 pages, limit 50)', async () => {
    const { app, store } = await buildTestApp({ maxPdfPages: 50 });
    try {
      const response = await upload(app, await englishTextPdf(60));
      expect(response.statusCode).toBe(201);
      const body = response.json();
      expect(body).toMatchObject({ pageCount: 60, pagesUsed: 50, wordCount: 50 * 60 });
      expect(body.warnings).toEqual([expect.stringContaining('pages 51-60 were left out')]);
      const text = (await store.get(body.documentId))?.text ?? '';
      expect(text).toContain('Chapter 50:');
      expect(text).not.toContain('Chapter 51:');
    } finally {
      await app.close();
    }
  }, 120_000);
});

describe('loadDocumentOrThrow', () => {
  it('404 DOCUMENT_NOT_FOUND for an unknown id', async () => {
    const store = createMemoryDocumentStore({ ttlSeconds: 60 });
    const error: unknown = await loadDocumentOrThrow(store, 'no-such-id').catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).toBody().error.code).toBe('DOCUMENT_NOT_FOUND');
    expect((error as ApiError).statusCode).toBe(404);
  });
});
