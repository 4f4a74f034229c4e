/**
 * The text of one streamed answer as it arrives: each piece goes to the call's observer at once and is
 * kept, bounded by the call's own answer ceiling (`GenerationRequest.maxAnswerChars`).
 */
import type { UpstreamStreamObserver } from './types.js';
import { AnswerTooLongError, UpstreamAbortError } from './upstream-errors.js';

/**
 * Text pieces read past a call's `maxOutputTokens`: a provider streams at most one text piece per output
 * token (OpenAI a token a chunk, Anthropic one or more a delta), so an answer in more pieces than its token
 * limit is not the answer asked for. Each piece costs the service an event through the call's actor, so
 * this bounds that CPU as the character ceiling bounds the memory (the slack covers a few pieces split oddly).
 */
export const extraAnswerPieces = 64;

/** What one call's text may be: its characters (`maxAnswerChars`) and its pieces (tokens + slack). */
export interface AnswerBounds {
  readonly maxChars: number;
  readonly maxPieces: number;
}

/** The bounds of a request's answer, from its own ceiling and token limit. */
export function answerBoundsOf(request: { readonly maxAnswerChars: number; readonly maxOutputTokens: number }): AnswerBounds {
  return { maxChars: request.maxAnswerChars, maxPieces: request.maxOutputTokens + extraAnswerPieces };
}

export class StreamedText {
  readonly #observer: UpstreamStreamObserver | undefined;
  readonly #bounds: AnswerBounds;
  #text = '';
  #pieces = 0;

  constructor(observer: UpstreamStreamObserver | undefined, bounds: AnswerBounds) {
    this.#observer = observer;
    this.#bounds = bounds;
  }

  /**
   * Keeps a piece and hands it on. A piece that would take the text past a bound is neither kept
   * nor handed on: `AnswerTooLongError` (invalid_output), thrown inside the adapter's `for await`, which
   * ends the SDK's iteration, and the SDK aborts its request (the connection is closed, nothing more is read).
   */
  add(piece: string): void {
    if (piece.length === 0) return;
    const { maxChars, maxPieces } = this.#bounds;
    if (this.#text.length + piece.length > maxChars)
      throw new AnswerTooLongError(maxChars, 'characters', this.#text.length + piece.length);
    if (this.#pieces + 1 > maxPieces) throw new AnswerTooLongError(maxPieces, 'text pieces', this.#pieces + 1);
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
