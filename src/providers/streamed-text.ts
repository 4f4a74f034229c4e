/**
 * The text of one streamed answer as it arrives: each piece goes to the call's observer at once and is
 * kept, bounded, for the whole answer (what the transport's 8 MiB bound on a buffered body was).
 */
import type { UpstreamStreamObserver } from './types.js';
import { UnexpectedResponseError, UpstreamAbortError } from './upstream-errors.js';

/** The longest answer text kept (UTF-16 units): far above every `max_tokens`, far below a heap. */
export const maxAnswerChars = 8 * 1024 * 1024;

export class StreamedText {
  readonly #observer: UpstreamStreamObserver | undefined;
  readonly #limit: number;
  #text = '';
  #pieces = 0;

  constructor(observer: UpstreamStreamObserver | undefined, limit: number = maxAnswerChars) {
    this.#observer = observer;
    this.#limit = limit;
  }

  /** Keeps a piece and hands it on; past the bound the call fails as the provider's (server_error). */
  add(piece: string): void {
    if (piece.length === 0) return;
    if (this.#text.length + piece.length > this.#limit)
      throw new UnexpectedResponseError(
        `The provider's answer passed ${this.#limit} characters; it was cut off.`,
      );
    this.#text += piece;
    this.#pieces += 1;
    this.#observer?.onDelta(piece);
  }

  get text(): string {
    return this.#text;
  }

  /** How many non-empty pieces arrived. */
  get pieces(): number {
    return this.#pieces;
  }
}

/**
 * The SDKs end a stream's iteration quietly when its request is aborted (their own `break` path): once
 * the loop is over, a fired signal means the answer was not read to its end.
 */
export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new UpstreamAbortError(signal.reason);
}

/** A token count a stream event reported, or null when it reported none (or not a finite number). */
export function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}
