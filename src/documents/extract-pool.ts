/**
 * A bounded pool of extract workers (child processes, extract-process.ts), each running one extraction
 * at a time, so a hostile PDF can only hurt the worker it runs in: its deadline kills that worker alone,
 * its memory ceiling (resident set and V8 heap) kills that worker alone, and the extractions in the
 * other workers go on untouched. A dead worker is
 * replaced when the next extraction needs one. Extractions wait in a bounded queue when every worker is
 * busy, shared fairly between client addresses (fair-queue.ts); past it they are refused at once
 * (PdfExtractorBusyError → 503 with Retry-After).
 */
import type { WorkerEntry } from '../threads/worker-entry.js';
import { isPdfRejectionCode, PdfExtractorBusyError, PdfRejectedError } from './errors.js';
import { ExtractProcess, type ExtractProcessEnd } from './extract-process.js';
import { FairQueue } from './fair-queue.js';
import type { ExtractOptions } from './extract-text.js';
import type { ExtractedPdf } from './types.js';
import type { ExtractResponse, WorkerMemory } from './worker-protocol.js';

/** How to start a worker: a file, or (from TypeScript source) a bootstrap to evaluate. */
export type ExtractWorkerEntry = WorkerEntry;

/** Sizes and limits of the pool (docs/documents.md, docs/configuration.md). */
export interface ExtractPoolLimits {
  /** Workers at most (PDF_WORKERS). */
  workers: number;
  /** Extractions waiting for a worker at most (16 per worker in the service); 0 refuses whenever all are busy. */
  queueMax: number;
  /** One extraction's deadline, counted from when a ready worker takes it (PDF_TIMEOUT_MS). */
  timeoutMs: number;
  /** The V8 heap of one worker, old and young generation together (PDF_WORKER_MEMORY_MB). */
  memoryMb: number;
  /**
   * Most a worker's resident set may grow while it extracts, MB: past it the worker is killed
   * (422 `memory`). Default: the heap, plus the decoded bytes pdf.js may hold (PDF_MAX_DECODED_MB,
   * 64), plus `ceilingSlackMb`.
   */
  ceilingMb?: number;
  /**
   * Extractions one client (address share, `addressShareKey`) may have waiting; default all of
   * `queueMax` (a newcomer still displaces the largest holder's newest, fair-queue.ts).
   */
  queuePerClient?: number;
  /** Retry-After of a refusal when the queue is full. */
  retryAfterSeconds: number;
  /** The workers' nice value (WORKER_NICE): their CPU comes from what the event loop leaves. */
  nice: number;
  /** Told what each finished extraction took of its worker's memory. */
  onWorkerMemory?: (memory: WorkerMemory) => void;
}

interface Job {
  id: number;
  client: string;
  bytes: Uint8Array;
  options: ExtractOptions;
  resolve: (result: ExtractedPdf) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: ExtractProcess;
  ready: boolean;
  job: Job | undefined;
  timer: NodeJS.Timeout | undefined;
}

/**
 * Heap a worker started from TypeScript source (tests, `tsx`) needs for the loader alone (tsx and esbuild,
 * ~200 MB); compiled (`npm start`) there is none, and PDF_WORKER_MEMORY_MB is pdf.js's own heap.
 */
const tsxLoaderAllowanceMb = 208;

/**
 * Waiting extractions one client may hold by default: the whole queue while nobody else waits. The
 * share is kept by displacement (fair-queue.ts): a newcomer takes the newest place of the largest holder.
 */
function defaultQueuePerClient(queueMax: number): number {
  return Math.max(1, queueMax);
}

/** What a worker's resident set may grow by beyond its heap and the decoded budget (native buffers, fonts). */
const ceilingSlackMb = 32;

/** The default growth ceiling of a worker for a heap of `memoryMb` and a decoded budget of `decodedMb`. */
export function defaultCeilingMb(memoryMb: number, decodedMb = 64): number {
  return memoryMb + decodedMb + ceilingSlackMb;
}

/** The pool; `extract` and `close` are all a caller needs. */
export class ExtractPool {
  private readonly slots = new Set<Slot>();
  /** Workers ended (deadline, memory, crash) whose thread has not exited yet: their memory is still held. */
  private dying = 0;
  private readonly queue: FairQueue<Job>;
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly entry: ExtractWorkerEntry,
    private readonly limits: ExtractPoolLimits,
  ) {
    this.queue = new FairQueue(limits.queueMax, limits.queuePerClient ?? defaultQueuePerClient(limits.queueMax));
  }

  /**
   * Extracts in a worker; rejects with PdfRejectedError, PdfExtractorBusyError, or an Error (internal).
   * `client` is the caller's share of the wait queue (an address share key; one key when absent).
   */
  extract(bytes: Uint8Array, options: ExtractOptions, client = 'unknown'): Promise<ExtractedPdf> {
    if (this.closed) return Promise.reject(new Error('The PDF extractor is closed.'));
    return new Promise<ExtractedPdf>((resolve, reject) => {
      const job: Job = { id: this.nextId, client, bytes: new Uint8Array(bytes), options, resolve, reject };
      this.nextId += 1;
      const idle = this.idleSlot();
      if (idle !== undefined) return this.run(idle, job);
      if (this.slots.size + this.dying < this.limits.workers) return this.start(job);
      const queued = this.queue.push(client, job);
      if (!queued.added) return reject(this.busy(client));
      queued.displaced?.reject(this.busy(queued.displaced.client));
    });
  }

  private busy(client: string): PdfExtractorBusyError {
    const own = this.queue.waitingOf(client);
    const share = this.limits.queuePerClient ?? defaultQueuePerClient(this.limits.queueMax);
    const why =
      own >= share
        ? `${own} upload(s) from your address are already waiting`
        : `${this.queue.size} upload(s) are waiting`;
    return new PdfExtractorBusyError(
      `Every PDF extraction worker is busy and ${why} (PDF_WORKERS=${this.limits.workers}, ${this.limits.queueMax} may wait); retry shortly.`,
      this.limits.retryAfterSeconds,
      own >= share ? 'address' : 'queue',
    );
  }

  /** Fails queued and running extractions and ends every worker. */
  async close(): Promise<void> {
    this.closed = true;
    const closing = new Error('The PDF extractor was closed.');
    for (const job of this.queue.drain()) job.reject(closing);
    const workers: Promise<void>[] = [];
    for (const slot of this.slots) {
      this.finish(slot, closing);
      workers.push(slot.worker.kill());
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
    const worker = new ExtractProcess(entry, {
      oldGenerationMb: Math.max(16, heapMb - young),
      youngGenerationMb: young,
      ceilingMb: limits.ceilingMb ?? defaultCeilingMb(limits.memoryMb),
      nice: limits.nice,
    });
    // Started for `job`: it keeps the process alive until it is idle (an idle pool must not).
    const slot: Slot = { worker, ready: false, job, timer: undefined };
    this.slots.add(slot);
    worker.on('message', (message: ExtractResponse) => this.onMessage(slot, message));
    worker.on('end', (end: ExtractProcessEnd) => this.onDeath(slot, this.deathReason(end)));
  }

  private deathReason(end: ExtractProcessEnd): Error {
    if (end.kind === 'memory') {
      const ceiling = this.limits.ceilingMb ?? defaultCeilingMb(this.limits.memoryMb);
      return new PdfRejectedError(
        'PDF_MEMORY_LIMIT',
        `Reading the PDF needed more memory than a PDF worker may take (${this.limits.memoryMb} MB of heap, PDF_WORKER_MEMORY_MB; ${ceiling} MB in all); it was stopped.`,
      );
    }
    return new Error(`The PDF extract worker failed (${end.detail}).`);
  }

  private run(slot: Slot, job: Job): void {
    slot.job = job;
    slot.worker.hold(true);
    slot.timer = setTimeout(() => this.onDeadline(slot), this.limits.timeoutMs);
    slot.worker.send({ id: job.id, bytes: job.bytes, options: job.options });
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
    slot.worker.stopWatching();
    if (message.ok) {
      this.limits.onWorkerMemory?.(message.memory);
      this.finish(slot, message.result);
    }
    else if (isPdfRejectionCode(message.code)) this.finish(slot, new PdfRejectedError(message.code, message.message));
    else this.finish(slot, new Error(`PDF extraction failed: ${message.message}`));
    this.dispatch(slot);
  }

  /** The deadline of the extraction in `slot`: that worker alone is killed. */
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
   * replacement starts only once its process has exited, so the pool never holds more than PDF_WORKERS
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
    slot.worker.kill().then(exited, exited);
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

  /** Hands the next queued extraction to a worker that just became free; else it idles. */
  private dispatch(slot: Slot): void {
    const next = this.queue.shift();
    if (next !== undefined) this.run(slot, next);
    else slot.worker.hold(false);
  }
}
