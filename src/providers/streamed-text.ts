/**
 * The text of one streamed answer as it arrives: each piece goes to the call's observer at once and is
 * kept, bounded by the call's own answer ceiling (`GenerationRequest.maxAnswerChars`); with it the model
 * and token counts the stream reported. `readEvents` is the loop both SDK adapters read with.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ProviderAnswer, UpstreamStreamObserver } from './types.js';
import { AnswerTooLongError, UpstreamAbortError } from './upstream-errors.js';

/**
 * Text pieces read past a call's `maxOutputTokens`: a provider streams at most one text piece per output
 * token (OpenAI a token a chunk, Anthropic one or more a delta), so an answer in more pieces than its token
 * limit is not the answer asked for. Each piece costs the service an event through the call's actor, so
 * this bounds that CPU as the character ceiling bounds the memory (the slack covers a few pieces split oddly).
 */
const extraAnswerPieces = 64;

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
  #model: string | undefined;
  #inputTokens: number | null = null;
  #outputTokens: number | null = null;

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
 * How fast one call reads its provider's events: the first `burst` at once, then at most `perSecond` a
 * second, in batches of `batch`. Each event costs this process CPU whatever it holds (the SDK's
 * parse, the adapter's read, its share of the attempt's message): a notes answer is ~400 events, and
 * Claude's and OpenAI's streams send 100–300 a second, so neither ever waits; a provider that pours out
 * events (a replayed 7 MB answer, a flood of pings within the byte bound) costs at most `perSecond` events'
 * CPU a second per call instead of a core. The wait comes once a batch, not once an event: the events of
 * a batch are read in one turn of the event loop and reach the call's attempt as one message
 * (src/actors/upstream.ts), where a wait per event made every event a message of its own (in the
 * isolation bench the service then allocated memory as fast as it could collect it, XState's transitions
 * most of it).
 * While a call waits the SDK does not pull, so the connection is paused (back-pressure), not buffered.
 */
const eventPace: EventPace = { burst: 1_000, perSecond: 500, batch: 50 };

/**
 * The pace of one call: `eventPace`, or faster when the call's deadline (`readWithinMs`) is too short to read
 * the longest answer it allows (its pieces, and as many other events) within half of it at that pace. A
 * provider answering fast is never timed out by the pace: a long answer cut at its bound is `invalid_output`,
 * never a `timeout` the breaker would count.
 */
export function paceFor(bounds: AnswerBounds, readWithinMs: number | undefined): EventPace {
  if (readWithinMs === undefined) return eventPace;
  const events = 2 * bounds.maxPieces;
  const paced = Math.max(0, events - eventPace.burst);
  const perSecond = Math.max(eventPace.perSecond, Math.ceil(paced / (Math.max(1, readWithinMs) / 2 / 1000)));
  return { ...eventPace, perSecond };
}

interface EventPace {
  readonly burst: number;
  readonly perSecond: number;
  readonly batch: number;
}

/**
 * Reads an SDK stream to its end, handing each event to `onEvent` (as an object of unchecked fields; `{}`
 * for anything that is not an object), no faster than `pace` (`paceFor`). The SDK still yields the events it had
 * parsed when the signal fired: none of them is read, and the call fails as aborted.
 */
export async function readEvents<Event extends object>(
  stream: AsyncIterable<unknown>,
  signal: AbortSignal,
  pace: EventPace,
  onEvent: (event: Event) => void,
): Promise<void> {
  const started = performance.now();
  let events = 0;
  for await (const event of stream) {
    if (signal.aborted) break;
    // `Event` lists the fields a reader looks at, each optional and `unknown` until it is checked.
    onEvent((typeof event === 'object' && event !== null ? event : {}) as Event);
    events += 1;
    const paced = events - pace.burst;
    if (paced > 0 && paced % pace.batch === 0) {
      // The next batch is due once this one's share of the rate has passed.
      const dueMs = (paced * 1000) / pace.perSecond - (performance.now() - started);
      if (dueMs >= 1 && !(await waitUnlessAborted(dueMs, signal))) break;
    }
  }
  throwIfAborted(signal);
}

/** Waits `ms`; false when the signal fired first (then at once). */
async function waitUnlessAborted(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

/** A token count a stream event reported, or null when it reported none (or not a finite number). */
export function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}
