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
}

/** A document as the service keeps it after upload: its extracted text plus what the client is told. */
export interface StoredDocument extends ExtractedPdf {
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
