/**
 * Claude through `@anthropic-ai/sdk` (Messages API, streamed). The SDK's retries are off: every attempt is
 * seen once by the provider actor, which also owns the deadlines through the signal it passes.
 */
import type Anthropic from '@anthropic-ai/sdk';
import type { APIError } from '@anthropic-ai/sdk';
import type { ProviderFailure } from '../errors/index.js';
import { anthropicSdkIfLoaded, loadAnthropicSdk } from './claude-sdk.js';
import {
  classifyTransportError,
  classifyUnknown,
  classOfStatus,
  failure,
  retryAfterMsOf,
} from './classify-common.js';
import { withJsonInstruction } from './json-instruction.js';
import { sdkTimeoutMs } from './sdk-options.js';
import type { ProviderAdapter, ProviderAnswer, UpstreamStreamObserver } from './types.js';
import { answerBoundsOf, paceFor, readEvents, StreamedText, type AnswerBounds } from './streamed-text.js';
import { IncompleteStreamError, upstreamFailure } from './upstream-errors.js';
import { answerCeiling, eventStream, upstreamFetch } from './upstream-fetch.js';

export interface ClaudeAdapterOptions {
  readonly baseUrl: string;
  readonly model: string;
}

/** Spend-limit codes Anthropic sends in `error.details.error_code` on a 429 (quota, not rate). */
const spendLimitCodes = new Set(['enforced_spend_limit_reached', 'contract_spend_limit_reached']);

function anthropicBody(error: APIError): { type?: string; message?: string; errorCode?: string } {
  const body = error.error as
    { error?: { type?: unknown; message?: unknown; details?: { error_code?: unknown } } } | undefined;
  const inner = body?.error;
  return {
    ...(typeof inner?.type === 'string' ? { type: inner.type } : {}),
    ...(typeof inner?.message === 'string' ? { message: inner.message } : {}),
    ...(typeof inner?.details?.error_code === 'string' ? { errorCode: inner.details.error_code } : {}),
  };
}

/**
 * Anthropic's documented error types with the status each comes with over HTTP
 * (https://docs.anthropic.com/en/api/errors). An error event inside a stream names only its type: it is
 * classed as that type's HTTP error would be.
 */
const statusOfErrorType: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/** The class of an Anthropic error with its status (the HTTP one, or the one its in-band type implies). */
function classOfAnthropicError(
  status: number,
  body: { type?: string; errorCode?: string; message: string },
  error: unknown,
  extra: { httpStatus?: number; retryAfterMs?: number | undefined },
): ProviderFailure {
  const { type, message, errorCode } = body;
  if (type === 'overloaded_error' || status === 529) return failure('overloaded', error, message, extra);
  if (type === 'billing_error' || status === 402) return failure('quota_exhausted', error, message, extra);
  if (status === 429) {
    return failure(
      errorCode && spendLimitCodes.has(errorCode) ? 'quota_exhausted' : 'rate_limited',
      error,
      message,
      extra,
    );
  }
  if (status === 400) {
    if (/credit balance is too low|reached your specified API usage limits/i.test(message)) {
      return failure('quota_exhausted', error, message, extra);
    }
    if (/prompt is too long/i.test(message)) return failure('context_too_long', error, message, extra);
    return failure('bad_request', error, message, extra);
  }
  if (type === 'request_too_large') return failure('context_too_long', error, message, extra);
  if (type === 'api_error' && status < 500) return failure('server_error', error, message, extra);
  return failure(classOfStatus(status), error, message, extra);
}

/**
 * Pure: an error the Claude adapter rejected with → its docs/errors.md class.
 * The credit-balance and usage-limit 400s carry nothing but their message, so those two are matched on text
 * (https://docs.anthropic.com/en/api/errors). An `event: error` inside a stream (an `APIError` without a
 * status) is classed by its type exactly as the same error over HTTP; one without a known type is server_error.
 */
export function classifyClaudeError(error: unknown): ProviderFailure {
  // The SDK is imported on first use (claude-sdk.ts): before that, no error can be one of its classes.
  const sdk = anthropicSdkIfLoaded();
  if (sdk === undefined) return classifyTransportError(error) ?? classifyUnknown(error);
  if (error instanceof sdk.APIUserAbortError) return failure('aborted', error, error.message);
  if (error instanceof sdk.APIConnectionTimeoutError) return failure('timeout', error, error.message);
  if (error instanceof sdk.APIConnectionError)
    return classifyTransportError(error.cause) ?? failure('connection', error, error.message);
  if (error instanceof sdk.APIError) {
    const { type, message = error.message, errorCode } = anthropicBody(error);
    const retryAfterMs = retryAfterMsOf(error.headers);
    if (typeof error.status === 'number') {
      return classOfAnthropicError(
        error.status,
        {
          ...(type === undefined ? {} : { type }),
          ...(errorCode === undefined ? {} : { errorCode }),
          message,
        },
        error,
        { httpStatus: error.status, retryAfterMs },
      );
    }
    const inBandStatus = type === undefined ? undefined : statusOfErrorType[type];
    if (inBandStatus !== undefined) {
      return classOfAnthropicError(
        inBandStatus,
        { type, ...(errorCode === undefined ? {} : { errorCode }), message },
        error,
        { retryAfterMs },
      );
    }
  }
  return classifyTransportError(error) ?? classifyUnknown(error);
}

export function createClaudeAdapter(options: ClaudeAdapterOptions): ProviderAdapter {
  const { baseUrl, model } = options;
  let client: Anthropic | undefined;
  return {
    id: 'claude',
    model,
    async generate(request, apiKey, signal, observer) {
      // Loaded already when the call came through the study layer (loadProviderSdks); else imported here.
      const sdk = anthropicSdkIfLoaded() ?? (await loadAnthropicSdk());
      client ??= new sdk.Anthropic({
        // No user's key in the shared client: each call sends its own (below). Every credential
        // option explicit, so the SDK never reads ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN.
        apiKey: 'sent-per-request',
        authToken: null,
        baseURL: baseUrl,
        maxRetries: 0,
        timeout: sdkTimeoutMs,
        // Every failure reaches the adapter as an error it classifies and scrubs; the SDK's own log lines
        // (a malformed chunk verbatim, and with ANTHROPIC_LOG=debug whole requests) would go around that.
        logLevel: 'off',
        // undici's `request` on one pool instead of the global `fetch` (upstream-fetch.ts).
        fetch: upstreamFetch,
      });
      try {
        const stream = await client.messages.create(
          {
            model,
            max_tokens: request.maxOutputTokens,
            system: withJsonInstruction(request),
            messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
            stream: true,
          },
          // SDK 1.x sends the key as a bearer token; per-request headers override the client's. The
          // `accept` tells the transport to hand the body on as it arrives (upstream-fetch.ts).
          // `fetchOptions` carries the call's answer ceiling to the transport, which bounds the bytes read.
          {
            signal,
            headers: { Authorization: `Bearer ${apiKey.reveal()}`, accept: eventStream },
            fetchOptions: answerCeiling(request.maxAnswerChars),
          },
        );
        return await readMessageStream(stream, model, answerBoundsOf(request), signal, observer);
      } catch (error) {
        throw upstreamFailure(error, signal, apiKey);
      }
    },
    classify: classifyClaudeError,
  };
}

/**
 * Reads a Messages stream (https://docs.anthropic.com/en/api/messages-streaming) to its `message_stop`:
 * `text_delta`s are the answer, `message_start` and `message_delta` carry the model, the usage and the stop
 * reason; other events (pings, other block types, events added later) are passed over. The SDK turns an
 * `event: error` into an `APIError` and a chunk that is not JSON into a `SyntaxError`.
 */
async function readMessageStream(
  stream: AsyncIterable<unknown>,
  requestedModel: string,
  bounds: AnswerBounds,
  signal: AbortSignal,
  observer: UpstreamStreamObserver | undefined,
): Promise<ProviderAnswer> {
  // Past the ceiling `add` throws out of the loop: the SDK's iteration ends and it aborts its request.
  const answer = new StreamedText(observer, bounds);
  let stopReason: unknown;
  let stopped = false;
  await readEvents<StreamEventFields>(stream, signal, paceFor(bounds, observer?.readWithinMs), (record) => {
    switch (record.type) {
      case 'message_start':
        answer.noteModel(record.message?.model);
        answer.noteUsage(record.message?.usage?.input_tokens, record.message?.usage?.output_tokens);
        break;
      case 'content_block_delta':
        if (record.delta?.type === 'text_delta' && typeof record.delta.text === 'string')
          answer.add(record.delta.text);
        break;
      case 'message_delta':
        // Usage here is cumulative: the last one is the call's.
        if (record.delta?.stop_reason !== undefined) stopReason = record.delta.stop_reason;
        answer.noteUsage(record.usage?.input_tokens, record.usage?.output_tokens);
        break;
      case 'message_stop':
        stopped = true;
        break;
      default:
        break;
    }
  });
  if (!stopped) throw new IncompleteStreamError('The Anthropic stream ended before message_stop');
  return answer.answer(requestedModel, stopReason === 'max_tokens');
}

/** The fields of a stream event the adapter reads, all unchecked until read. */
interface StreamEventFields {
  type?: unknown;
  message?: { model?: unknown; usage?: { input_tokens?: unknown; output_tokens?: unknown } };
  delta?: { type?: unknown; text?: unknown; stop_reason?: unknown };
  usage?: { input_tokens?: unknown; output_tokens?: unknown };
}
