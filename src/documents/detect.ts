const pdfMagic = Buffer.from('%PDF-', 'latin1');

/** How far into the file the `%PDF-` header may start (readers tolerate leading junk up to 1 KiB). */
const pdfHeaderWindow = 1024;

/** True when `%PDF-` occurs within the first 1024 bytes: a PDF by its bytes, whatever its name or type. */
export function looksLikePdf(bytes: Uint8Array): boolean {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, pdfHeaderWindow));
  return head.indexOf(pdfMagic) !== -1;
}
