/**
 * The text of one streamed answer as it arrives: each piece goes to the call's observer at once and is
 * kept, bounded, for the whole answer (what the transport's 8 MiB bound on a buffered body was); with it
 * the model and token counts the stream reported. `readEvents` is the loop both SDK adapters read with.
 */
import type { ProviderAnswer, UpstreamStreamObserver } from './types.js';
import { UnexpectedResponseError, UpstreamAbortError } from './upstream-errors.js';

/** The longest answer text kept (UTF-16 units): far above every `max_tokens`, far below a heap. */
export const maxAnswerChars = 8 * 1024 * 1024;

export class StreamedText {
  readonly #observer: UpstreamStreamObserver | undefined;
  readonly #limit: number;
  #text = '';
  #pieces = 0;
  #model: string | undefined;
  #inputTokens: number | null = null;
  #outputTokens: number | null = null;

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

  /** The model the stream says answered, when it names one (the last named wins). */
  noteModel(model: unknown): void {
    if (typeof model === 'string' && model !== '') this.#model = model;
  }

  /** Token counts the stream reported; a count it did not report keeps the one reported before. */
  noteUsage(inputTokens: unknown, outputTokens: unknown): void {
    this.#inputTokens = numberOrNull(inputTokens) ?? this.#inputTokens;
    this.#outputTokens = numberOrNull(outputTokens) ?? this.#outputTokens;
  }

  /** The whole answer, under the requested model's name when the stream named none. */
  answer(requestedModel: string, truncated: boolean): ProviderAnswer {
    return {
      text: this.#text,
      model: this.#model ?? requestedModel,
      usage: { inputTokens: this.#inputTokens, outputTokens: this.#outputTokens },
      truncated,
    };
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
function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new UpstreamAbortError(signal.reason);
}

/**
 * Reads an SDK stream to its end, handing each event to `onEvent` (as an object of unchecked fields; `{}`
 * for anything that is not an object). The SDK still yields the events it had parsed when the signal
 * fired: none of them is read, and the call fails as aborted.
 */
export async function readEvents<Event extends object>(
  stream: AsyncIterable<unknown>,
  signal: AbortSignal,
  onEvent: (event: Event) => void,
): Promise<void> {
  for await (const event of stream) {
    if (signal.aborted) break;
    // `Event` lists the fields a reader looks at, each optional and `unknown` until it is checked.
    onEvent((typeof event === 'object' && event !== null ? event : {}) as Event);
  }
  throwIfAborted(signal);
}

/** A token count a stream event reported, or null when it reported none (or not a finite number). */
export function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}
