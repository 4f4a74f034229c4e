import type { PdfRejectionCode } from './errors.js';
import type { ExtractedPdf } from './types.js';

/** Main thread → extract worker. `bytes` is transferred, not copied. */
export interface ExtractRequest {
  id: number;
  bytes: ArrayBuffer;
  maxPdfPages: number;
}

/** Extract worker → main thread. `INTERNAL` is a failure that is not about the PDF. */
export type ExtractResponse =
  | { id: number; ok: true; result: ExtractedPdf }
  | { id: number; ok: false; code: PdfRejectionCode | 'INTERNAL'; message: string };
