import type { TextPageMap } from '../machines/job-types.js';
import type { StoredDocument } from './types.js';

/** A page range of a document, 1-based and inclusive (`pages` of a job or a generation). */
export interface PageRange {
  readonly from: number;
  readonly to: number;
}

/** The text a job or a generation works on, and which page each stretch of it came from. */
export interface DocumentSource {
  readonly text: string;
  /** Where each page of `text` begins; absent for a document stored before pages were kept. */
  readonly pageMap?: TextPageMap;
}

/** Why a page range cannot be used: the message of a 422 `INVALID_PAGES`. */
export class InvalidPagesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidPagesError';
  }
}

/** `start` as an offset into a text of `length`. */
function clamp(start: number | undefined, length: number): number {
  return Math.min(length, Math.max(0, start ?? length));
}

/**
 * The text of `range` of `document` (the whole stored text without a range) and its page map. Throws
 * InvalidPagesError for a range outside the document, `from > to`, pages past `pagesUsed` (left out at
 * upload), or a range of a document stored before pages were kept.
 */
export function documentSource(document: StoredDocument, range?: PageRange): DocumentSource {
  const starts = document.pageStarts;
  if (range === undefined) {
    return starts === undefined ? { text: document.text } : { text: document.text, pageMap: { firstPage: 1, starts } };
  }
  const { from, to } = range;
  if (from > to) throw new InvalidPagesError(`"pages" runs from ${from} to ${to}: "from" must not be after "to".`);
  if (from < 1 || to > document.pageCount) {
    throw new InvalidPagesError(`The document has pages 1–${document.pageCount}; pages ${from}–${to} are outside it.`);
  }
  if (to > document.pagesUsed) {
    throw new InvalidPagesError(
      `Only pages 1–${document.pagesUsed} of ${document.pageCount} were read at upload (MAX_PDF_PAGES); pages ${Math.max(from, document.pagesUsed + 1)}–${to} have no text here.`,
    );
  }
  if (starts === undefined || starts.length < to) {
    throw new InvalidPagesError('This document was stored before page boundaries were kept; upload it again to choose pages.');
  }
  const length = document.text.length;
  const begin = clamp(starts[from - 1], length);
  const end = clamp(starts[to], length);
  const text = document.text.slice(begin, end).trimEnd();
  const pageStarts = starts.slice(from - 1, to).map((start) => Math.min(text.length, clamp(start, length) - begin));
  if (text.trim() === '') throw new InvalidPagesError(`Pages ${from}–${to} hold no text (images only?); choose pages with text.`);
  return { text, pageMap: { firstPage: from, starts: pageStarts } };
}
