import fc from 'fast-check';
import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { PdfRejectedError } from '../../src/documents/index.js';
import { scanPdfStreams } from '../../src/documents/stream-scan.js';
import { chainBombPdf, encode, filterNames, lzwBombStream, type BombLayout, type FilterName } from '../fixtures/pdf/filter-bombs.js';
import { rawPdf } from '../fixtures/pdf/hostile.js';

const mb = 1024 * 1024;
const limit = 16 * mb;

async function outcome(pdf: Uint8Array, maxDecodedBytes = limit): Promise<string | number> {
  try {
    return (await scanPdfStreams(pdf, { maxDecodedBytes })).decodedBytes;
  } catch (error) {
    if (error instanceof PdfRejectedError) return error.code;
    throw error;
  }
}

/** What every layer of `chain` outputs for `decodedBytes` zeros, summed: the oracle of `decodedBytes`. */
function layerBytes(chain: readonly FilterName[], decodedBytes: number): number {
  let data: Uint8Array = new Uint8Array(decodedBytes);
  let total = data.length;
  for (const name of [...chain].reverse().slice(0, -1)) {
    data = encode(name, data);
    total += data.length;
  }
  return total;
}

describe('decompression bombs whatever their filter chain', () => {
  // Each of these takes gigabytes of RSS in pdf.js if let through; each must be refused before pdf.js.
  const variants: Array<[string, FilterName[], BombLayout]> = [
    ['Flate three times', ['FlateDecode', 'FlateDecode', 'FlateDecode'], {}],
    ['ASCIIHex then Flate', ['ASCIIHexDecode', 'FlateDecode'], {}],
    ['ASCII85 then Flate', ['ASCII85Decode', 'FlateDecode'], {}],
    ['spaces between `stream` and its line break', ['FlateDecode'], { afterKeyword: '   \n' }],
    ['a lone CR after `stream`', ['FlateDecode'], { afterKeyword: '\r' }],
    ['Flate then RunLength', ['FlateDecode', 'RunLengthDecode'], {}],
    ['LZW then Flate', ['LZWDecode', 'FlateDecode'], {}],
    ['a wrong /Length', ['FlateDecode', 'FlateDecode'], { length: 'wrong' }],
    ['an indirect /Length', ['FlateDecode', 'FlateDecode'], { length: 'indirect' }],
    ['an indirect /Filter', ['ASCIIHexDecode', 'FlateDecode'], { filter: 'indirect' }],
    ['a stream inside an object stream', ['FlateDecode', 'FlateDecode'], { placement: 'object-stream' }],
  ];

  for (const [name, chain, layout] of variants) {
    it(`refuses ${name} (256 MB of zeros) as PDF_DECOMPRESSION_LIMIT, and counts the same file at 1 MB to the byte`, async () => {
      expect(await outcome(chainBombPdf(chain, 256 * mb, layout))).toBe('PDF_DECOMPRESSION_LIMIT');
      const small = await outcome(chainBombPdf(chain, mb, layout));
      // The object stream's own decoded bytes count too: `6 0 ` and the stream object it holds.
      if (layout.placement === 'object-stream') expect(small).toBeGreaterThan(layerBytes(chain, mb));
      // The page's readable text stream is unfiltered: read in place, not counted.
      else expect(small).toBe(layerBytes(chain, mb));
    });
  }

  it('refuses an LZW stream that grows quadratically as pdf.js decodes it (7 KB → 11 MB)', async () => {
    const stream = lzwBombStream(1000);
    const pdf = rawPdf([
      { dict: '<< /Type /Catalog /Pages 2 0 R >>' },
      { dict: '<< /Type /Pages /Kids [3 0 R] /Count 1 >>' },
      { dict: '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>' },
      { dict: '<< /Filter /LZWDecode >>', stream },
    ]);
    // Oracle: one literal byte, then strings of 2, 3, … 3838 bytes (codes 258–4094), then 1000 × 3838.
    let expected = 1;
    for (let length = 2; length <= 3838; length += 1) expected += length;
    expected += 1000 * 3838;
    expect(await outcome(pdf, 64 * mb)).toBe(expected);
    expect(await outcome(pdf, expected - 1)).toBe('PDF_DECOMPRESSION_LIMIT');
  });

  it('counts a DCT content stream by the size its JPEG header declares, not its few bytes', async () => {
    // An SOF0 header declaring 60000 × 60000 × 3 (10.8 GB decoded) in 20 bytes.
    const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xc0, 0x00, 0x11, 0x08, 0xea, 0x60, 0xea, 0x60, 0x03, 0, 0, 0, 0, 0, 0, 0, 0]);
    const objects = (subtype: string) => [
      { dict: '<< /Type /Catalog /Pages 2 0 R >>' },
      { dict: '<< /Type /Pages /Kids [3 0 R] /Count 1 >>' },
      { dict: '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>' },
      { dict: `<< ${subtype} /Filter /DCTDecode >>`, stream: jpeg },
    ];
    expect(await outcome(rawPdf(objects('')))).toBe('PDF_DECOMPRESSION_LIMIT');
    // An image XObject is never decoded by text extraction: not counted.
    expect(await outcome(rawPdf(objects('/Subtype /Image /Width 60000 /Height 60000')))).toBe(0);
  });

  it('refuses a chain of more than 16 filters', async () => {
    const chain = Array.from({ length: 17 }, () => '/FlateDecode').join(' ');
    const pdf = rawPdf([{ dict: '<< /Type /Catalog >>' }, { dict: `<< /Filter [${chain}] >>`, stream: deflateSync(Buffer.from('x')) }]);
    expect(await outcome(pdf)).toBe('PDF_DECOMPRESSION_LIMIT');
  });

  it('fuzz: any chain of the standard filters and any stream layout is refused past the limit, in bounded memory', async () => {
    const fuzzLimit = mb;
    const before = process.memoryUsage().rss;
    let peak = before;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...filterNames), { minLength: 1, maxLength: 4 }),
        fc.record({
          afterKeyword: fc.constantFrom('\n', '\r\n', '\r', ' \n', '\t \t\r\n', '  '),
          length: fc.constantFrom('direct', 'wrong', 'indirect'),
          filter: fc.constantFrom('direct', 'indirect'),
          placement: fc.constantFrom('file', 'object-stream'),
        }) as fc.Arbitrary<BombLayout>,
        fc.integer({ min: fuzzLimit + 1, max: 4 * fuzzLimit }),
        async (chain, layout, decodedBytes) => {
          // `stream` followed by spaces and no line break at all: pdf.js starts the data after the next
          // line break, which is inside the data; that is a different (corrupt) stream, not this bomb.
          if (layout.afterKeyword === '  ') layout.afterKeyword = '  \n';
          const pdf = chainBombPdf(chain, decodedBytes, layout);
          expect(await outcome(pdf, fuzzLimit)).toBe('PDF_DECOMPRESSION_LIMIT');
          peak = Math.max(peak, process.memoryUsage().rss);
        },
      ),
      { numRuns: 40, seed: 28 },
    );
    // The fixtures allocate up to 4 MB of zeros each; the scan itself a few 64 KiB chunks a layer.
    expect(peak - before).toBeLessThan(128 * mb);
  }, 120_000);
});
