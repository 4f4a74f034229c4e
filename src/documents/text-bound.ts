import { PdfRejectedError } from './errors.js';

/** Default of `ExtractOptions.maxTextBytes` (PDF_MAX_TEXT_MB=8): a 1,000-page book of ~3 KB a page is 3 MB. */
export const defaultMaxTextBytes = 8 * 1024 * 1024;

/**
 * Text a PDF may extract to per byte of its file, above `amplificationFloorBytes`. A real PDF's text is
 * at most a few times its file (the content streams that draw it are larger than the text, fonts and
 * images come on top); an 8 KB file that draws one compressed stream on every page extracted to 1.67 M
 * characters, two hundred times its size.
 */
const maxTextPerFileByte = 64;

/** Text any PDF may extract to whatever its size (a short file of dense text). */
const amplificationFloorBytes = 1024 * 1024;

/**
 * The stored text's budget in UTF-8 bytes, taken page by page as the text is read: past the smaller of
 * `maxTextBytes` (PDF_MAX_TEXT_MB) and 64 × the file's size (at least 1 MiB), the PDF is refused as
 * PDF_TEXT_LIMIT before more is read. Each document in a store then costs a bounded amount, and one
 * that costs much was paid for by uploading as much.
 */
export class TextBudget {
  private used = 0;
  private readonly limit: number;

  constructor(
    private readonly maxTextBytes: number,
    private readonly fileBytes: number,
  ) {
    this.limit = Math.min(maxTextBytes, Math.max(amplificationFloorBytes, fileBytes * maxTextPerFileByte));
  }

  /** Takes one page's text (and the blank line joining it to the last); throws PdfRejectedError past the budget. */
  take(pageText: string): void {
    if (pageText === '') return;
    this.used += Buffer.byteLength(pageText) + (this.used > 0 ? 2 : 0);
    if (this.used <= this.limit) return;
    const why =
      this.limit < this.maxTextBytes
        ? `more than ${maxTextPerFileByte} times the ${formatBytes(this.fileBytes)} file (a PDF that multiplies its text)`
        : `more than PDF_MAX_TEXT_MB (${formatBytes(this.maxTextBytes)})`;
    throw new PdfRejectedError('PDF_TEXT_LIMIT', `The PDF's text is ${why}; it was stopped at ${formatBytes(this.limit)}.`);
  }
}

function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
  return `${Math.max(1, Math.round(bytes / 1024))} KB`;
}
