import type { PdfRejectionCode } from './errors.js';
import type { ExtractOptions } from './extract-text.js';
import type { ExtractedPdf } from './types.js';

/** Parent → extract child process: one extraction at a time (`bytes` is copied over the IPC channel). */
export interface ExtractRequestToChild {
  id: number;
  bytes: Uint8Array;
  options: ExtractOptions;
}

/**
 * Extract child → parent: `ready` once pdf.js is loaded (an extraction's deadline starts when it
 * is handed to a ready worker), then one answer per request. `INTERNAL` is a failure not about the PDF.
 */
export type ExtractResponse =
  | { type: 'ready' }
  | { type: 'result'; id: number; ok: true; result: ExtractedPdf }
  | { type: 'result'; id: number; ok: false; code: PdfRejectionCode | 'INTERNAL'; message: string };
