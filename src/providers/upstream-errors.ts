/**
 * Errors the adapters raise themselves, for failures the SDKs pass through untyped or not at all.
 * The classifiers read these with `instanceof`, like the SDKs' own classes.
 */
import type { ApiKey } from '../machines/types.js';
import { rememberKeyOf } from './scrub.js';

/** A 2xx whose body is not a valid API response (HTML from a proxy, broken JSON, a missing envelope). */
export class UnexpectedResponseError extends Error {
  override readonly name = 'UnexpectedResponseError';
  readonly httpStatus: number;

  constructor(message: string, httpStatus = 200, options?: { cause?: unknown }) {
    super(message, options);
    this.httpStatus = httpStatus;
  }
}

/**
 * The call's signal fired. `timedOut` is true when its reason is a `TimeoutError`
 * (an `AbortSignal.timeout` deadline); anything else is the caller going away.
 */
export class UpstreamAbortError extends Error {
  override readonly name = 'UpstreamAbortError';
  readonly timedOut: boolean;

  constructor(reason: unknown, options?: { cause?: unknown }) {
    const timedOut = isTimeoutReason(reason);
    super(timedOut ? 'The call reached its deadline' : 'The call was aborted by the caller', options);
    this.timedOut = timedOut;
  }
}

function isTimeoutReason(reason: unknown): boolean {
  return (
    typeof reason === 'object' && reason !== null && (reason as { name?: unknown }).name === 'TimeoutError'
  );
}

/**
 * What a failed upstream call throws: when the call's signal fired, the SDK or fetch error is replaced
 * by one that says which kind of abort it was (the SDKs report both as "user abort"); the call's key is
 * remembered with it for the scrubber (scrub.ts).
 */
export function upstreamFailure(error: unknown, signal: AbortSignal, apiKey: ApiKey): unknown {
  const failure = signal.aborted && !(error instanceof UpstreamAbortError) ? new UpstreamAbortError(signal.reason, { cause: error }) : error;
  rememberKeyOf(failure, apiKey);
  return failure;
}

/**
 * An answer's stream ended before the provider's own end of stream (Anthropic `message_stop`, OpenAI's
 * final `finish_reason`): the connection was cut, class `connection`, like the same cut inside a body.
 */
export class IncompleteStreamError extends Error {
  override readonly name = 'IncompleteStreamError';
}

/**
 * The answer passed the call's own ceiling (`GenerationRequest.maxAnswerChars`, the bytes the transport
 * reads for it, or more text pieces than its `maxOutputTokens` allow): reading stopped there and the connection was closed. Class `invalid_output` (never
 * counted by the breaker): an answer longer than its task can need is not the material asked for, and
 * says nothing of the provider's health. `received` is how much had arrived when reading stopped.
 */
export class AnswerTooLongError extends Error {
  override readonly name = 'AnswerTooLongError';
  readonly limit: number;
  readonly unit: 'characters' | 'bytes' | 'text pieces';
  readonly received: number;

  constructor(limit: number, unit: 'characters' | 'bytes' | 'text pieces', received: number) {
    super(
      `the answer passed ${limit} ${unit}, more than this task can need, and was not read further; answer with the JSON asked for only`,
    );
    this.limit = limit;
    this.unit = unit;
    this.received = received;
  }
}
