/**
 * The part of a generation call every emulated provider shares: key-prefix faults, provider-wide
 * faults, then a deterministic study answer in that provider's envelope.
 */
import type { ServerResponse } from 'node:http';
import type { EmulatedProvider, FaultBoard, FaultSpec, StreamErrorKind } from './faults.js';
import { approximateTokens, cutMidBody, garbageBody, send, stallAfterHeaders, type WireHeaders, type WireResponse } from './http-io.js';
import { invalidStudyAnswer, numbersAsStrings, studyAnswer } from './study-answers.js';
import { restAfter, type ContinuationAsk } from './continuation.js';
import { serveStream, type StreamWire } from './streaming.js';
import { parseTaskMarker, type TaskMarker } from './task-marker.js';

/** The errors every emulated provider can answer, in the emulator's words (each renders its own body). */
export type WireErrorKind = StreamErrorKind;

interface ErrorDetail {
  readonly key?: string;
  readonly message?: string;
  readonly inputTokens?: number;
}

interface SuccessDetail {
  readonly model: string;
  readonly text: string;
  readonly truncated: boolean;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly sequence: number;
}

/** What one emulated provider looks like on the wire. */
export interface ProviderWire {
  readonly provider: EmulatedProvider;
  error(kind: WireErrorKind, detail: ErrorDetail): WireResponse;
  success(detail: SuccessDetail): WireResponse;
  /** Headers every response of this provider carries (request ids). */
  commonHeaders(sequence: number): WireHeaders;
  /** Its event stream, where the provider's API streams (TimelyGPT's does not); `errorBody` is an in-band error's. */
  readonly stream?: StreamWire & { errorBody(kind: WireErrorKind): unknown };
}

/** A generation call, already parsed and authenticated by the provider's route. */
export interface GenerationCall {
  readonly key: string;
  readonly model: string;
  readonly system: string;
  readonly userText: string;
  /** The request asked for a stream (`stream: true`). */
  readonly stream: boolean;
  /** OpenAI: the request asked for the usage chunk (`stream_options.include_usage`). */
  readonly includeUsage: boolean;
  /** The request's output token limit (`max_tokens`, `max_completion_tokens`), when it gave one. */
  readonly maxTokens?: number | undefined;
  /** The request asks for the rest of an answer begun elsewhere (src/emulator/continuation.ts). */
  readonly continuation?: ContinuationAsk;
}

export interface GenerationOptions {
  readonly slowMs: number;
  readonly maxInputChars: number;
  /** Pending timers and hanging responses, cleared on close. */
  readonly pending: Set<NodeJS.Timeout>;
  /** Streamed answers: tokens per second (0: every token at once). Changed at run time by `setSpeed`. */
  tokensPerSecond: number;
  /** Streamed answers: pieces per answer (0: one per token). Changed at run time by `setStreamPieces`. */
  streamPieces: number;
  nextSequence(): number;
}

/** Key prefixes that pick a per-key behaviour (docs/emulator.md). */
/** Keys whose generation calls never answer, as the `hang` fault but for that key alone. */
const hangingKeyPrefix = 'emu-hang-';

export function keyFault(key: string): WireErrorKind | undefined {
  if (key.startsWith('emu-bad-')) return 'auth';
  if (key.startsWith('emu-ratelimit-')) return 'rateLimit';
  if (key.startsWith('emu-quota-')) return 'quota';
  if (key.startsWith('emu-forbidden-')) return 'permission';
  return undefined;
}

function withHeaders(wire: WireResponse, headers: WireHeaders): WireResponse {
  return { ...wire, headers: { ...headers, ...wire.headers } };
}

/** The marker with the other language (`wrongLanguage`): valid material, in the language not asked for. */
function otherLanguage(marker: TaskMarker | undefined): TaskMarker {
  const asked = marker ?? { task: 'notes', lang: 'en', count: 5, conceptIds: [] };
  return { ...asked, lang: asked.lang === 'ko' ? 'en' : 'ko' };
}

/**
 * The answer's text for a call and a content fault; for a continuation request, the rest of the answer the
 * original messages get after the prefix the request carries.
 */
function answerText(call: GenerationCall, fault: FaultSpec | undefined): string {
  const { continuation } = call;
  if (continuation === undefined) return wholeAnswerText(call, fault);
  const whole = wholeAnswerText({ ...call, userText: continuation.userText }, fault);
  return restAfter(whole, continuation.prefix);
}

function wholeAnswerText(call: GenerationCall, fault: FaultSpec | undefined): string {
  const marker = parseTaskMarker(call.system) ?? parseTaskMarker(call.userText);
  switch (fault?.fault) {
    case 'invalidOutput':
      return JSON.stringify(invalidStudyAnswer(marker));
    case 'wrongLanguage':
      return JSON.stringify(studyAnswer(otherLanguage(marker), call.userText));
    case 'stringNumbers':
      return JSON.stringify(numbersAsStrings(studyAnswer(marker, call.userText)));
    case 'fenced':
      return `Here is the study material you asked for:\n\n\`\`\`json\n${JSON.stringify(studyAnswer(marker, call.userText), null, 2)}\n\`\`\`\n\nLet me know if you need anything else.`;
    case 'truncated': {
      const full = JSON.stringify(studyAnswer(marker, call.userText));
      return full.slice(0, Math.floor(full.length / 2));
    }
    default:
      return JSON.stringify(studyAnswer(marker, call.userText));
  }
}

/**
 * The output tokens an answer reports: its length (4 characters a token), or with `fullUsage` the call's
 * whole output room (`max_tokens`), as a provider billing every token it was allowed would.
 */
function outputTokensOf(call: GenerationCall, fault: FaultSpec | undefined, text: string): number {
  return fault?.fault === 'fullUsage' && call.maxTokens !== undefined ? call.maxTokens : approximateTokens(text);
}

/**
 * Serves one generation call, using up one call of the provider-wide fault once the key passed.
 * Faults that never answer (`hang`, `stall`) leave the response open until the client goes away.
 */
export function serveGeneration(
  wire: ProviderWire,
  board: FaultBoard,
  options: GenerationOptions,
  response: ServerResponse,
  call: GenerationCall,
): void {
  const sequence = options.nextSequence();
  const headers = wire.commonHeaders(sequence);
  const reply = (wireResponse: WireResponse): void => send(response, withHeaders(wireResponse, headers));

  const perKey = keyFault(call.key);
  if (perKey) return reply(wire.error(perKey, { key: call.key }));
  // One user's calls that never answer (the service's own timeout ends them): a per-key `hang`.
  if (call.key.startsWith(hangingKeyPrefix)) return undefined;

  const inputChars = call.system.length + call.userText.length;
  const inputTokens = approximateTokens(call.system + call.userText);
  if (inputChars > options.maxInputChars) return reply(wire.error('contextTooLong', { inputTokens }));
  if (call.model.startsWith('emu-unknown')) return reply(wire.error('notFound', { message: call.model }));
  const fault = board.consume(wire.provider);

  const success = (): WireResponse => {
    const text = answerText(call, fault);
    return wire.success({
      model: call.model,
      text,
      truncated: fault?.fault === 'truncated',
      inputTokens,
      outputTokens: outputTokensOf(call, fault, text),
      sequence,
    });
  };

  const streamWire = call.stream ? wire.stream : undefined;
  // A replayed whole answer (a Message, a chat.completion) on a streamed call streams as the provider would.
  const replayed =
    streamWire !== undefined && fault?.fault === 'respond' && (fault.status ?? 500) < 300
      ? streamWire.replay(fault.body)
      : undefined;
  if (streamWire !== undefined && replayed !== undefined) {
    const detail = {
      model: replayed.model ?? call.model,
      truncated: replayed.truncated,
      inputTokens: replayed.inputTokens ?? inputTokens,
      outputTokens: replayed.outputTokens ?? approximateTokens(replayed.text),
      sequence,
      includeUsage: call.includeUsage,
      // A replayed answer streams as given, a token's 4 characters a piece, whatever the request's limit:
      // it stands for a provider that does not keep to it (the adapters' bounds are tested with it).
    };
    const replayHeaders = { ...headers, ...fault?.headers };
    delete (replayHeaders as Record<string, string>)['content-type'];
    delete (replayHeaders as Record<string, string>)['content-length'];
    serveStream(response, streamWire, replayHeaders, replayed.text, detail, undefined, options, () => undefined).then(
      (outcome) => outcome === 'cut' && board.countStreamCut(wire.provider),
      () => response.destroy(),
    );
    return undefined;
  }
  if (streamWire !== undefined && !isRefusal(fault)) {
    const text = answerText(call, fault);
    const detail = {
      model: call.model,
      truncated: fault?.fault === 'truncated',
      inputTokens,
      outputTokens: outputTokensOf(call, fault, text),
      sequence,
      includeUsage: call.includeUsage,
      maxTokens: call.maxTokens,
    };
    const start = (): void => {
      serveStream(response, streamWire, headers, text, detail, fault, options, () =>
        fault?.body !== undefined ? fault.body : streamWire.errorBody(fault?.error ?? 'http500'),
      ).then(
        (outcome) => outcome === 'cut' && board.countStreamCut(wire.provider),
        () => response.destroy(),
      );
    };
    if (fault?.fault !== 'slow') return start();
    return delay(response, options, fault.ms ?? options.slowMs, start);
  }

  switch (fault?.fault) {
    case 'http500':
    case 'http503':
    case 'overloaded':
      return reply(wire.error(fault.fault, {}));
    case 'respond':
      return reply({ status: fault.status ?? 500, body: fault.body ?? '', headers: fault.headers ?? {} });
    case 'garbage':
      return reply({ status: 200, body: garbageBody });
    case 'reset':
      response.socket?.destroy();
      return undefined;
    case 'cut':
      return cutMidBody(response, success().body, headers);
    case 'stall':
      return stallAfterHeaders(response, headers);
    case 'hang':
      return undefined;
    case 'slow':
      return delay(response, options, fault.ms ?? options.slowMs, () => reply(success()));
    default:
      // The stream faults (streamError, malformedChunk, slowFirstToken) act on streamed calls only.
      return reply(success());
  }
}

/** Faults that answer without a success body (an error status, a page, a socket dropped or left hanging). */
function isRefusal(fault: FaultSpec | undefined): boolean {
  switch (fault?.fault) {
    case 'http500':
    case 'http503':
    case 'overloaded':
    case 'respond':
    case 'garbage':
    case 'reset':
    case 'hang':
      return true;
    default:
      return false;
  }
}

/** Runs `answer` after `ms`, unless the client went away first; the timer is cleared on close. */
function delay(response: ServerResponse, options: GenerationOptions, ms: number, answer: () => void): void {
  const timer = setTimeout(() => {
    options.pending.delete(timer);
    if (!response.destroyed) answer();
  }, ms);
  options.pending.add(timer);
  response.on('close', () => {
    clearTimeout(timer);
    options.pending.delete(timer);
  });
}
