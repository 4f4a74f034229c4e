import { ExtractPool, type ExtractWorkerEntry } from './extract-pool.js';
import { extractPdfTextInline, type ExtractOptions } from './extract-text.js';
import { workerEntry } from '../threads/worker-entry.js';
import type { ExtractedPdf } from './types.js';
import type { WorkerMemory } from './worker-protocol.js';
import type { ExtractReservation, PdfInput } from './reservation.js';
import { readFile } from 'node:fs/promises';

export type { ExtractWorkerEntry } from './extract-pool.js';

/** Turns PDF bytes into text. One instance per app; `close` ends its workers. */
export interface PdfExtractor {
  /** `client`: the uploader's share of the wait queue (`addressShareKey(request.ip)`); one share when absent. */
  extract(input: PdfInput, options: ExtractOptions, client?: string): Promise<ExtractedPdf>;
  /**
   * Holds a place for an upload before its body is read; throws PdfExtractorBusyError when the queue
   * is full or the client's share is taken. An extractor without it (a test's) is asked only once the
   * body is read.
   */
  reserve?(client?: string): ExtractReservation;
  close(): Promise<void>;
}

export interface PdfExtractorOptions {
  /**
   * `worker` (default) runs pdf.js in a pool of worker threads: extraction on the main thread blocks
   * the event loop in long stretches, longest on the first, cold call (figures in docs/documents.md),
   * because pdf.js in Node runs its "worker" as promise callbacks on the same thread.
   * `inline` runs it on the calling thread (tests, tools): no deadline, no memory cap.
   */
  mode?: 'worker' | 'inline';
  /**
   * PDF_TIMEOUT_MS: an extraction running longer than it for each `pagesPerDeadline` pages it reads (at
   * least once) is refused as PDF_EXTRACTION_TIMEOUT, its worker ended. Default 30000.
   */
  timeoutMs?: number;
  /** Pages each `timeoutMs` pays for. Default 250 (extract-pool.ts `defaultPagesPerDeadline`). */
  pagesPerDeadline?: number;
  /** PDF_WORKERS: extractions running at once, one worker (child process) each. Default 2. */
  workers?: number;
  /** Extractions waiting for a worker; past it PdfExtractorBusyError. Default 16. */
  queueMax?: number;
  /** PDF_WORKER_MEMORY_MB: one worker's V8 heap; past it PDF_MEMORY_LIMIT. Default 48. */
  memoryMb?: number;
  /** Extractions one client address may have waiting; default all of `queueMax` (shared by displacement, fair-queue.ts). */
  queuePerClient?: number;
  /** Most a worker's resident set may grow while it extracts, MB; default heap + 64 + 32 (extract-pool.ts). */
  ceilingMb?: number;
  /** WORKER_NICE: the workers' nice value (0–19, Linux). Default 0 (unchanged); the service passes WORKER_NICE (19). */
  nice?: number;
  /** Told the memory a worker used for each extraction it finished (bench/pdf.bench.ts). */
  onWorkerMemory?: (memory: WorkerMemory) => void;
}

/** The defaults of `PdfExtractorOptions` (and of the PDF_* variables in src/config.ts). */
export const pdfExtractorDefaults = { timeoutMs: 30_000, workers: 2, queueMax: 16, memoryMb: 48 } as const;

/** Retry-After (seconds) of a PdfExtractorBusyError. */
export const extractorBusyRetryAfterSeconds = 5;

/** The extract worker's entry, next to this module (`extract-worker.js`, or `.ts` through tsx). */
export function extractWorkerEntry(moduleUrl: string = import.meta.url): ExtractWorkerEntry {
  return workerEntry('extract-worker', moduleUrl);
}

/** A PDF extractor; by default a pool of worker threads keeps pdf.js off the event loop (extract-pool.ts). */
export function createPdfExtractor(options: PdfExtractorOptions = {}): PdfExtractor {
  if (options.mode === 'inline') {
    const extract = async (input: PdfInput, extractOptions: ExtractOptions): Promise<ExtractedPdf> =>
      extractPdfTextInline(input instanceof Uint8Array ? input : new Uint8Array(await readFile(input.path)), extractOptions);
    return { extract, close: async () => {} };
  }
  const pool = new ExtractPool(extractWorkerEntry(), {
    workers: options.workers ?? pdfExtractorDefaults.workers,
    queueMax: options.queueMax ?? pdfExtractorDefaults.queueMax,
    timeoutMs: options.timeoutMs ?? pdfExtractorDefaults.timeoutMs,
    memoryMb: options.memoryMb ?? pdfExtractorDefaults.memoryMb,
    ...(options.queuePerClient === undefined ? {} : { queuePerClient: options.queuePerClient }),
    ...(options.ceilingMb === undefined ? {} : { ceilingMb: options.ceilingMb }),
    ...(options.pagesPerDeadline === undefined ? {} : { pagesPerDeadline: options.pagesPerDeadline }),
    retryAfterSeconds: extractorBusyRetryAfterSeconds,
    nice: options.nice ?? 0,
    ...(options.onWorkerMemory === undefined ? {} : { onWorkerMemory: options.onWorkerMemory }),
  });
  return {
    extract: (input, extractOptions, client) => pool.extract(input, extractOptions, client),
    reserve: (client) => pool.reserve(client),
    close: () => pool.close(),
  };
}
