/**
 * `POST /v1/generate` as an event stream (docs/api.md "Streaming"): `item`, `delta` (batched), `attempt`,
 * `reset`, then exactly one `done` or `error`. The stream is committed (200 and its headers written) only
 * once generation starts, so everything refused before that is still the plain JSON error response.
 *
 * Everything written is scrubbed like the JSON answer: items with the keys' redactor (as `result` is),
 * attempts and errors as the JSON API scrubs them, and raw model output (`delta`) with the keys' redactor
 * over a held-back tail (from the last 7 letters or digits on, however far apart), so an echo of a key split
 * across batches is still found whole, even one spaced out with blanks between its characters.
 */
import type { FastifyReply } from 'fastify';
import type { Attempt } from '../actors/types.js';
import type { ProviderId, Task } from '../providers/index.js';
import { echoTailStart, keyRedactor, redactDeep, type KeyLike } from '../security/redact.js';
import type { StudyItem, StudyReset } from '../study/index.js';
import { openEventStream, type SseWriter } from './sse.js';

export interface GenerationStreamOptions {
  readonly task: Task;
  /** The request's keys: nothing written may hold them. */
  readonly keys: readonly KeyLike[];
  /** The SSE buffer bound (64 KiB): a client that does not read is dropped (and its run aborted by the route). */
  readonly maxBufferBytes: number;
  /** Comment lines this often keep proxies from closing a quiet stream (a first token can take 30 s). */
  readonly heartbeatMs: number;
  /** Raw output is sent at most this often per provider (ms) … */
  readonly deltaIntervalMs?: number;
  /** … or as soon as this many characters wait. */
  readonly deltaMaxChars?: number;
  /** The client was dropped for not reading. */
  readonly onDrop: () => void;
}

const redactedMarker = '[redacted]';

/** One generation's event stream. */
export class GenerationStream {
  private sse: SseWriter | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly redact: (text: string) => string;
  private pending = '';
  private pendingProvider: ProviderId | undefined;
  /** Characters at the end of `pending` held back by the last flush (they wait for what follows). */
  private held = 0;
  private deltaTimer: NodeJS.Timeout | undefined;
  private finished = false;

  constructor(
    private readonly reply: FastifyReply,
    private readonly options: GenerationStreamOptions,
  ) {
    this.redact = keyRedactor(options.keys);
  }

  /** The 200 and its headers have been written. */
  get committed(): boolean {
    return this.sse !== undefined;
  }

  /** Writes the 200 and the headers (once): generation has started. */
  commit(): SseWriter {
    if (this.sse !== undefined) return this.sse;
    const sse = openEventStream(this.reply, this.options.maxBufferBytes, this.options.onDrop);
    this.sse = sse;
    this.heartbeat = setInterval(() => sse.raw(': heartbeat\n\n'), this.options.heartbeatMs);
    this.heartbeat.unref();
    return sse;
  }

  item(item: StudyItem): void {
    this.write('item', { task: this.options.task, kind: item.kind, value: redactDeep(item.value, this.redact) });
  }

  reset(reset: StudyReset): void {
    this.flushDeltas(true);
    this.write('reset', reset);
  }

  /** An attempt as it ends (scrubbed by the caller as `meta.attempts` is). */
  attempt(attempt: Attempt): void {
    this.flushDeltas(true);
    this.write('attempt', attempt);
  }

  /** Raw output: batched per provider, sent every `deltaIntervalMs` or `deltaMaxChars`. */
  delta(provider: ProviderId, text: string): void {
    if (this.finished) return;
    if (this.pendingProvider !== undefined && this.pendingProvider !== provider) this.flushDeltas(true);
    this.pendingProvider = provider;
    this.pending += text;
    // Counted past what the last flush held back: a long held tail (blanks after a letter) is not re-scanned on every piece.
    if (this.pending.length - this.held >= (this.options.deltaMaxChars ?? 4096)) this.flushDeltas(false);
    else if (this.deltaTimer === undefined) {
      this.deltaTimer = setTimeout(() => {
        this.deltaTimer = undefined;
        this.flushDeltas(false);
      }, this.options.deltaIntervalMs ?? 100);
      this.deltaTimer.unref();
    }
  }

  /** The terminal event (`done` or `error`); ends the stream. */
  end(event: 'done' | 'error', data: unknown): void {
    this.flushDeltas(true);
    this.write(event, data);
    this.close();
    if (!this.reply.raw.destroyed && !this.reply.raw.writableEnded) this.reply.raw.end();
  }

  /** Stops the timers (the client went away, or the stream ended). */
  close(): void {
    this.finished = true;
    if (this.heartbeat !== undefined) clearInterval(this.heartbeat);
    if (this.deltaTimer !== undefined) clearTimeout(this.deltaTimer);
    this.heartbeat = undefined;
    this.deltaTimer = undefined;
  }

  private write(event: string, data: unknown): void {
    if (this.finished) return;
    this.commit().event(event, data);
  }

  /**
   * Sends what waits, scrubbed. Unless `all`, the tail an echo of a key could go on from (its last 7 letters
   * or digits on, `echoTailStart`) waits for what follows: every echo that starts before it lies whole in
   * what is scrubbed now, and one that starts in it is scrubbed with what follows.
   */
  private flushDeltas(all: boolean): void {
    if (this.deltaTimer !== undefined) {
      clearTimeout(this.deltaTimer);
      this.deltaTimer = undefined;
    }
    const provider = this.pendingProvider;
    if (provider === undefined || this.pending === '') return;
    const scrubbed = this.redact(this.pending);
    // Never held back: a marker just put in (an echo running on after it is found again in what follows).
    const marked = scrubbed === this.pending ? 0 : scrubbed.lastIndexOf(redactedMarker) + redactedMarker.length;
    const cut = all ? scrubbed.length : Math.max(marked, echoTailStart(scrubbed));
    this.pending = scrubbed.slice(cut);
    this.held = this.pending.length;
    if (all) this.pendingProvider = undefined;
    if (cut === 0) return;
    this.write('delta', { provider, text: scrubbed.slice(0, cut) });
  }
}
