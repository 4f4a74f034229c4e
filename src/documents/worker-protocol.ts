import type { PdfRejectionCode } from './errors.js';
import type { ExtractOptions } from './extract-text.js';
import type { ExtractedPdf } from './types.js';

/** Main thread → extract worker: one extraction at a time. `bytes` is transferred, not copied. */
export interface ExtractRequest {
  id: number;
  bytes: ArrayBuffer;
  options: ExtractOptions;
}

/**
 * Extract worker → main thread: `ready` once pdf.js is loaded (an extraction's deadline starts when it
 * is handed to a ready worker), then one answer per request. `INTERNAL` is a failure not about the PDF.
 */
export type ExtractResponse =
  | { type: 'ready' }
  | { type: 'result'; id: number; ok: true; result: ExtractedPdf }
  | { type: 'result'; id: number; ok: false; code: PdfRejectionCode | 'INTERNAL'; message: string };

/** The extract worker's start-up data: its thread's nice value (WORKER_NICE). */
export interface ExtractWorkerData {
  nice: number;
}
