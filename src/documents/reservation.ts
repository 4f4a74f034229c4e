import type { ExtractOptions } from './extract-text.js';
import type { ExtractedPdf } from './types.js';

/**
 * The PDF to extract: its bytes, or the file an upload was streamed to (the extract process reads it
 * from disk, so the service's main process never holds an upload whole).
 */
export type PdfInput = Uint8Array | { path: string };

/**
 * A place in the extractor (a worker or the wait queue) held for an upload before its body is read.
 * Exactly one of `extract` or `release` gives it back; `release` after `extract` does nothing.
 */
export interface ExtractReservation {
  /** Aborted (its reason a PdfExtractorBusyError) when another address took the place while the body streamed in. */
  readonly signal: AbortSignal;
  /** Extracts in the held place; rejects as `PdfExtractor.extract` does. */
  extract(input: PdfInput, options: ExtractOptions): Promise<ExtractedPdf>;
  /** Gives the place back without extracting (the upload failed before it was read whole). */
  release(): void;
}
