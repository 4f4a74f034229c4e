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
import type { ExtractReservation, PdfInput } from './reservation.js';

/** How to start a worker: a file, or (from TypeScript source) a bootstrap to evaluate. */
export type ExtractWorkerEntry = WorkerEntry;

/** Sizes and limits of the pool (docs/documents.md, docs/configuration.md). */
export interface ExtractPoolLimits {
  /** Workers at most (PDF_WORKERS). */
  workers: number;
  /** Extractions waiting for a worker at most (16 per worker in the service); 0 refuses whenever all are busy. */
  queueMax: number;
  /**
   * One extraction's deadline, counted from when a ready worker takes it (PDF_TIMEOUT_MS), for every
   * `pagesPerDeadline` pages it reads (at least once).
   */
  timeoutMs: number;
  /** Pages each `timeoutMs` pays for (default `defaultPagesPerDeadline`). */
  pagesPerDeadline?: number;
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
  input: PdfInput;
  options: ExtractOptions;
  resolve: (result: ExtractedPdf) => void;
  reject: (error: Error) => void;
}

/** A place held for an upload whose body is still arriving. */
interface Held {
  id: number;
  client: string;
  abort: AbortController;
  /** Until extracted, released or displaced. */
  open: boolean;
}

interface Slot {
  worker: ExtractProcess;
  ready: boolean;
  job: Job | undefined;
  timer: NodeJS.Timeout | undefined;
  /** When the worker took its job (performance.now()), and how long that job may take in all. */
  startedAt: number;
  allowedMs: number;
}

/**
 * Pages one PDF_TIMEOUT_MS pays for. A whole textbook is read a page at a time for tens of seconds
 * (pdf.js's CPU, a font or more per page): one fixed deadline either refused a 1,000-page book on a busy
 * host or let a hostile 20-page PDF hold a worker for minutes. Once the worker says how many pages it
 * will read, the deadline becomes PDF_TIMEOUT_MS for each 250 of them: at the default MAX_PDF_PAGES at
 * most 4 × PDF_TIMEOUT_MS, and a short PDF keeps the single one.
 */
const defaultPagesPerDeadline = 250;

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
  /** Places held for uploads whose body is still arriving (`reserve`), by client. */
  private readonly reserved = new Map<string, Held[]>();
  private reservedCount = 0;

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
  extract(input: PdfInput, options: ExtractOptions, client = 'unknown'): Promise<ExtractedPdf> {
    try {
      return this.reserve(client).extract(input, options);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /**
   * Holds a place (a worker or the wait queue) for an upload before its body is read, so that a full
   * queue or an address past its share is refused before a byte of the file is taken. Throws
   * PdfExtractorBusyError. The place is the client's until `extract` or `release`; a newcomer from an
   * address holding fewer places may take it (its `signal` aborts with the busy error), as it may take a
   * waiting extraction's.
   */
  reserve(client = 'unknown'): ExtractReservation {
    if (this.closed) throw new Error('The PDF extractor is closed.');
    const capacity = this.limits.workers + this.limits.queueMax;
    const own = this.holdingsOf(client);
    const share = (this.limits.queuePerClient ?? defaultQueuePerClient(this.limits.queueMax)) + this.limits.workers;
    if (own >= share) throw this.busy(client, 'address');
    if (this.held() >= capacity && !this.displaceFor(own)) throw this.busy(client);
    const held: Held = { id: this.nextId, client, abort: new AbortController(), open: true };
    this.nextId += 1;
    const list = this.reserved.get(client);
    if (list === undefined) this.reserved.set(client, [held]);
    else list.push(held);
    this.reservedCount += 1;
    return {
      signal: held.abort.signal,
      extract: (input, options) => {
        if (!this.unreserve(held)) return Promise.reject(held.abort.signal.reason instanceof Error ? held.abort.signal.reason : new Error('The reservation was released.'));
        if (this.closed) return Promise.reject(new Error('The PDF extractor is closed.'));
        return new Promise<ExtractedPdf>((resolve, reject) => {
          const job = this.job(client, input, options, resolve, reject);
          // The place was held: it is queued whatever the queue holds now.
          if (!this.place(job)) this.queue.add(client, job);
        });
      },
      release: () => {
        this.unreserve(held);
      },
    };
  }

  private job(client: string, input: PdfInput, options: ExtractOptions, resolve: Job['resolve'], reject: Job['reject']): Job {
    const job: Job = { id: this.nextId, client, input: input instanceof Uint8Array ? new Uint8Array(input) : input, options, resolve, reject };
    this.nextId += 1;
    return job;
  }

  /** Runs `job` on an idle worker or a new one; false when every worker is taken. */
  private place(job: Job): boolean {
    const idle = this.idleSlot();
    if (idle !== undefined) {
      this.run(idle, job);
      return true;
    }
    if (this.slots.size + this.dying < this.limits.workers) {
      this.start(job);
      return true;
    }
    return false;
  }

  /** Places taken: running or starting extractions, dying workers, waiting extractions, reservations. */
  private held(): number {
    let running = this.dying;
    for (const slot of this.slots) if (slot.job !== undefined) running += 1;
    return running + this.queue.size + this.reservedCount;
  }

  /** Waiting extractions and reservations of `client`. */
  private holdingsOf(client: string): number {
    return this.queue.waitingOf(client) + (this.reserved.get(client)?.length ?? 0);
  }

  /**
   * The queue is full: the client holding the most places, if it holds at least two more than the
   * newcomer's `own`, gives up its newest (a reservation is aborted, a waiting extraction refused).
   */
  private displaceFor(own: number): boolean {
    let largest: string | undefined;
    let most = 0;
    for (const client of new Set([...this.reserved.keys(), ...this.queue.clients()])) {
      const holdings = this.holdingsOf(client);
      if (holdings > most) [largest, most] = [client, holdings];
    }
    if (largest === undefined || most <= own + 1) return false;
    const newestHeld = this.reserved.get(largest)?.at(-1);
    const newestQueued = this.queue.newestOf(largest);
    if (newestHeld !== undefined && (newestQueued === undefined || newestHeld.id > newestQueued.id)) {
      this.unreserve(newestHeld);
      newestHeld.abort.abort(this.busy(largest));
      return true;
    }
    const displaced = this.queue.popNewest(largest);
    displaced?.reject(this.busy(largest));
    return displaced !== undefined;
  }

  /** Gives a reservation's place back; false when it was already given (extracted, released, displaced). */
  private unreserve(held: Held): boolean {
    if (!held.open) return false;
    held.open = false;
    const list = this.reserved.get(held.client) ?? [];
    list.splice(list.indexOf(held), 1);
    if (list.length === 0) this.reserved.delete(held.client);
    this.reservedCount -= 1;
    return true;
  }

  private busy(client: string, scope?: 'address'): PdfExtractorBusyError {
    const own = this.holdingsOf(client);
    const share = this.limits.queuePerClient ?? defaultQueuePerClient(this.limits.queueMax);
    const byAddress = scope === 'address' || own >= share;
    const why = byAddress
      ? `${own} upload(s) from your address are already waiting`
      : `${this.queue.size + this.reservedCount} upload(s) are waiting`;
    return new PdfExtractorBusyError(
      `Every PDF extraction worker is busy and ${why} (PDF_WORKERS=${this.limits.workers}, ${this.limits.queueMax} may wait); retry shortly.`,
      this.limits.retryAfterSeconds,
      byAddress ? 'address' : 'queue',
    );
  }

  /** Fails queued and running extractions and ends every worker. */
  async close(): Promise<void> {
    this.closed = true;
    const closing = new Error('The PDF extractor was closed.');
    for (const job of this.queue.drain()) job.reject(closing);
    for (const list of [...this.reserved.values()]) for (const held of [...list]) if (this.unreserve(held)) held.abort.abort(closing);
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
    const slot: Slot = { worker, ready: false, job, timer: undefined, startedAt: 0, allowedMs: 0 };
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
    slot.startedAt = performance.now();
    slot.allowedMs = this.limits.timeoutMs;
    slot.timer = setTimeout(() => this.onDeadline(slot), slot.allowedMs);
    slot.worker.send(
      job.input instanceof Uint8Array
        ? { id: job.id, bytes: job.input, options: job.options }
        : { id: job.id, path: job.input.path, options: job.options },
    );
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
    if (message.type === 'pages') {
      this.extendDeadline(slot, message.pagesUsed);
      return;
    }
    slot.worker.stopWatching();
    if (message.ok) {
      this.limits.onWorkerMemory?.(message.memory);
      this.finish(slot, message.result);
    }
    else if (isPdfRejectionCode(message.code)) this.finish(slot, new PdfRejectedError(message.code, message.message));
    else this.finish(slot, new Error(`PDF extraction failed: ${message.message}`));
    this.dispatch(slot);
  }

  /** The worker will read `pagesUsed` pages: its deadline becomes PDF_TIMEOUT_MS for each `pagesPerDeadline` of them. */
  private extendDeadline(slot: Slot, pagesUsed: number): void {
    const perDeadline = this.limits.pagesPerDeadline ?? defaultPagesPerDeadline;
    const allowedMs = this.limits.timeoutMs * Math.max(1, Math.ceil(pagesUsed / perDeadline));
    if (slot.timer === undefined || allowedMs <= slot.allowedMs) return;
    clearTimeout(slot.timer);
    slot.allowedMs = allowedMs;
    slot.timer = setTimeout(() => this.onDeadline(slot), Math.max(0, slot.startedAt + allowedMs - performance.now()));
  }

  /** The deadline of the extraction in `slot`: that worker alone is killed. */
  private onDeadline(slot: Slot): void {
    slot.timer = undefined;
    const seconds = Math.round(slot.allowedMs / 100) / 10;
    const perDeadline = this.limits.pagesPerDeadline ?? defaultPagesPerDeadline;
    this.onDeath(
      slot,
      new PdfRejectedError(
        'PDF_EXTRACTION_TIMEOUT',
        `The PDF could not be read within ${seconds} s (PDF_TIMEOUT_MS for each ${perDeadline} pages read); it was stopped.`,
      ),
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
