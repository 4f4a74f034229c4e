import type { PdfRejectionCode } from './errors.js';
import type { ExtractOptions } from './extract-text.js';
import type { ExtractedPdf } from './types.js';

/**
 * Parent → extract child process: one extraction at a time, the PDF as a file the child reads (an
 * upload streamed to disk) or as bytes copied over the IPC channel.
 */
export type ExtractRequestToChild = { id: number; options: ExtractOptions } & ({ path: string } | { bytes: Uint8Array });

/**
 * Extract child → parent: `ready` once pdf.js is loaded (an extraction's deadline starts when it
 * is handed to a ready worker), `pages` once the document is open and how many of its pages will be
 * read is known (the deadline grows with them), then one answer per request. `INTERNAL` is a failure
 * not about the PDF.
 */
export type ExtractResponse =
  | { type: 'ready' }
  | { type: 'pages'; id: number; pagesUsed: number }
  | { type: 'result'; id: number; ok: true; result: ExtractedPdf; memory: WorkerMemory }
  | { type: 'result'; id: number; ok: false; code: PdfRejectionCode | 'INTERNAL'; message: string };

/**
 * What an extraction took of its worker, sampled when the document was opened and after each page:
 * V8 heap used and resident set, at the start and at the highest sample, in bytes. With
 * STUDY_HELPER_EXTRACT_LIVE_HEAP=1 (bench/pdf.bench.ts) each sample follows a full garbage collection,
 * so the heap figures are live objects only; without, they include garbage not yet collected.
 */
export interface WorkerMemory {
  heapStartBytes: number;
  heapPeakBytes: number;
  rssStartBytes: number;
  rssPeakBytes: number;
}
