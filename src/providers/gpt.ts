/**
 * GPT through `openai` v6 (Chat Completions, streamed with usage) with `response_format: json_schema`.
 * The SDK's retries are off; the provider actor owns the deadlines through the signal it passes.
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ProviderFailure } from '../errors/index.js';
import {
  classifyTransportError,
  classifyUnknown,
  classOfStatus,
  failure,
  retryAfterMsOf,
} from './classify-common.js';
import { sdkTimeoutMs } from './sdk-options.js';
import { answerBoundsOf, paceFor, readEvents, StreamedText, type AnswerBounds } from './streamed-text.js';
import { answerCeiling, eventStream, upstreamFetch } from './upstream-fetch.js';
import type { ProviderAdapter, ProviderAnswer, UpstreamStreamObserver } from './types.js';
import { IncompleteStreamError, upstreamFailure } from './upstream-errors.js';

export interface GptAdapterOptions {
  readonly baseUrl: string;
  readonly model: string;
}

/** 429 codes that mean the account is out of money, not going too fast (https://platform.openai.com/docs/guides/error-codes). */
function isQuotaCode(code: string | undefined, type: string | undefined): boolean {
  if (code === 'insufficient_quota' || code === 'credit_balance_exhausted' || type === 'insufficient_quota')
    return true;
  return code !== undefined && /_(spend|usage)_limit_exceeded$/.test(code);
}

function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/** The class of an OpenAI error with its status (the HTTP one, or the one an in-band error implies). */
function classOfOpenaiError(
  status: number,
  body: { code: string | undefined; type: string | undefined; message: string },
  error: unknown,
  extra: { httpStatus?: number; retryAfterMs?: number | undefined },
): ProviderFailure {
  const { code, type, message } = body;
  if (status === 429)
    return failure(isQuotaCode(code, type) ? 'quota_exhausted' : 'rate_limited', error, message, extra);
  if (code === 'context_length_exceeded' || code === 'request_too_large')
    return failure('context_too_long', error, message, extra);
  if (code === 'server_is_overloaded' || (status === 503 && /overloaded/i.test(message))) {
    return failure('overloaded', error, message, extra);
  }
  if (code === 'model_not_found') return failure('not_found', error, message, extra);
  return failure(classOfStatus(status), error, message, extra);
}

/**
 * The status an in-band error chunk (`{"error":{message,type,param,code}}` inside a 200 stream) would have
 * come with over HTTP (https://platform.openai.com/docs/guides/error-codes), as far as its class depends on
 * it: the codes `classOfOpenaiError` reads first (context length, request size, overload, unknown model)
 * are classed by the code whatever the status. One that names nothing known is OpenAI's own failure: 500.
 */
function statusOfInBandError(code: string | undefined, type: string | undefined): number {
  if (isQuotaCode(code, type) || code === 'rate_limit_exceeded' || type === 'requests' || type === 'tokens')
    return 429;
  if (code === 'invalid_api_key' || type === 'authentication_error') return 401;
  if (type === 'request_forbidden' || code === 'unsupported_country_region_territory') return 403;
  if (type === 'invalid_request_error') return 400;
  return 500;
}

/**
 * Pure: an error the GPT adapter rejected with → its docs/errors.md class (OpenAI's classes keep `.name`
 * "Error": use instanceof). An in-band error chunk (an `APIError` without a status) is classed by its code
 * and type exactly as the same error over HTTP.
 */
export function classifyGptError(error: unknown): ProviderFailure {
  if (error instanceof APIUserAbortError) return failure('aborted', error, error.message);
  if (error instanceof APIConnectionTimeoutError) return failure('timeout', error, error.message);
  if (error instanceof APIConnectionError)
    return classifyTransportError(error.cause) ?? failure('connection', error, error.message);
  if (error instanceof APIError) {
    const body = {
      code: stringOrUndefined(error.code),
      type: stringOrUndefined(error.type),
      message: error.message,
    };
    const retryAfterMs = retryAfterMsOf(error.headers);
    if (typeof error.status === 'number')
      return classOfOpenaiError(error.status, body, error, { httpStatus: error.status, retryAfterMs });
    // An SDK error with nothing from the wire in it (no error object) is not an in-band error.
    if (typeof error.error === 'object' && error.error !== null)
      return classOfOpenaiError(statusOfInBandError(body.code, body.type), body, error, { retryAfterMs });
  }
  return classifyTransportError(error) ?? classifyUnknown(error);
}

/**
 * One SDK client per adapter, with no user's key in it: each call sends its own key in its per-request
 * `headers` (which override the client's), and its own `signal`. Only the SDK's documented options.
 * (A client per call costs CPU on every request; a client per key would keep users' keys in memory past
 * their request.)
 * Every credential option is explicit: the SDK never reads OPENAI_API_KEY / OPENAI_ADMIN_KEY / OPENAI_ORG_ID.
 */
function createClient(baseUrl: string): OpenAI {
  return new OpenAI({
    // A placeholder the SDK requires; every request's headers carry the call's own key instead.
    apiKey: 'sent-per-request',
    adminAPIKey: null,
    organization: null,
    project: null,
    webhookSecret: null,
    baseURL: baseUrl,
    maxRetries: 0,
    timeout: sdkTimeoutMs,
    // Every failure reaches the adapter as an error it classifies and scrubs; the SDK's own log lines
    // (a malformed chunk verbatim, and with OPENAI_LOG=debug whole requests) would go around that.
    logLevel: 'off',
    // undici's `request` on one pool instead of the global `fetch` (upstream-fetch.ts: half the CPU per call).
    fetch: upstreamFetch,
  });
}

export function createGptAdapter(options: GptAdapterOptions): ProviderAdapter {
  const { baseUrl, model } = options;
  let client: OpenAI | undefined;
  return {
    id: 'gpt',
    model,
    async generate(request, apiKey, signal, observer) {
      client ??= createClient(baseUrl);
      try {
        const stream = await client.chat.completions.create(
          {
            model,
            max_completion_tokens: request.maxOutputTokens,
            messages: [
              { role: 'system', content: request.system },
              ...request.messages.map((m) => ({ role: m.role, content: m.content })),
            ],
            response_format: {
              type: 'json_schema',
              json_schema: { name: request.task, schema: { ...request.jsonSchema }, strict: false },
            },
            stream: true,
            stream_options: { include_usage: true },
          },
          // The `accept` tells the transport to hand the body on as it arrives (upstream-fetch.ts).
          // `fetchOptions` carries the call's answer ceiling to the transport, which bounds the bytes read.
          {
            signal,
            headers: { Authorization: `Bearer ${apiKey.reveal()}`, accept: eventStream },
            fetchOptions: answerCeiling(request.maxAnswerChars),
          },
        );
        return await readChunkStream(stream, model, answerBoundsOf(request), signal, observer);
      } catch (error) {
        throw upstreamFailure(error, signal, apiKey);
      }
    },
    classify: classifyGptError,
  };
}

/**
 * Reads a Chat Completions stream (https://platform.openai.com/docs/api-reference/chat-streaming) to the
 * choice's `finish_reason`: `delta.content` pieces are the answer; the final chunk `stream_options.include_usage`
 * asks for carries the usage (empty `choices`). The SDK turns an in-band `{"error":…}` chunk into an
 * `APIError` and a chunk that is not JSON into a `SyntaxError`; it reads `data: [DONE]` itself.
 */
async function readChunkStream(
  stream: AsyncIterable<unknown>,
  requestedModel: string,
  bounds: AnswerBounds,
  signal: AbortSignal,
  observer: UpstreamStreamObserver | undefined,
): Promise<ProviderAnswer> {
  // Past the ceiling `add` throws out of the loop: the SDK's iteration ends and it aborts its request.
  const answer = new StreamedText(observer, bounds);
  let finishReason: unknown;
  await readEvents<ChunkFields>(stream, signal, paceFor(bounds, observer?.readWithinMs), (record) => {
    answer.noteModel(record.model);
    const choice = Array.isArray(record.choices) ? record.choices[0] : undefined;
    if (typeof choice?.delta?.content === 'string') answer.add(choice.delta.content);
    if (typeof choice?.finish_reason === 'string') finishReason = choice.finish_reason;
    answer.noteUsage(record.usage?.prompt_tokens, record.usage?.completion_tokens);
  });
  if (finishReason === undefined)
    throw new IncompleteStreamError('The OpenAI stream ended before a finish_reason');
  return answer.answer(requestedModel, finishReason === 'length');
}

/** The fields of a chunk the adapter reads, all unchecked until read. */
interface ChunkFields {
  model?: unknown;
  choices?: { delta?: { content?: unknown }; finish_reason?: unknown }[];
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
}
