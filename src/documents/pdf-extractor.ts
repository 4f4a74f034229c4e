import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { isPdfRejectionCode, PdfRejectedError } from './errors.js';
import { extractPdfTextInline, type ExtractOptions } from './extract-text.js';
import type { ExtractedPdf } from './types.js';
import type { ExtractRequest, ExtractResponse } from './worker-protocol.js';

/** Turns PDF bytes into text. One instance per app; `close` ends its worker. */
export interface PdfExtractor {
  extract(bytes: Uint8Array, options: ExtractOptions): Promise<ExtractedPdf>;
  close(): Promise<void>;
}

export interface PdfExtractorOptions {
  /**
   * `worker` (default) runs pdf.js in a worker thread: measured on a 50-page PDF, extraction on the
   * main thread blocks the event loop for ~90 ms in one stretch (~500 ms on the first, cold call),
   * because pdf.js in Node runs its "worker" as promise callbacks on the same thread.
   * `inline` runs it on the calling thread (tests, tools).
   */
  mode?: 'worker' | 'inline';
  /** A PDF whose extraction takes longer is refused as INVALID_PDF and the worker is restarted. */
  timeoutMs?: number;
}

/** How to start the extract worker: a file, or (from TypeScript source) a bootstrap to evaluate. */
export type ExtractWorkerEntry = { kind: 'file'; url: URL } | { kind: 'eval'; url: URL; code: string };

/**
 * The worker entry sits next to this module: `extract-worker.js` once compiled to dist; under
 * tsx/vitest (this module is a `.ts` file) `extract-worker.ts`, loaded through tsx's `tsImport`,
 * because on Node 20 a worker thread does not run a `--import` loader before its entry.
 */
export function extractWorkerEntry(moduleUrl: string = import.meta.url): ExtractWorkerEntry {
  if (!new URL(moduleUrl).pathname.endsWith('.ts')) {
    return { kind: 'file', url: new URL('./extract-worker.js', moduleUrl) };
  }
  const url = new URL('./extract-worker.ts', moduleUrl);
  const tsxApi = tsxEsmApiUrl(moduleUrl);
  const code = `import(${JSON.stringify(tsxApi)}).then((api) => api.tsImport(${JSON.stringify(url.href)}, ${JSON.stringify(moduleUrl)}));`;
  return { kind: 'eval', url, code };
}

/** The ESM build of `tsx/esm/api` (its CJS build cannot register hooks from an eval'd worker). */
function tsxEsmApiUrl(moduleUrl: string): string {
  const manifestPath = createRequire(moduleUrl).resolve('tsx/package.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
    exports: Record<string, { import: { default: string } }>;
  };
  const target = manifest.exports['./esm/api']?.import.default;
  if (target === undefined)
    throw new Error('tsx has no ./esm/api export: cannot run the PDF worker from TypeScript source.');
  return new URL(target, pathToFileURL(manifestPath)).href;
}

function startWorker(entry: ExtractWorkerEntry): Worker {
  return entry.kind === 'file' ? new Worker(entry.url) : new Worker(entry.code, { eval: true });
}

/** A PDF extractor; by default it keeps pdf.js off the event loop in one long-lived worker thread. */
export function createPdfExtractor(options: PdfExtractorOptions = {}): PdfExtractor {
  if (options.mode === 'inline') {
    return { extract: extractPdfTextInline, close: async () => {} };
  }
  return new WorkerPdfExtractor(options.timeoutMs ?? 30_000);
}

interface Pending {
  resolve: (result: ExtractedPdf) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

class WorkerPdfExtractor implements PdfExtractor {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;

  constructor(private readonly timeoutMs: number) {}

  extract(bytes: Uint8Array, options: ExtractOptions): Promise<ExtractedPdf> {
    if (this.closed) return Promise.reject(new Error('The PDF extractor is closed.'));
    const worker = this.ensureWorker();
    const id = this.nextId;
    this.nextId += 1;
    const copy = new Uint8Array(bytes).buffer;
    return new Promise<ExtractedPdf>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(
          new PdfRejectedError(
            'INVALID_PDF',
            `The PDF could not be read within ${Math.round(this.timeoutMs / 1000)} s.`,
          ),
        );
        // pdf.js may be stuck on this file: start afresh, failing what else was in flight.
        this.restart(new Error('The PDF extractor was restarted after a timeout.'));
      }, this.timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      const request: ExtractRequest = { id, bytes: copy, maxPdfPages: options.maxPdfPages };
      worker.postMessage(request, [copy]);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.failAll(new Error('The PDF extractor was closed.'));
    const worker = this.worker;
    this.worker = undefined;
    if (worker !== undefined) await worker.terminate();
  }

  private ensureWorker(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = startWorker(extractWorkerEntry());
    // An idle extractor must not keep the process alive; in-flight requests hold their own timers.
    worker.unref();
    worker.on('message', (response: ExtractResponse) => this.settle(response));
    worker.on('error', (error) => this.restart(error));
    worker.on('exit', (exitCode) => {
      if (this.worker === worker) {
        this.worker = undefined;
        this.failAll(new Error(`The PDF extractor worker exited (code ${exitCode}).`));
      }
    });
    this.worker = worker;
    return worker;
  }

  private settle(response: ExtractResponse): void {
    const pending = this.pending.get(response.id);
    if (pending === undefined) return;
    this.pending.delete(response.id);
    clearTimeout(pending.timer);
    if (response.ok) pending.resolve(response.result);
    else if (isPdfRejectionCode(response.code))
      pending.reject(new PdfRejectedError(response.code, response.message));
    else pending.reject(new Error(`PDF extraction failed: ${response.message}`));
  }

  private restart(reason: Error): void {
    const worker = this.worker;
    this.worker = undefined;
    this.failAll(reason);
    if (worker !== undefined) void worker.terminate();
  }

  private failAll(reason: Error): void {
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(reason);
      this.pending.delete(id);
    }
  }
}
