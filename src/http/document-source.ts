import { z } from 'zod';
import { documentSource, InvalidPagesError, type DocumentSource, type PageRange, type StoredDocument } from '../documents/index.js';
import { ApiError } from './errors.js';

/**
 * `pages` of `POST /v1/jobs` and `POST /v1/generate` (docs/api.md "Textbooks"): 1-based and inclusive.
 * Any whole number passes the schema: whether the range fits the document is 422 `INVALID_PAGES`, with
 * a message naming the document's pages, not a schema error.
 */
export const pageRangeSchema = z
  .strictObject({
    from: z.int().describe('First page, 1-based.'),
    to: z.int().describe('Last page, inclusive.'),
  })
  .describe("Only these pages of the document are used (1-based, inclusive); every item's `pages` lies within them.");

/** The text (and page map) of `range` of `document`; 422 INVALID_PAGES when the range cannot be used. */
export function documentSourceOrThrow(document: StoredDocument, range: PageRange | undefined): DocumentSource {
  try {
    return documentSource(document, range);
  } catch (error) {
    if (error instanceof InvalidPagesError) throw new ApiError('INVALID_PAGES', error.message);
    throw error;
  }
}

/** `pages` sent with `text` instead of a `documentId`: 422 INVALID_PAGES. */
export function pagesWithoutDocument(): ApiError {
  return new ApiError('INVALID_PAGES', '"pages" chooses pages of a document: send it with "documentId", not with "text".');
}
