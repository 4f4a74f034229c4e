/**
 * A bounded pool of extract workers, each running one extraction at a time, so a hostile PDF can only
 * hurt the worker it runs in: its deadline terminates that worker alone, its memory cap (`resourceLimits`)
 * kills that worker alone, and the extractions in the other workers go on untouched. A dead worker is
 * replaced when the next extraction needs one. Extractions wait in a bounded queue when every worker is
 * busy; past it they are refused at once (PdfExtractorBusyError → 503 with Retry-After).
 */
import type { Worker } from 'node:worker_threads';
import { startWorker, type WorkerEntry } from '../threads/worker-entry.js';
import { isPdfRejectionCode, PdfExtractorBusyError, PdfRejectedError } from './errors.js';
import type { ExtractOptions } from './extract-text.js';
import type { ExtractedPdf } from './types.js';
import type { ExtractRequest, ExtractResponse, ExtractWorkerData } from './worker-protocol.js';

/** How to start a worker: a file, or (from TypeScript source) a bootstrap to evaluate. */
export type ExtractWorkerEntry = WorkerEntry;

/** Sizes and limits of the pool (docs/documents.md, docs/configuration.md). */
export interface ExtractPoolLimits {
  /** Workers at most (PDF_WORKERS). */
  workers: number;
  /** Extractions waiting for a worker at most (PDF_QUEUE_MAX); 0 refuses whenever all are busy. */
  queueMax: number;
  /** One extraction's deadline, counted from when a ready worker takes it (PDF_TIMEOUT_MS). */
  timeoutMs: number;
  /** The V8 heap of one worker, old and young generation together (PDF_WORKER_MEMORY_MB). */
  memoryMb: number;
  /** Retry-After of a refusal when the queue is full. */
  retryAfterSeconds: number;
  /** The workers' nice value (WORKER_NICE): their CPU comes from what the event loop leaves. */
  nice: number;
}

interface Job {
  id: number;
  bytes: ArrayBuffer;
  options: ExtractOptions;
  resolve: (result: ExtractedPdf) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job: Job | undefined;
  timer: NodeJS.Timeout | undefined;
}

/**
 * Heap a worker started from TypeScript source (tests, `tsx`) needs for the loader alone (tsx and esbuild,
 * ~200 MB); compiled (`npm start`) there is none, and PDF_WORKER_MEMORY_MB is pdf.js's own heap.
 */
export const tsxLoaderAllowanceMb = 208;

/** Out-of-memory of a worker whose heap hit `resourceLimits` (Node's error code). */
const outOfMemory = 'ERR_WORKER_OUT_OF_MEMORY';

/** The pool; `extract` and `close` are all a caller needs. */
export class ExtractPool {
  private readonly slots = new Set<Slot>();
  /** Workers ended (deadline, memory, crash) whose thread has not exited yet: their memory is still held. */
  private dying = 0;
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly entry: ExtractWorkerEntry,
    private readonly limits: ExtractPoolLimits,
  ) {}

  /** Extracts in a worker; rejects with PdfRejectedError, PdfExtractorBusyError, or an Error (internal). */
  extract(bytes: Uint8Array, options: ExtractOptions): Promise<ExtractedPdf> {
    if (this.closed) return Promise.reject(new Error('The PDF extractor is closed.'));
    const idle = this.idleSlot();
    const canGrow = this.slots.size + this.dying < this.limits.workers;
    if (idle === undefined && !canGrow && this.queue.length >= this.limits.queueMax) {
      return Promise.reject(
        new PdfExtractorBusyError(
          `Every PDF extraction worker is busy and ${this.queue.length} upload(s) are waiting (PDF_WORKERS=${this.limits.workers}, PDF_QUEUE_MAX=${this.limits.queueMax}); retry shortly.`,
          this.limits.retryAfterSeconds,
        ),
      );
    }
    return new Promise<ExtractedPdf>((resolve, reject) => {
      const job: Job = { id: this.nextId, bytes: new Uint8Array(bytes).buffer, options, resolve, reject };
      this.nextId += 1;
      if (idle !== undefined) this.run(idle, job);
      else if (canGrow) this.start(job);
      else this.queue.push(job);
    });
  }

  /** Fails queued and running extractions and ends every worker. */
  async close(): Promise<void> {
    this.closed = true;
    const closing = new Error('The PDF extractor was closed.');
    for (const job of this.queue.splice(0)) job.reject(closing);
    const workers: Promise<number>[] = [];
    for (const slot of this.slots) {
      this.finish(slot, closing);
      workers.push(slot.worker.terminate());
    }
    this.slots.clear();
    await Promise.all(workers);
  }

  /** Workers alive now (tests, metrics). */
  get workerCount(): number {
    return this.slots.size;
  }

  private idleSlot(): Slot | undefined {
    for (const slot of this.slots) if (slot.ready && slot.job === undefined) return slot;
    return undefined;
  }

  private start(job: Job): void {
    const { entry, limits } = this;
    // From TypeScript source the worker also holds tsx and esbuild: that room comes on top of the cap.
    const heapMb = limits.memoryMb + (entry.kind === 'eval' ? tsxLoaderAllowanceMb : 0);
    const young = Math.max(4, Math.min(16, Math.floor(heapMb / 8)));
    const resourceLimits = { maxOldGenerationSizeMb: Math.max(16, heapMb - young), maxYoungGenerationSizeMb: young };
    const workerData: ExtractWorkerData = { nice: limits.nice };
    const worker = startWorker(entry, { resourceLimits, workerData });
    // An idle pool must not keep the process alive; a running extraction holds its own deadline timer.
    worker.unref();
    const slot: Slot = { worker, ready: false, job, timer: undefined };
    this.slots.add(slot);
    worker.on('message', (message: ExtractResponse) => this.onMessage(slot, message));
    worker.on('error', (error: Error & { code?: string }) => this.onDeath(slot, this.deathReason(error)));
    worker.on('exit', (exitCode) => this.onDeath(slot, new Error(`The PDF extract worker exited (code ${exitCode}).`)));
  }

  private deathReason(error: Error & { code?: string }): Error {
    if (error.code === outOfMemory) {
      return new PdfRejectedError(
        'PDF_MEMORY_LIMIT',
        `Reading the PDF needed more than ${this.limits.memoryMb} MB of memory (PDF_WORKER_MEMORY_MB); it was stopped.`,
      );
    }
    return new Error(`The PDF extract worker failed: ${error.message}`);
  }

  private run(slot: Slot, job: Job): void {
    slot.job = job;
    slot.timer = setTimeout(() => this.onDeadline(slot), this.limits.timeoutMs);
    const request: ExtractRequest = { id: job.id, bytes: job.bytes, options: job.options };
    slot.worker.postMessage(request, [job.bytes]);
  }

  private onMessage(slot: Slot, message: ExtractResponse): void {
    if (message.type === 'ready') {
      slot.ready = true;
      const job = slot.job;
      slot.job = undefined;
      if (job !== undefined) this.run(slot, job);
      else this.dispatch(slot);
      return;
    }
    if (slot.job?.id !== message.id) return;
    if (message.ok) this.finish(slot, message.result);
    else if (isPdfRejectionCode(message.code)) this.finish(slot, new PdfRejectedError(message.code, message.message));
    else this.finish(slot, new Error(`PDF extraction failed: ${message.message}`));
    this.dispatch(slot);
  }

  /** The deadline of the extraction in `slot`: that worker alone is terminated. */
  private onDeadline(slot: Slot): void {
    slot.timer = undefined;
    const seconds = Math.round(this.limits.timeoutMs / 100) / 10;
    this.onDeath(
      slot,
      new PdfRejectedError('PDF_EXTRACTION_TIMEOUT', `The PDF could not be read within ${seconds} s (PDF_TIMEOUT_MS); it was stopped.`),
    );
  }

  /**
   * A worker is gone (deadline, out of memory, crash, exit): its own extraction fails, no other. Its
   * replacement starts only once its thread has exited, so the pool never holds more than PDF_WORKERS
   * heaps at once (a hostile PDF queued behind another would otherwise start a second heap while the
   * first is still being torn down).
   */
  private onDeath(slot: Slot, reason: Error): void {
    if (!this.slots.delete(slot)) return;
    this.finish(slot, reason);
    this.dying += 1;
    const exited = (): void => {
      this.dying -= 1;
      const next = this.closed ? undefined : this.queue.shift();
      if (next !== undefined) this.start(next);
    };
    slot.worker.terminate().then(exited, exited);
  }

  private finish(slot: Slot, outcome: ExtractedPdf | Error): void {
    const job = slot.job;
    slot.job = undefined;
    if (slot.timer !== undefined) clearTimeout(slot.timer);
    slot.timer = undefined;
    if (job === undefined) return;
    if (outcome instanceof Error) job.reject(outcome);
    else job.resolve(outcome);
  }

  /** Hands the next queued extraction to a worker that just became free. */
  private dispatch(slot: Slot): void {
    const next = this.queue.shift();
    if (next !== undefined) this.run(slot, next);
  }
}
