/**
 * A document's stored text has a byte bound of its own: an 8 KB PDF that drew one compressed stream on
 * each of its pages extracted to 1.67 M characters and was stored whole (2.3 MB in memory, 2 MB on disk,
 * each of up to 1,000 documents).
 */
import Fastify from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { describe, expect, it } from 'vitest';
import { createMemoryDocumentStore, createPdfExtractor, PdfRejectedError } from '../../src/documents/index.js';
import { TextBudget } from '../../src/documents/text-bound.js';
import { ApiError } from '../../src/http/errors.js';
import { documentsRoutes } from '../../src/http/routes/documents.js';
import { amplifyingTextPdf } from '../fixtures/pdf/hostile.js';

const mb = 1024 * 1024;

function refusal(run: () => void): string | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    if (error instanceof PdfRejectedError) return error.code;
    throw error;
  }
}

/** Feeds `pages` pages of `bytesPerPage` one-byte characters to a budget for a file of `fileBytes`. */
function feed(maxTextBytes: number, fileBytes: number, pages: number, page: string): string | undefined {
  const budget = new TextBudget(maxTextBytes, fileBytes);
  return refusal(() => {
    for (let index = 0; index < pages; index += 1) budget.take(page);
  });
}

describe('the text budget of one document', () => {
  it('keeps a 1,000-page book at the default 8 MB: 3 KB of English a page (3 MB), or 1,500 Hangul a page (4.5 MB)', () => {
    // The book's file: even at 1 byte of file per 3 bytes of text, far above 1/64 of it.
    expect(feed(8 * mb, 1_000_000, 1000, 'a'.repeat(3000))).toBeUndefined();
    expect(feed(8 * mb, 1_500_000, 1000, '가'.repeat(1500))).toBeUndefined();
  });

  it('refuses text past PDF_MAX_TEXT_MB, whatever the file size', () => {
    // 1,000 pages of 9 KB: 9 MB of text from a 20 MB file.
    expect(feed(8 * mb, 20 * mb, 1000, 'a'.repeat(9 * 1024))).toBe('PDF_TEXT_LIMIT');
  });

  it('refuses text past 64 times the file (at least 1 MiB): 8 KB may give 1 MiB, not 1.1', () => {
    expect(feed(8 * mb, 8 * 1024, 1, 'a'.repeat(mb - 1))).toBeUndefined();
    expect(feed(8 * mb, 8 * 1024, 11, 'a'.repeat(100 * 1024))).toBe('PDF_TEXT_LIMIT');
    // 100 KB of file may give 6.4 MB: 6 MB fits, 7 MB does not.
    expect(feed(8 * mb, 100 * 1024, 6, 'a'.repeat(mb))).toBeUndefined();
    expect(feed(8 * mb, 100 * 1024, 7, 'a'.repeat(mb))).toBe('PDF_TEXT_LIMIT');
  });
});

describe('a PDF that multiplies its text', () => {
  it('is refused 422 PDF_TOO_COMPLEX (limit text_bytes) and nothing is stored: 50 pages × 34,000 characters from a few KB', async () => {
    const pdf = amplifyingTextPdf(50, 34_000);
    expect(pdf.byteLength).toBeLessThan(16 * 1024);
    const store = createMemoryDocumentStore({ ttlSeconds: 60 });
    const stored: string[] = [];
    const app = Fastify();
    app.setValidatorCompiler(validatorCompiler);
    app.setSerializerCompiler(serializerCompiler);
    app.setErrorHandler((error, _request, reply) => {
      if (error instanceof ApiError) return reply.code(error.statusCode).send(error.toBody());
      return reply.code(500).send({ error: { code: 'INTERNAL_ERROR', message: String(error) } });
    });
    await app.register(documentsRoutes, {
      store: { put: async (document) => void stored.push(document.documentId), get: (id) => store.get(id) },
      maxUploadMb: 20,
      maxPdfPages: 50,
      extractor: createPdfExtractor({ mode: 'inline' }),
    });
    try {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(pdf)], { type: 'application/pdf' }), 'small.pdf');
      const request = new Request('http://localhost/', { method: 'POST', body: form });
      const response = await app.inject({
        method: 'POST',
        url: '/v1/documents',
        payload: Buffer.from(await request.arrayBuffer()),
        headers: { 'content-type': request.headers.get('content-type') ?? '' },
      });
      expect(response.statusCode).toBe(422);
      expect(response.json().error).toMatchObject({ code: 'PDF_TOO_COMPLEX', limit: 'text_bytes' });
      expect(response.json().error.message).toContain('64 times');
      expect(stored).toEqual([]);
    } finally {
      await app.close();
    }
  }, 120_000);
});
