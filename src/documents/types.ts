/** One bookmark of the PDF's outline (docs/documents.md "Outline"). */
export interface OutlineEntry {
  /** The bookmark's text (no markup). */
  title: string;
  /** 1-based page it points to. */
  page: number;
  /** 1 for a top entry, 2 for its children, … */
  level: number;
}

/** What text extraction produced from one PDF. */
export interface ExtractedPdf {
  /** Pages in the PDF. */
  pageCount: number;
  /** Pages whose text was kept (at most `maxPdfPages`). */
  pagesUsed: number;
  wordCount: number;
  charCount: number;
  warnings: string[];
  /** Extracted text; pages are separated by a blank line so a splitter can cut there. */
  text: string;
  /**
   * Where each kept page's text begins in `text` (UTF-16 offset), one per page 1…`pagesUsed`: page `p`
   * is `text.slice(pageStarts[p - 1], pageStarts[p])` less the blank line that ends it; a page without
   * text starts where the next one does.
   */
  pageStarts: number[];
  /** The PDF's bookmarks, depth first; `[]` when it has none. */
  outline: OutlineEntry[];
}

/**
 * A document as the service keeps it after upload: its extracted text plus what the client is told.
 * `pageStarts` and `outline` are missing from documents stored before pages were kept: such a document
 * is used whole (its page range unknown) until it expires.
 */
export interface StoredDocument extends Omit<ExtractedPdf, 'pageStarts' | 'outline'> {
  pageStarts?: number[];
  outline?: OutlineEntry[];
  documentId: string;
  /** Hex SHA-256 of the uploaded bytes. */
  sha256: string;
  fileName: string;
  /** Epoch milliseconds. */
  createdAt: number;
}

/** Where uploaded documents live until they expire. The memory store is one; a Redis store can be another. */
export interface DocumentStore {
  put(doc: StoredDocument): Promise<void>;
  /**
   * The document, or undefined when the id is unknown or expired. Rejects with
   * `DocumentStoreUnavailableError` when a shared store cannot be read (the document may exist).
   */
  get(documentId: string): Promise<StoredDocument | undefined>;
  close?(): Promise<void>;
}
