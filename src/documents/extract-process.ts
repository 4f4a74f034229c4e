/**
 * One extract worker as a child process with a hard memory ceiling. A worker thread's
 * `resourceLimits` bound only its V8 heap: a decompression bomb lives in ArrayBuffers outside it (a
 * tiny PDF can grow the process by gigabytes), and the process's memory cannot be told apart by thread.
 * A child process can: while it extracts, its resident set is read from `/proc/<pid>/statm` every
 * `memoryPollMs`, and past its ceiling it is killed with SIGKILL, which needs nothing from the child
 * (a thread stuck in a long decode loop cannot refuse it) and returns all its memory at once.
 * Its heap keeps the V8 limit (PDF_WORKER_MEMORY_MB): a heap past it aborts the child, read the same way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { WorkerEntry } from '../threads/worker-entry.js';
import type { ExtractRequestToChild, ExtractResponse } from './worker-protocol.js';

/** How often the resident set of a child that is extracting is read. */
const memoryPollMs = 20;

const pageBytes = 4096;

/** Options of one extract process. */
export interface ExtractProcessOptions {
  /** V8 old-generation and young-generation sizes, MB. */
  oldGenerationMb: number;
  youngGenerationMb: number;
  /** Most the resident set may grow, MB, above what the child held when it said `ready`. */
  ceilingMb: number;
  /** WORKER_NICE. */
  nice: number;
}

/** Why a child ended, as the pool needs it. */
export type ExtractProcessEnd = { kind: 'memory'; peakMb: number } | { kind: 'crash'; detail: string };

/**
 * A running child. Events: `message` (ExtractResponse), `end` (ExtractProcessEnd, once, when it dies
 * by itself or past its ceiling; not after `kill`).
 */
export class ExtractProcess extends EventEmitter {
  private readonly child: ChildProcess;
  private readyRssBytes = 0;
  private poller: NodeJS.Timeout | undefined;
  private stderrTail = '';
  private killedByCeiling: number | undefined;
  private killedByCaller = false;
  private readonly exited: Promise<void>;

  constructor(
    entry: WorkerEntry,
    private readonly options: ExtractProcessOptions,
  ) {
    super();
    const flags = [`--max-old-space-size=${options.oldGenerationMb}`, `--max-semi-space-size=${Math.max(1, Math.floor(options.youngGenerationMb / 2))}`];
    const args = entry.kind === 'file' ? [...flags, fileURLToPath(entry.url)] : [...flags, '--input-type=module', '-e', entry.code];
    this.child = spawn(process.execPath, args, {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      serialization: 'advanced',
      env: { ...process.env, STUDY_HELPER_EXTRACT_NICE: String(options.nice) },
    });
    this.child.stderr?.setEncoding('utf8');
    this.child.stderr?.on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-4096);
    });
    this.child.on('message', (message: ExtractResponse) => {
      if (message.type === 'ready') this.readyRssBytes = this.rssBytes();
      this.emit('message', message);
    });
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.stopWatching();
        resolve();
        if (!this.killedByCaller) this.emit('end', this.endReason(code, signal));
      });
    });
    this.child.once('error', (error) => {
      this.stderrTail += `\n${error.message}`;
    });
  }

  /** Whether the child keeps the parent alive: while it starts or extracts, yes; idle, no (an idle pool must not). */
  hold(busy: boolean): void {
    if (busy) {
      this.child.ref();
      this.child.channel?.ref();
    } else {
      this.child.unref();
      this.child.channel?.unref();
    }
  }

  /** Sends one extraction and watches the child's memory until `stopWatching`. */
  send(request: ExtractRequestToChild): void {
    this.child.send(request);
    this.watch();
  }

  /** Stops reading the child's memory (its extraction ended). */
  stopWatching(): void {
    if (this.poller !== undefined) clearInterval(this.poller);
    this.poller = undefined;
  }

  /** Ends the child (SIGKILL) and resolves once it has exited; no `end` event follows. */
  async kill(): Promise<void> {
    this.killedByCaller = true;
    this.stopWatching();
    // Its exit must be awaited: an unref'd child would let the parent end before it is reaped.
    this.hold(true);
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }

  private watch(): void {
    this.stopWatching();
    // From what it holds now (pdf.js loaded, earlier documents freed): the growth of this extraction.
    const ceilingBytes = Math.max(this.readyRssBytes, this.rssBytes()) + this.options.ceilingMb * 1024 * 1024;
    this.poller = setInterval(() => {
      const rss = this.rssBytes();
      if (rss <= ceilingBytes) return;
      this.killedByCeiling = rss;
      this.stopWatching();
      this.child.kill('SIGKILL');
    }, memoryPollMs);
  }

  /** The child's resident set from /proc (0 where there is none: no ceiling there). */
  private rssBytes(): number {
    if (this.child.pid === undefined) return 0;
    try {
      const fields = readFileSync(`/proc/${this.child.pid}/statm`, 'latin1').split(' ');
      return Number(fields[1]) * pageBytes;
    } catch {
      return 0;
    }
  }

  private endReason(code: number | null, signal: NodeJS.Signals | null): ExtractProcessEnd {
    if (this.killedByCeiling !== undefined) return { kind: 'memory', peakMb: Math.round(this.killedByCeiling / (1024 * 1024)) };
    // V8 aborts on a heap past --max-old-space-size; the child exits 137 on a refused ArrayBuffer.
    if (signal === 'SIGABRT' || code === 134 || code === 137 || /heap out of memory|allocation failed/iu.test(this.stderrTail)) {
      return { kind: 'memory', peakMb: 0 };
    }
    const tail = this.stderrTail.trim().split('\n').slice(-3).join(' | ');
    return { kind: 'crash', detail: `exit ${code ?? signal ?? 'unknown'}${tail === '' ? '' : `: ${tail}`}` };
  }
}
