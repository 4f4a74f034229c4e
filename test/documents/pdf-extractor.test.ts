import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPdfExtractor, PdfRejectedError, type PdfExtractor } from '../../src/documents/index.js';
import { extractWorkerEntry } from '../../src/documents/pdf-extractor.js';
import {
  corruptPdf,
  encryptedPdf,
  englishTextPdf,
  koreanTextPdf,
  scannedPdf,
} from '../fixtures/pdf/generate.js';

async function rejectionCode(promise: Promise<unknown>): Promise<string> {
  const error: unknown = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof PdfRejectedError))
    throw new Error(`expected a PdfRejectedError, got ${String(error)}`);
  return error.code;
}

describe.each(['worker', 'inline'] as const)('PDF extractor (%s)', (mode) => {
  let extractor: PdfExtractor;
  beforeAll(() => {
    extractor = createPdfExtractor({ mode });
  });
  afterAll(async () => {
    await extractor.close();
  });

  it('extracts English text with page boundaries as blank lines', async () => {
    const result = await extractor.extract(await englishTextPdf(3), { maxPdfPages: 50 });
    expect(result).toMatchObject({ pageCount: 3, pagesUsed: 3, warnings: [] });
    const pages = result.text.split('\n\n');
    expect(pages).toHaveLength(3);
    expect(pages[1]).toMatch(/^Chapter 2: Plant biology\nPhotosynthesis converts light energy/);
    // Chapter|2|Plant|biology + 10 + 12 + 12 + 12 + 10 words on each page
    expect(result.wordCount).toBe(3 * 60);
    expect(result.charCount).toBeGreaterThan(900);
  }, 120_000);

  it('extracts Korean text and counts its words', async () => {
    const result = await extractor.extract(await koreanTextPdf(2), { maxPdfPages: 50 });
    expect(result.text).toContain('광합성은 빛 에너지를 포도당에 저장된 화학 에너지로 바꾼다.');
    expect(result.text.split('\n\n')).toHaveLength(2);
    // per page: 제1장 식물 생물학 (3: a word is what spaces delimit in Korean) + 8 + 7 + 5 + 7 words
    expect(result.wordCount).toBe(2 * 30);
  }, 120_000);

  it('keeps only the first maxPdfPages pages, with a warning', async () => {
    const result = await extractor.extract(await englishTextPdf(6), { maxPdfPages: 4 });
    expect(result).toMatchObject({ pageCount: 6, pagesUsed: 4 });
    expect(result.text).toContain('Chapter 4:');
    expect(result.text).not.toContain('Chapter 5:');
    expect(result.warnings).toEqual([expect.stringMatching(/6 pages.*first 4.*pages 5-6 were left out/)]);
  });

  it('refuses a scanned PDF as NO_EXTRACTABLE_TEXT', async () => {
    expect(await rejectionCode(extractor.extract(await scannedPdf(3), { maxPdfPages: 50 }))).toBe(
      'NO_EXTRACTABLE_TEXT',
    );
  });

  it('refuses a truncated PDF as INVALID_PDF', async () => {
    expect(await rejectionCode(extractor.extract(await corruptPdf(), { maxPdfPages: 50 }))).toBe(
      'INVALID_PDF',
    );
  });

  it.each(['aes256', 'rc4'] as const)('refuses a %s PDF that needs a password as ENCRYPTED_PDF', async (cipher) => {
    const locked = await encryptedPdf(cipher, true);
    expect(await rejectionCode(extractor.extract(locked, { maxPdfPages: 50 }))).toBe('ENCRYPTED_PDF');
  });

  it.each(['aes256', 'rc4'] as const)('opens a %s PDF encrypted with an empty user password', async (cipher) => {
    const openable = await encryptedPdf(cipher, false);
    const result = await extractor.extract(openable, { maxPdfPages: 50 });
    expect(result).toMatchObject({ pageCount: 2, pagesUsed: 2 });
    expect(result.text).toContain('Chapter 2: Plant biology');
  });

  it('notes pages without text among the pages it used', async () => {
    const { PDFDocument } = await import('pdf-lib');
    const merged = await PDFDocument.create();
    for (const bytes of [await englishTextPdf(1), await scannedPdf(1)]) {
      const source = await PDFDocument.load(bytes);
      for (const page of await merged.copyPages(source, source.getPageIndices())) merged.addPage(page);
    }
    const result = await extractor.extract(await merged.save(), { maxPdfPages: 50 });
    expect(result.pagesUsed).toBe(2);
    expect(result.warnings).toEqual([expect.stringContaining('No text on page(s) 2')]);
  });
});

// Deadlines, memory caps and the queue of the worker pool: extract-pool.test.ts, compiled-worker.test.ts.

describe('extractWorkerEntry', () => {
  it('from TypeScript source, loads extract-worker.ts through tsx', () => {
    const sourceModule = new URL('../../src/documents/pdf-extractor.ts', import.meta.url).href;
    const workerSource = new URL('../../src/documents/extract-worker.ts', import.meta.url).href;
    const entry = extractWorkerEntry(sourceModule);
    expect(entry.url.href).toBe(workerSource);
    expect(entry.kind).toBe('eval');
    if (entry.kind === 'eval') expect(entry.code).toContain(`tsImport(${JSON.stringify(workerSource)}`);
  });

  it('from compiled JavaScript, starts extract-worker.js next to the module', () => {
    expect(extractWorkerEntry('file:///app/dist/src/documents/pdf-extractor.js')).toEqual({
      kind: 'file',
      url: new URL('file:///app/dist/src/documents/extract-worker.js'),
    });
  });
});
