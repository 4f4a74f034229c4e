/**
 * What an image codec (DCTDecode, JPXDecode, CCITTFaxDecode, JBIG2Decode) would decode a stream to,
 * estimated from the headers instead of decoded: the scan (stream-scan.ts) only needs the size, and an
 * upper bound is enough. Used for streams that are not marked `/Subtype /Image`: text extraction never
 * decodes an image XObject, but pdf.js does decode a content stream, font or CMap whatever its filter.
 */
import type { PdfDict } from './pdf-syntax.js';

/** Image filter names as pdf.js knows them (abbreviations included). */
export const imageFilters = new Set(['DCTDecode', 'DCT', 'JPXDecode', 'JPX', 'CCITTFaxDecode', 'CCF', 'JBIG2Decode']);

/** Header bytes read to find an image's dimensions. */
export const imageHeaderBytes = 1024 * 1024;

/**
 * Decoded bytes of an image-codec layer: `header` is the start of its input (up to `imageHeaderBytes`),
 * `inputBytes` the whole input's length.
 */
export function estimateImageBytes(filter: string, header: Uint8Array, inputBytes: number, params: PdfDict | undefined, dict: PdfDict): number {
  const declared = intParam(dict, 'Width') * intParam(dict, 'Height');
  if (filter === 'DCTDecode' || filter === 'DCT') return Math.max(jpegBytes(header), declared * 4);
  if (filter === 'JPXDecode' || filter === 'JPX') return Math.max(jpxBytes(header), declared * 4);
  if (filter === 'JBIG2Decode') return Math.ceil(declared / 8);
  // CCITT: at least one bit of input per row (a blank 2D row is one V0 code), Columns pixels a row.
  const columns = intParam(params, 'Columns') || 1728;
  const rowsClaimed = intParam(params, 'Rows');
  const rows = rowsClaimed > 0 ? Math.min(rowsClaimed, inputBytes * 8) : inputBytes * 8;
  return Math.ceil(columns / 8) * rows;
}

function intParam(dict: PdfDict | undefined, key: string): number {
  const value = dict?.get(key);
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : 0;
}

/** Width × height × components of the first SOF marker of a JPEG. */
function jpegBytes(header: Uint8Array): number {
  for (let at = 0; at + 9 < header.length; at += 1) {
    if (header[at] !== 0xff) continue;
    const marker = header[at + 1] ?? 0;
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (!isFrame) continue;
    const height = ((header[at + 5] ?? 0) << 8) | (header[at + 6] ?? 0);
    const width = ((header[at + 7] ?? 0) << 8) | (header[at + 8] ?? 0);
    const components = header[at + 9] ?? 0;
    return width * height * Math.max(components, 1);
  }
  return 0;
}

/** Image area × components of a JPEG 2000 codestream's SIZ marker. */
function jpxBytes(header: Uint8Array): number {
  const view = Buffer.from(header.buffer, header.byteOffset, header.byteLength);
  const at = view.indexOf(Buffer.from([0xff, 0x51]));
  if (at < 0 || at + 40 > view.length) return 0;
  const width = view.readUInt32BE(at + 6) - view.readUInt32BE(at + 14);
  const height = view.readUInt32BE(at + 10) - view.readUInt32BE(at + 18);
  const components = view.readUInt16BE(at + 38);
  return Math.max(0, width) * Math.max(0, height) * Math.max(components, 1);
}
