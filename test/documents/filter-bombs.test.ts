import fc from 'fast-check';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createPdfExtractor, PdfRejectedError } from '../../src/documents/index.js';
import { scanPdfStreams } from '../../src/documents/stream-scan.js';
import { chainBombPdf, encode, filterNames, lzwBombStream, tooFarBackBombPdf, type BombLayout, type FilterName } from '../fixtures/pdf/filter-bombs.js';
import { encryptedBombPdf } from '../fixtures/pdf/encrypted-bombs.js';
import { rawPdf } from '../fixtures/pdf/hostile.js';

// The collector, callable from the test: each fuzz run's fixture (up to 4 MB of zeros) is garbage once the run
// ends, and how long a runtime lets garbage pile up before collecting it is not what the memory bound judges.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

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
    let growth = 0;
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
          // Measured from after the fixture is built: its layers of encoding are the test's memory, not the scan's.
          collectGarbage();
          const before = process.memoryUsage().rss;
          expect(await outcome(pdf, fuzzLimit)).toBe('PDF_DECOMPRESSION_LIMIT');
          growth = Math.max(growth, process.memoryUsage().rss - before);
        },
      ),
      { numRuns: 40, seed: 28 },
    );
    // The scan holds a few 64 KiB chunks a layer, never a decoded stream whole.
    expect(growth).toBeLessThan(32 * mb);
  }, 120_000);
});

describe('Flate counted as pdf.js decodes it, not as zlib does', () => {
  it('refuses a stream of back-references "too far back" (zlib refuses it at once, pdf.js decodes zeros), alone or inside a valid Flate layer', async () => {
    for (const wrapped of [false, true]) {
      expect(await outcome(tooFarBackBombPdf(256 * mb, wrapped))).toBe('PDF_DECOMPRESSION_LIMIT');
    }
    // Counted to the byte as pdf.js makes it: 258 bytes a back-reference.
    const references = Math.ceil(mb / 258);
    expect(await outcome(tooFarBackBombPdf(mb))).toBe(references * 258);
  });

  it('counts what a stream decodes to past a corrupt checksum (zlib errors after its output, pdf.js ignores the checksum)', async () => {
    const data = Buffer.alloc(mb, 0x61);
    const stream = Buffer.from(deflateSync(data));
    stream.writeUInt32BE((stream.readUInt32BE(stream.length - 4) + 1) >>> 0, stream.length - 4);
    const pdf = rawPdf([
      { dict: '<< /Type /Catalog /Pages 2 0 R >>' },
      { dict: '<< /Type /Pages /Kids [3 0 R] /Count 1 >>' },
      { dict: '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>' },
      { dict: '<< /Filter /FlateDecode >>', stream },
    ]);
    // Not twice: the bytes zlib gave before its error are not counted again.
    expect(await outcome(pdf)).toBe(mb);
  });
});

describe('the streams of an encrypted PDF that opens without a password are counted decrypted', () => {
  for (const cipher of ['rc4-128', 'aes-256'] as const) {
    it(`refuses a Flate bomb in an encrypted PDF (${cipher}, empty user password), and counts the same file at 1 MB to the byte`, async () => {
      expect(await outcome(encryptedBombPdf(cipher, 256 * mb))).toBe('PDF_DECOMPRESSION_LIMIT');
      expect(await outcome(encryptedBombPdf(cipher, mb))).toBe(mb);
    });
  }

  it('opens those fixtures as pdf.js does (the text of the page is read), so the scan decrypts what pdf.js would', async () => {
    const extractor = createPdfExtractor({ mode: 'inline' });
    for (const cipher of ['rc4-128', 'aes-256'] as const) {
      const result = await extractor.extract(encryptedBombPdf(cipher, 1024), { maxPdfPages: 5 });
      expect(result.text).toContain('A page of readable text before the bomb.');
    }
  });

  it('refuses such a bomb before pdf.js reads it: PDF_TOO_COMPLEX for decompressed bytes, not the worker\'s memory', async () => {
    const extractor = createPdfExtractor({ mode: 'inline' });
    const refused = await extractor.extract(encryptedBombPdf('aes-256', 256 * mb), { maxPdfPages: 5 }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PdfRejectedError);
    expect((refused as PdfRejectedError).code).toBe('PDF_DECOMPRESSION_LIMIT');
  });
});
