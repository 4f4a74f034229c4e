import { getHeapStatistics } from 'node:v8';
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

/**
 * Loads pdf-parse and warms pdf.js up on a one-page PDF (its own worker code is imported on the first
 * document), so that an extract worker that says it is ready takes no start-up time out of the
 * deadline of the first PDF it reads.
 */
export async function preloadPdfParse(): Promise<void> {
  const { PDFParse } = await loadPdfParse();
  const parser = new PDFParse({ data: warmUpPdf(), ...pdfjsOptions });
  try {
    await parser.getText({ first: 1, pageJoiner: '' });
  } finally {
    await parser.destroy();
  }
}

/** A minimal one-page PDF with a line of text, xref offsets computed. */
function warmUpPdf(): Uint8Array {
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>',
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    '<< /Length 35 >>\nstream\nBT /F1 12 Tf 20 100 Td (warm) Tj ET\nendstream',
  ];
  let body = '%PDF-1.4\n';
  const offsets = objects.map((object, index) => {
    const offset = body.length;
    body += `${index + 1} 0 obj\n${object}\nendobj\n`;
    return offset;
  });
  const xref = offsets.map((offset) => `${String(offset).padStart(10, '0')} 00000 n \n`).join('');
  body += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${xref}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${body.length}\n%%EOF\n`;
  return new Uint8Array(Buffer.from(body, 'latin1'));
}
import { PdfRejectedError } from './errors.js';
import { scanPdfStreams, type StreamScan } from './stream-scan.js';
import { cleanPageText, countCharacters, countWords } from './text-stats.js';
import { isOutlineSource, readOutline } from './outline.js';
import { defaultMaxTextBytes, TextBudget } from './text-bound.js';
import type { ExtractedPdf } from './types.js';

/** Options for one extraction. */
export interface ExtractOptions {
  /** Pages past this number are left out, with a warning (MAX_PDF_PAGES). */
  maxPdfPages: number;
  /** Most bytes the PDF's streams may decompress to (PDF_MAX_DECODED_MB); default 64 MiB. */
  maxDecodedBytes?: number;
  /** A PDF declaring or holding more pages is refused; default 10000. */
  maxTotalPages?: number;
  /** Most UTF-8 bytes of text a PDF may extract to (PDF_MAX_TEXT_MB; also 64 × its size): text-bound.ts. */
  maxTextBytes?: number;
}

/** MAX_PDF_PAGES's default: a whole textbook (docs/documents.md "Whole books"). */
export const defaultMaxPdfPages = 1000;

/** Default of `ExtractOptions.maxDecodedBytes` (PDF_MAX_DECODED_MB=64). */
export const defaultMaxDecodedBytes = 64 * 1024 * 1024;
/** Default of `ExtractOptions.maxTotalPages` (the service's too). */
export const defaultMaxTotalPages = 10_000;

/**
 * pdf.js options that bound its work: no `eval` of PDF functions (fonts are compiled to JS otherwise),
 * no system fonts, no XFA, no font faces, images over 16 Mpx skipped (text extraction does not decode
 * images anyway), recover from errors rather than stop.
 */
const pdfjsOptions = {
  stopAtErrors: false,
  isEvalSupported: false,
  useSystemFonts: false,
  enableXfa: false,
  disableFontFace: true,
  maxImageSize: 16 * 1024 * 1024,
} as const;

/**
 * Most pages read from one load of the document. pdf.js keeps, for as long as a document is open, every
 * page it has handed out (its page objects on both sides of its worker protocol), every object it parsed
 * (its xref cache) and every font it translated: what an extraction holds grows with the pages read,
 * whatever `page.cleanup()` releases. So the document is closed and opened again (from the same bytes)
 * after this many pages, or sooner when the heap says so (`heapShareToReopen`). Each reopening parses the
 * file's cross-reference data again (0.3–1 s for a 6 MB manual on a loaded machine): the bound is for
 * memory, not a rhythm to keep.
 */
const maxPagesPerLoad = 50;

/**
 * The share of the heap's room (its limit less what was live when the extraction started: pdf.js's own
 * code, and tsx's under tests) that, taken when the heap is looked at (`ReopenGauge`), ends the stretch
 * early: the document is reopened before the next page. What a page
 * leaves in pdf.js's caches depends on what it holds, not on its text: a page of a hyperref index holds
 * hundreds of link annotations whose dictionaries pdf.js parses and keeps (~0.2 MB a page, against
 * ~0.05 MB for a page of prose), so 50 index pages of LaTeX's `source2e.pdf` filled the 48 MB worker
 * heap (the text so far was in the heap then too). Looking at memory as well as pages bounds more kinds of page.
 */
const heapShareToReopen = 0.4;

/**
 * Called after each page is read (and after the document is opened), so the caller can sample memory
 * (the extract worker reports its peak to the pool, bench/pdf.bench.ts). `page` is 0 after the load;
 * `pagesUsed` is how many pages will be read, once known (0 before: right after the load).
 */
export type PageObserver = (page: number, pagesUsed: number) => void;

/** What the extraction may ask of its thread's heap: a full collection (the extract worker exposes V8's `gc`). */
export interface HeapControl {
  collect?: () => void;
}

/** The heap in use now (live only, after a collection, when one can be run). */
function heapInUse(control: HeapControl): number {
  control.collect?.();
  return getHeapStatistics().used_heap_size;
}

/** Pages between two looks at the heap within a load: full collections close together that free little make V8 give up. */
const pagesBetweenHeapChecks = 5;

/**
 * Decides when to reopen the document before `maxPagesPerLoad`: every `pagesBetweenHeapChecks` pages, when
 * the heap holds more than `heapShareToReopen` of its room above `baseline` (after a collection, when one
 * can be run: garbage is not a reason to reopen), and the stretch itself added at least a tenth of that
 * room since its first page: what a document holds as soon as it is open (a large cross-reference table,
 * hyperref's thousands of named destinations) comes back with every load, and reopening for it would only
 * cost time. Full collections are kept pages apart: run back to back near the limit, collections that
 * free little make V8 abort ("ineffective mark-compacts near heap limit"), as `hyperref.pdf`, whose own
 * share fills most of the 48 MB heap, showed.
 */
class ReopenGauge {
  private stretchStart = 0;

  constructor(
    private readonly control: HeapControl,
    private readonly baseline: number,
  ) {}

  private get room(): number {
    return Math.max(0, getHeapStatistics().heap_size_limit - this.baseline);
  }

  /** The first page of a load was read: what the heap holds now is the document's own share. */
  stretchBegan(): void {
    this.stretchStart = heapInUse(this.control);
  }

  shouldReopen(pagesThisLoad: number): boolean {
    if (pagesThisLoad % pagesBetweenHeapChecks !== 0) return false;
    const full = this.baseline + this.room * heapShareToReopen;
    if (getHeapStatistics().used_heap_size < full) return false;
    const inUse = heapInUse(this.control);
    return inUse >= full && inUse - this.stretchStart >= this.room / 10;
  }
}

/**
 * Extracts the text of a PDF on the calling thread with pdf.js (through pdf-parse), page by page.
 * Throws PdfRejectedError:
 * ENCRYPTED_PDF when a password is needed (an empty user password opens by itself and is accepted),
 * INVALID_PDF when the file is corrupt, NO_EXTRACTABLE_TEXT when the kept pages hold no text,
 * PDF_DECOMPRESSION_LIMIT when its streams expand past `maxDecodedBytes` (checked before pdf.js reads
 * it, src/documents/stream-scan.ts), PDF_TOO_MANY_PAGES when it declares or holds more than
 * `maxTotalPages` pages. `pageCount` is the real page count: a page tree's /Count above the page
 * objects the file holds is not believed.
 * Memory does not grow with the page count: each page's objects are released once its text is read,
 * the document is reopened whenever what pdf.js keeps fills the heap past `heapShareToReopen` (and every
 * `maxPagesPerLoad` pages), and the text is kept outside the V8 heap (UTF-8 buffers) until pdf.js is closed.
 * This blocks the event loop while pdf.js parses; the service calls it through `createPdfExtractor`.
 */
export async function extractPdfTextInline(
  bytes: Uint8Array,
  options: ExtractOptions,
  observe: PageObserver = () => {},
  heap: HeapControl = {},
): Promise<ExtractedPdf> {
  const scan = await scanPdfStreams(bytes, { maxDecodedBytes: options.maxDecodedBytes ?? defaultMaxDecodedBytes });
  const { PDFParse, PasswordException } = await loadPdfParse();
  const baseline = heapInUse(heap);
  isPasswordError = (error) => error instanceof PasswordException;
  // pdf.js takes ownership of (transfers) the array it is given: each load gets a copy.
  const open = (): PDFParse => new PDFParse({ data: new Uint8Array(bytes), ...pdfjsOptions });
  let parser: PDFParse | undefined = open();
  try {
    const warnings: string[] = [];
    const loaded = await loadDocument(parser);
    const declared = loaded.numPages;
    observe(0, 0);
    const pageCount = realPageCount(declared, scan, options.maxTotalPages ?? defaultMaxTotalPages, warnings);
    const outline = isOutlineSource(loaded) ? await readOutline(loaded, pageCount) : [];
    if (outline.length > 0) {
      // Resolving the bookmarks' destinations made pdf.js parse and keep the page tree and the name
      // tree (about 15 MB for source3.pdf's thousands of bookmarks, more than a stretch of pages may
      // add): the pages are read from a fresh load, which holds only the document's own share.
      await parser.destroy();
      parser = open();
    }
    const pagesUsed = Math.min(pageCount, options.maxPdfPages);
    observe(0, pagesUsed);
    const pages = new PageTextAccumulator();
    const textBudget = new TextBudget(options.maxTextBytes ?? defaultMaxTextBytes, bytes.byteLength);
    let pagesThisLoad = 0;
    const gauge = new ReopenGauge(heap, baseline);
    for (let pageNumber = 1; pageNumber <= pagesUsed; pageNumber += 1) {
      if (pagesThisLoad >= maxPagesPerLoad || (pagesThisLoad > 0 && gauge.shouldReopen(pagesThisLoad))) {
        // Closing the document releases all pdf.js holds for it; the next stretch starts from nothing.
        await parser.destroy();
        parser = open();
        pagesThisLoad = 0;
      }
      const pageText = cleanPageText(await readPageText(parser, pageNumber, declared));
      textBudget.take(pageText);
      pages.add(pageNumber, pageText);
      if (pagesThisLoad === 0) gauge.stretchBegan();
      pagesThisLoad += 1;
      observe(pageNumber, pagesUsed);
    }
    // pdf.js is closed before the text is put together: the heap holds one or the other, never both.
    await parser.destroy();
    parser = undefined;
    if (pageCount > pagesUsed) {
      warnings.push(
        `The PDF has ${pageCount} pages; only the first ${pagesUsed} were used (MAX_PDF_PAGES=${options.maxPdfPages}), pages ${pagesUsed + 1}-${pageCount} were left out.`,
      );
    }
    if (pages.empty) {
      throw new PdfRejectedError(
        'NO_EXTRACTABLE_TEXT',
        `The PDF has no extractable text in its first ${pagesUsed} page(s); it looks scanned (images only). Upload a PDF with a text layer.`,
      );
    }
    if (pages.blankPages > 0) {
      warnings.push(`No text on page(s) ${pages.blankPageList()} (images only?); they were skipped.`);
    }
    const text = pages.text();
    return {
      pageCount,
      pagesUsed,
      wordCount: countWords(text),
      charCount: countCharacters(text),
      warnings,
      text,
      pageStarts: pages.pageStarts,
      outline,
    };
  } finally {
    await parser?.destroy();
  }
}

/** Between two pages' texts: a blank line, where a splitter can cut. */
const pageSeparator = '\n\n';

/** Blank page numbers named in the warning; the rest are counted. */
const blankPagesListed = 20;

/**
 * The document's text as it is read: pages joined by a blank line (`joinPages`), where each page begins
 * (`pageStarts`, UTF-16 offsets of the joined text), blank pages counted, the first `blankPagesListed`
 * of them by number. The pages' text is held as UTF-8 buffers, outside the V8 heap that pdf.js fills,
 * and joined into one string once (`text()`).
 */
class PageTextAccumulator {
  blankPages = 0;
  readonly pageStarts: number[] = [];
  private readonly chunks: Buffer[] = [];
  /** UTF-16 length of the text so far. */
  private length = 0;
  private readonly listed: number[] = [];

  get empty(): boolean {
    return this.length === 0;
  }

  add(pageNumber: number, pageText: string): void {
    // A blank page starts where the next page's text will (after the separator, once there is text).
    this.pageStarts.push(this.length === 0 ? 0 : this.length + pageSeparator.length);
    if (pageText === '') {
      this.blankPages += 1;
      if (this.listed.length < blankPagesListed) this.listed.push(pageNumber);
      return;
    }
    const joined = this.length === 0 ? pageText : `${pageSeparator}${pageText}`;
    this.chunks.push(Buffer.from(joined, 'utf8'));
    this.length += joined.length;
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }

  blankPageList(): string {
    const shown = this.listed.join(', ');
    return this.blankPages > this.listed.length ? `${shown} and ${this.blankPages - this.listed.length} more` : shown;
  }
}

/**
 * The pages to believe: the page tree's count, unless the file holds fewer page objects (the scan
 * cannot see inside an encrypted PDF's streams, so there the tree is believed). Above `maxTotalPages`
 * (declared or held) the PDF is refused: pdf-parse walks every declared page number.
 */
function realPageCount(declared: number, scan: StreamScan, maxTotalPages: number, warnings: string[]): number {
  const held = scan.encrypted ? declared : Math.max(1, Math.min(declared, scan.pageObjects));
  if (declared > maxTotalPages) {
    const holds = held < declared ? ` (it holds ${held} page object${held === 1 ? '' : 's'})` : '';
    throw new PdfRejectedError(
      'PDF_TOO_MANY_PAGES',
      `The PDF declares ${declared} pages${holds}; more than ${maxTotalPages} are refused.`,
    );
  }
  if (held < declared) {
    warnings.push(`The PDF's page tree declares ${declared} pages but the file holds ${held}; ${held} is used.`);
  }
  return held;
}

/** A page as pdf.js hands it out: `cleanup` releases what reading it built. */
interface PdfPage {
  cleanup(): boolean;
}

/** The loaded pdf.js document pdf-parse keeps private (but exposes at run time); its outline calls too (outline.ts). */
interface PdfDocument {
  numPages: number;
  getPage(pageNumber: number): Promise<PdfPage>;
}

/** What pdf-parse keeps private: loading the document, and one page's text as `getText` joins it. */
interface ParserInternals {
  load(): Promise<PdfDocument>;
  getPageText(page: PdfPage, params: object, total: number): Promise<string>;
}

function internals(parser: object): ParserInternals | undefined {
  const candidate = parser as Partial<ParserInternals>;
  return typeof candidate.load === 'function' && typeof candidate.getPageText === 'function' ? (candidate as ParserInternals) : undefined;
}

/**
 * Opens the document: the page tree's page count. Not through `getInfo`: it also reads page labels, an
 * array as long as the declared count (a tree claiming 2^30 pages made that take seconds and half a gigabyte).
 */
async function loadDocument(parser: PDFParse): Promise<{ numPages: number }> {
  try {
    const loadable = internals(parser);
    if (loadable !== undefined) return await loadable.load();
    return { numPages: (await parser.getInfo()).total };
  } catch (error) {
    throw toRejection(error);
  }
}

/**
 * One page's text, as pdf-parse's `getText` makes it (default parameters), its page objects released
 * once read. Without the internals (a pdf-parse that changed them), `getText` of that one page.
 */
async function readPageText(parser: PDFParse, pageNumber: number, total: number): Promise<string> {
  try {
    const reader = internals(parser);
    if (reader === undefined) {
      const result = await parser.getText({ first: pageNumber, last: pageNumber, pageJoiner: '' });
      return result.pages[0]?.text ?? '';
    }
    const page = await (await reader.load()).getPage(pageNumber);
    try {
      return await reader.getPageText(page, {}, total);
    } finally {
      page.cleanup();
    }
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
