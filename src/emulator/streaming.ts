/**
 * Streamed answers, as the real APIs stream them (docs/emulator.md "Streams"): a 200 `text/event-stream`
 * whose text arrives one token (4 characters) per event at the emulator's speed (or in as many pieces as set), and the stream faults
 * (cut, stall, an in-band error event, a malformed chunk after N chunks; a slow first token).
 */
import type { ServerResponse } from 'node:http';
import type { FaultSpec } from './faults.js';
import type { WireHeaders } from './http-io.js';

/** What a streamed answer holds besides its text. */
export interface StreamDetail {
  readonly model: string;
  readonly truncated: boolean;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly sequence: number;
  /** OpenAI: the request asked `stream_options.include_usage`. */
  readonly includeUsage: boolean;
  /** The request's output token limit: the stream never has more text pieces than it (a real API's never does). */
  readonly maxTokens?: number | undefined;
}

/** A request's token limit, when it is a positive whole number. */
export function tokenLimitOf(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;
}

/** A whole answer's parts, read from a replayed success body (`respond` on a streamed call). */
export interface ReplayedAnswer {
  readonly text: string;
  readonly model?: string;
  readonly truncated: boolean;
  readonly inputTokens?: number;
  readonly outputTokens?: number;
}

/** One provider's event stream, as SSE text (each string one or more whole events). */
export interface StreamWire {
  /** The parts of a body that is this provider's whole success answer (a Message, a chat.completion), else undefined. */
  replay(body: unknown): ReplayedAnswer | undefined;
  /** The events before the first token (Anthropic `message_start`, `content_block_start`; OpenAI the role chunk). */
  open(detail: StreamDetail): string;
  /** One text piece. */
  delta(text: string, detail: StreamDetail): string;
  /** The events after the last token, through the provider's end of stream. */
  close(detail: StreamDetail): string;
  /** An in-band error event carrying `body` (the provider's own error object). */
  error(body: unknown): string;
  /** A chunk whose data is not JSON. */
  malformed(detail: StreamDetail): string;
}

/** The characters of one emulated token (the usage count is 4 characters a token too). */
const tokenChars = 4;
/** Below this many ms between tokens, several tokens go out per timer tick. */
const minTickMs = 10;
/**
 * The most tokens of an unpaced stream in one write (~40 KB of events): each write waits for the socket
 * and the loop's next turn, so a long answer to one client (a replayed 7 MB
 * answer) delays the others' answers by a write's worth, as separate provider APIs would not delay each other at all.
 */
const maxPiecesPerWrite = 256;

/** Where the answer's text is cut into streamed pieces: `count` pieces, piece i starting at `start(i)`. */
interface Slicing {
  readonly count: number;
  start(index: number): number;
}

/**
 * A token's 4 characters a piece, more when the text would otherwise take more pieces than the request's
 * token limit (a real API streams at most one piece per output token). With `pieces` set, the text is cut
 * into that many pieces of near-equal length instead (never more than its characters or the token limit):
 * a benchmark chooses how many events an answer costs its reader, whatever the answer's length.
 */
function slicingOf(text: string, maxTokens: number | undefined, pieces: number): Slicing {
  if (pieces > 0) {
    const count = Math.min(pieces, text.length, maxTokens ?? Number.POSITIVE_INFINITY);
    return { count, start: (index) => Math.floor((index * text.length) / count) };
  }
  const pieceChars = maxTokens === undefined ? tokenChars : Math.max(tokenChars, Math.ceil(text.length / maxTokens));
  return { count: Math.ceil(text.length / pieceChars), start: (index) => Math.min(text.length, index * pieceChars) };
}

/** The pieces `from` (inclusive) to `to` (exclusive) of the answer's text: made per write, never all at once. */
function tokenPieces(text: string, slicing: Slicing, from: number, to: number): string[] {
  const pieces: string[] = [];
  for (let index = from; index < to; index += 1) pieces.push(text.slice(slicing.start(index), slicing.start(index + 1)));
  return pieces;
}

export interface StreamPacing {
  /** Tokens (pieces) per second; 0 writes every token at once. */
  readonly tokensPerSecond: number;
  /** Pieces per answer; 0 cuts one per token (see `slicingOf`). */
  readonly streamPieces: number;
  /** Pending timers, cleared when the emulator closes. */
  readonly pending: Set<NodeJS.Timeout>;
}

/** Resolves after `ms` (at once for 0), or as soon as the response closes; the timer is tracked for close(). */
function pause(response: ServerResponse, pacing: StreamPacing, ms: number): Promise<void> {
  if (ms <= 0 || response.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      pacing.pending.delete(timer);
      response.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    pacing.pending.add(timer);
    response.once('close', done);
  });
}

/**
 * Resolves on the event loop's next turn. A write the socket takes at once calls back on the same turn (a
 * `nextTick`), so an unpaced stream that only awaited its writes never gave the loop back until the kernel's
 * buffer filled: 16 replayed 7 MB answers held it for 120-320 ms at a time, and every other client's call
 * waited on that (the profile's stretches were all `serveStream` in microtasks).
 */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Writes `text` and resolves once it is handed to the socket (so a cut after it cuts after these bytes). */
function write(response: ServerResponse, text: string): Promise<void> {
  return new Promise((resolve) => {
    if (response.destroyed) return resolve();
    // A client that goes away may leave the write's callback uncalled: its close ends the wait too.
    const done = (): void => {
      response.off('close', done);
      resolve();
    };
    response.once('close', done);
    response.write(text, done);
  });
}

/** The stream fault of a call, with its `after` (chunks before it acts) resolved. */
function afterOf(fault: FaultSpec | undefined, pieces: number): number {
  if (fault?.after !== undefined) return Math.min(fault.after, pieces);
  // `cut` without `after` cuts halfway; the others act before the first token.
  return fault?.fault === 'cut' ? Math.floor(pieces / 2) : 0;
}

const streamFaults = new Set(['cut', 'stall', 'streamError', 'malformedChunk', 'slowFirstToken']);

/**
 * Serves one streamed answer. The stream faults act after `after` text chunks: `cut` destroys the socket,
 * `stall` writes nothing more (until the client goes away), `streamError` sends the in-band error event and
 * ends, `malformedChunk` sends a chunk that is not JSON and ends; `slowFirstToken` waits `ms` before the first.
 * Resolves `'cut'` when the client closed the connection before the text was all written, else `'served'`.
 */
export async function serveStream(
  response: ServerResponse,
  wire: StreamWire,
  headers: WireHeaders,
  text: string,
  detail: StreamDetail,
  fault: FaultSpec | undefined,
  pacing: StreamPacing,
  inBandError: () => unknown,
): Promise<'served' | 'cut'> {
  const active = fault !== undefined && streamFaults.has(fault.fault) ? fault : undefined;
  const slicing = slicingOf(text, detail.maxTokens, pacing.streamPieces);
  const pieceCount = slicing.count;
  const after = afterOf(active, pieceCount);
  response.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    ...headers,
  });
  await write(response, wire.open(detail));
  if (active?.fault === 'slowFirstToken') await pause(response, pacing, active.ms ?? 0);

  // Unpaced, the tokens go out in writes of `maxPiecesPerWrite`, each waiting for the socket to take the
  // last and for the loop's next turn: a long answer never sits whole in memory, a client that stops reading
  // is seen to, and other clients' calls are served between the writes.
  const perTick =
    pacing.tokensPerSecond > 0
      ? Math.max(1, Math.round((pacing.tokensPerSecond * minTickMs) / 1000))
      : maxPiecesPerWrite;
  const tickMs = pacing.tokensPerSecond > 0 ? (1000 * perTick) / pacing.tokensPerSecond : 0;
  const stopAt = active && active.fault !== 'slowFirstToken' ? after : pieceCount;
  let sent = 0;
  while (sent < stopAt && !response.destroyed) {
    if (sent > 0) await (tickMs > 0 ? pause(response, pacing, tickMs) : nextTurn());
    const batch = tokenPieces(text, slicing, sent, Math.min(stopAt, sent + perTick));
    await write(response, batch.map((piece) => wire.delta(piece, detail)).join(''));
    sent += batch.length;
  }
  if (response.destroyed) return sent < stopAt ? 'cut' : 'served';

  switch (active?.fault) {
    case 'cut':
      response.socket?.destroy();
      break;
    case 'stall':
      break;
    case 'streamError':
      response.end(wire.error(inBandError()));
      break;
    case 'malformedChunk':
      response.end(wire.malformed(detail));
      break;
    default:
      response.end(wire.close(detail));
  }
  return 'served';
}

/** One SSE event: an optional `event:` line, one `data:` line, a blank line. */
export function sseEvent(event: string | undefined, data: unknown): string {
  const payload = typeof data === 'string' ? data : JSON.stringify(data);
  return `${event === undefined ? '' : `event: ${event}\n`}data: ${payload}\n\n`;
}

/** A number read from an untrusted body, or undefined. */
export function countOf(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}
