import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createPdfExtractor, PdfRejectedError } from '../../src/documents/index.js';
import { scanPdfStreams } from '../../src/documents/stream-scan.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { flateBombPdf, lyingPageTreePdf, nestedFlateBombPdf, rawPdf } from '../fixtures/pdf/hostile.js';

const mb = 1024 * 1024;

async function code(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof PdfRejectedError)) throw new Error(`expected a PdfRejectedError, got ${String(error)}`);
  return error.code;
}

describe('scanPdfStreams', () => {
  it('counts what every zlib stream inflates to, nested layers included, and the page objects', async () => {
    const pdf = rawPdf([
      { dict: '<< /Type /Catalog /Pages 2 0 R >>' },
      { dict: '<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>' },
      { dict: '<< /Type /Page /Parent 2 0 R >>' },
      { dict: '<< /Type/Page /Parent 2 0 R >>' },
      { dict: '<< /Filter /FlateDecode >>', stream: deflateSync(Buffer.alloc(1000, 7)) },
      // Two layers: the outer inflates to the inner's compressed bytes, the inner to 5000 bytes.
      { dict: '<< /Filter [/FlateDecode /FlateDecode] >>', stream: deflateSync(deflateSync(Buffer.alloc(5000, 1))) },
      // Not zlib data (no header): not counted.
      { dict: '<< >>', stream: Buffer.from('BT (plain) Tj ET', 'latin1') },
      // An object stream holding a page dictionary: found once inflated.
      { dict: '<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>', stream: deflateSync(Buffer.from('9 0 << /Type /Page >>', 'latin1')) },
    ]);
    const scan = await scanPdfStreams(pdf, { maxDecodedBytes: mb });
    const innerCompressed = deflateSync(Buffer.alloc(5000, 1)).length;
    expect(scan.decodedBytes).toBe(1000 + innerCompressed + 5000 + '9 0 << /Type /Page >>'.length);
    // Pages: objects 3 and 4, and the one in the object stream; `/Type /Pages` is not a page.
    expect(scan.pageObjects).toBe(3);
    expect(scan.encrypted).toBe(false);
  });

  it('refuses a FlateDecode bomb (1 GiB of zeros in ~1 MB) as PDF_DECOMPRESSION_LIMIT', async () => {
    expect(await code(scanPdfStreams(await flateBombPdf(2 ** 30), { maxDecodedBytes: 64 * mb }))).toBe('PDF_DECOMPRESSION_LIMIT');
  });

  it('refuses a bomb hidden one zlib layer down', async () => {
    expect(await code(scanPdfStreams(await nestedFlateBombPdf(2 ** 28), { maxDecodedBytes: 64 * mb }))).toBe('PDF_DECOMPRESSION_LIMIT');
  });

  it('accepts streams that stay under the limit, to the byte', async () => {
    const pdf = await flateBombPdf(4 * mb);
    const textStream = 'BT /F1 12 Tf 50 700 Td (A page of readable text before the bomb.) Tj ET'.length;
    expect((await scanPdfStreams(pdf, { maxDecodedBytes: 4 * mb + textStream })).decodedBytes).toBe(4 * mb + textStream);
    expect(await code(scanPdfStreams(pdf, { maxDecodedBytes: 4 * mb + textStream - 1 }))).toBe('PDF_DECOMPRESSION_LIMIT');
  });
});

describe('page counts that are believed (inline extraction)', () => {
  const extractor = createPdfExtractor({ mode: 'inline' });

  it('refuses a page tree claiming 2^30 pages as PDF_TOO_MANY_PAGES', async () => {
    expect(await code(extractor.extract(lyingPageTreePdf(2 ** 30), { maxPdfPages: 50 }))).toBe('PDF_TOO_MANY_PAGES');
  });

  it('refuses a PDF declaring more than maxTotalPages real pages', async () => {
    expect(await code(extractor.extract(await englishTextPdf(12), { maxPdfPages: 50, maxTotalPages: 10 }))).toBe('PDF_TOO_MANY_PAGES');
    expect((await extractor.extract(await englishTextPdf(10), { maxPdfPages: 50, maxTotalPages: 10 })).pageCount).toBe(10);
  });

  it('reports the pages a file holds, not a larger /Count', async () => {
    const result = await extractor.extract(lyingPageTreePdf(40, 2), { maxPdfPages: 50 });
    expect(result.pageCount).toBe(2);
    expect(result.warnings).toContainEqual(expect.stringMatching(/declares 40 pages but the file holds 2/));
  });

  it('refuses a bomb before pdf.js reads it', async () => {
    expect(await code(extractor.extract(await flateBombPdf(2 ** 30), { maxPdfPages: 50, maxDecodedBytes: 64 * mb }))).toBe(
      'PDF_DECOMPRESSION_LIMIT',
    );
  });
});
