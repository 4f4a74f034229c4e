import type { PDFParse } from 'pdf-parse';

type PdfParseModule = typeof import('pdf-parse');
let pdfParseModule: Promise<PdfParseModule> | undefined;

/**
 * pdf-parse, loaded on first use: pdf.js's legacy build is large and replaces built-ins with
 * polyfills, which a thread that never extracts (the service's main thread) need not carry.
 */
function loadPdfParse(): Promise<PdfParseModule> {
  pdfParseModule ??= import('pdf-parse');
  return pdfParseModule;
}
import { PdfRejectedError } from './errors.js';
import { cleanPageText, countCharacters, countWords, joinPages } from './text-stats.js';
import type { ExtractedPdf } from './types.js';

/** Options for one extraction. */
export interface ExtractOptions {
  /** Pages past this number are left out, with a warning. */
  maxPdfPages: number;
}

/**
 * Extracts the text of a PDF on the calling thread with pdf-parse (pdf.js). Throws PdfRejectedError:
 * ENCRYPTED_PDF when a password is needed (an empty user password opens by itself and is accepted),
 * INVALID_PDF when the file is corrupt, NO_EXTRACTABLE_TEXT when the kept pages hold no text.
 * This blocks the event loop while pdf.js parses; the service calls it through `createPdfExtractor`.
 */
export async function extractPdfTextInline(
  bytes: Uint8Array,
  options: ExtractOptions,
): Promise<ExtractedPdf> {
  const { PDFParse, PasswordException } = await loadPdfParse();
  isPasswordError = (error) => error instanceof PasswordException;
  // pdf.js takes ownership of (transfers) the array it is given: hand it a copy.
  const parser = new PDFParse({ data: new Uint8Array(bytes), stopAtErrors: false });
  try {
    const pageCount = await loadPageCount(parser);
    const pagesUsed = Math.min(pageCount, options.maxPdfPages);
    const result = await readText(parser, pagesUsed);
    const pageTexts = result.pages.map((page) => cleanPageText(page.text));
    const text = joinPages(pageTexts);
    const warnings: string[] = [];
    if (pageCount > pagesUsed) {
      warnings.push(
        `The PDF has ${pageCount} pages; only the first ${pagesUsed} were used (MAX_PDF_PAGES=${options.maxPdfPages}), pages ${pagesUsed + 1}-${pageCount} were left out.`,
      );
    }
    if (text.length === 0) {
      throw new PdfRejectedError(
        'NO_EXTRACTABLE_TEXT',
        `The PDF has no extractable text in its first ${pagesUsed} page(s); it looks scanned (images only). Upload a PDF with a text layer.`,
      );
    }
    const blankPages = result.pages.filter((_, index) => pageTexts[index] === '').map((page) => page.num);
    if (blankPages.length > 0) {
      warnings.push(`No text on page(s) ${formatPageList(blankPages)} (images only?); they were skipped.`);
    }
    return {
      pageCount,
      pagesUsed,
      wordCount: countWords(text),
      charCount: countCharacters(text),
      warnings,
      text,
    };
  } finally {
    await parser.destroy();
  }
}

async function loadPageCount(parser: PDFParse): Promise<number> {
  try {
    const info = await parser.getInfo();
    return info.total;
  } catch (error) {
    throw toRejection(error);
  }
}

async function readText(parser: PDFParse, pagesUsed: number): ReturnType<PDFParse['getText']> {
  try {
    // pageJoiner '' keeps pdf-parse from adding `-- n of m --` markers; pages are joined here.
    return await parser.getText({ first: pagesUsed, pageJoiner: '' });
  } catch (error) {
    throw toRejection(error);
  }
}

/** Set once pdf-parse is loaded (toRejection runs only after it was). */
let isPasswordError: (error: unknown) => boolean = () => false;

function toRejection(error: unknown): PdfRejectedError {
  if (isPasswordError(error)) {
    return new PdfRejectedError(
      'ENCRYPTED_PDF',
      'The PDF is encrypted and needs a password to open. Upload it without password protection.',
    );
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new PdfRejectedError(
    'INVALID_PDF',
    `The PDF could not be read (it looks corrupt or truncated): ${detail}`,
  );
}

function formatPageList(pages: readonly number[]): string {
  const shown = pages.slice(0, 20).join(', ');
  return pages.length > 20 ? `${shown} and ${pages.length - 20} more` : shown;
}
