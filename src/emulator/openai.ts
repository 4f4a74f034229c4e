/**
 * OpenAI Chat Completions, as the emulator speaks it: `POST /v1/chat/completions` with
 * `Authorization: Bearer`; bodies as https://platform.openai.com/docs/guides/error-codes and docs/errors.md.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { textOfContent } from './anthropic.js';
import { readContinuation } from './continuation.js';
import type { FaultBoard } from './faults.js';
import { serveGeneration, type GenerationOptions, type ProviderWire, type WireErrorKind } from './generation.js';
import { bearerToken, parseJsonObject, readBody, send, type WireResponse } from './http-io.js';
import { countOf, sseEvent, tokenLimitOf, type ReplayedAnswer, type StreamDetail } from './streaming.js';

function openaiError(status: number, message: string, type: string, code: string | null, param: string | null = null): WireResponse {
  return { status, body: { error: { message, type, param, code } } };
}

/** OpenAI echoes a masked key fragment in its 401 message: the adapters must scrub it. */
function maskedKey(key: string | undefined): string {
  if (!key) return '';
  return `${key.slice(0, 8)}${'*'.repeat(Math.max(4, key.length - 12))}${key.slice(-4)}`;
}

const errors: Readonly<Record<WireErrorKind, (detail: { key?: string; message?: string; inputTokens?: number }) => WireResponse>> = {
  auth: ({ key }) =>
    openaiError(
      401,
      `Incorrect API key provided: ${maskedKey(key)}. You can find your API key at https://platform.openai.com/account/api-keys.`,
      'invalid_request_error',
      'invalid_api_key',
    ),
  permission: () => openaiError(403, 'Country, region, or territory not supported', 'request_forbidden', 'unsupported_country_region_territory'),
  quota: () =>
    openaiError(
      429,
      'You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.',
      'insufficient_quota',
      'insufficient_quota',
    ),
  rateLimit: () => ({
    ...openaiError(
      429,
      'Rate limit reached for requests in organization org-emulator on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 7s.',
      'requests',
      'rate_limit_exceeded',
    ),
    headers: { 'retry-after': '7', 'x-ratelimit-limit-requests': '3', 'x-ratelimit-remaining-requests': '0' },
  }),
  http500: () => openaiError(500, 'The server had an error while processing your request. Sorry about that!', 'server_error', null),
  http503: () => openaiError(503, 'Service Unavailable', 'server_error', null),
  overloaded: () => openaiError(503, 'The server is overloaded or not ready yet.', 'server_error', 'server_is_overloaded'),
  badRequest: ({ message }) => openaiError(400, message ?? 'Invalid request', 'invalid_request_error', null),
  notFound: ({ message }) =>
    openaiError(404, `The model \`${message ?? 'unknown'}\` does not exist or you do not have access to it.`, 'invalid_request_error', 'model_not_found'),
  contextTooLong: ({ inputTokens }) =>
    openaiError(
      400,
      `This model's maximum context length is 128000 tokens. However, your messages resulted in ${inputTokens ?? 0} tokens. Please reduce the length of the messages.`,
      'invalid_request_error',
      'context_length_exceeded',
      'messages',
    ),
};

function completionId(sequence: number): string {
  return `chatcmpl-emu${sequence.toString(16).padStart(20, '0')}`;
}

/** One `chat.completion.chunk` (`usage: null` on every chunk but the last when usage was asked for). */
function chunk(detail: StreamDetail, choices: unknown[], usage?: unknown): string {
  return sseEvent(undefined, {
    id: completionId(detail.sequence),
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model: detail.model,
    system_fingerprint: null,
    choices,
    ...(detail.includeUsage ? { usage: usage ?? null } : {}),
  });
}

/**
 * The Chat Completions stream (https://platform.openai.com/docs/api-reference/chat-streaming): a role
 * chunk, one `delta.content` chunk per token, a chunk with the `finish_reason`, the usage chunk (empty
 * `choices`) when `stream_options.include_usage` asked for it, `data: [DONE]`; an error is a data-only
 * `{"error":{…}}` chunk.
 */
const openaiStream = {
  replay: (body: unknown): ReplayedAnswer | undefined => {
    const completion = body as {
      object?: unknown;
      model?: unknown;
      choices?: { message?: { content?: unknown }; finish_reason?: unknown }[];
      usage?: { prompt_tokens?: unknown; completion_tokens?: unknown };
    } | null;
    if (typeof completion !== 'object' || completion === null || completion.object !== 'chat.completion') return undefined;
    const choice = Array.isArray(completion.choices) ? completion.choices[0] : undefined;
    const inputTokens = countOf(completion.usage?.prompt_tokens);
    const outputTokens = countOf(completion.usage?.completion_tokens);
    return {
      text: typeof choice?.message?.content === 'string' ? choice.message.content : '',
      ...(typeof completion.model === 'string' ? { model: completion.model } : {}),
      truncated: choice?.finish_reason === 'length',
      ...(inputTokens === undefined ? {} : { inputTokens }),
      ...(outputTokens === undefined ? {} : { outputTokens }),
    };
  },
  open: (detail: StreamDetail): string =>
    chunk(detail, [{ index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }]),
  delta: (text: string, detail: StreamDetail): string =>
    chunk(detail, [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: null }]),
  close: (detail: StreamDetail): string =>
    chunk(detail, [{ index: 0, delta: {}, logprobs: null, finish_reason: detail.truncated ? 'length' : 'stop' }]) +
    (detail.includeUsage
      ? chunk(detail, [], {
          prompt_tokens: detail.inputTokens,
          completion_tokens: detail.outputTokens,
          total_tokens: detail.inputTokens + detail.outputTokens,
        })
      : '') +
    sseEvent(undefined, '[DONE]'),
  error: (body: unknown): string => sseEvent(undefined, body),
  malformed: (detail: StreamDetail): string =>
    `data: {"id":"${completionId(detail.sequence)}","object":"chat.completion.chu\n\n`,
  /** The in-band error chunk's body: the HTTP error body itself (`{"error":{message,type,param,code}}`). */
  errorBody: (kind: WireErrorKind): unknown => errors[kind]({}).body,
};

export const openaiWire: ProviderWire = {
  stream: openaiStream,
  provider: 'gpt',
  error: (kind, detail) => errors[kind](detail),
  commonHeaders: (sequence) => ({ 'x-request-id': `req_emu${sequence.toString(16).padStart(24, '0')}`, 'openai-processing-ms': '1' }),
  success: ({ model, text, truncated, inputTokens, outputTokens, sequence }) => ({
    status: 200,
    body: {
      id: completionId(sequence),
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: text, refusal: null },
          finish_reason: truncated ? 'length' : 'stop',
          logprobs: null,
        },
      ],
      usage: { prompt_tokens: inputTokens, completion_tokens: outputTokens, total_tokens: inputTokens + outputTokens },
    },
  }),
};

export async function handleOpenaiChatCompletions(
  request: IncomingMessage,
  response: ServerResponse,
  board: FaultBoard,
  options: GenerationOptions,
): Promise<void> {
  const raw = await readBody(request);
  const key = bearerToken(request);
  board.countCall('gpt', key);
  if (!key) {
    return send(
      response,
      openaiError(
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        'invalid_request_error',
        null,
      ),
    );
  }
  const body = parseJsonObject(raw);
  if (!body) return send(response, openaiError(400, 'We could not parse the JSON body of your request.', 'invalid_request_error', null));
  const missing = ['model', 'messages'].find((field) => body[field] === undefined);
  if (missing) return send(response, openaiError(400, `Missing required parameter: '${missing}'.`, 'invalid_request_error', 'missing_required_parameter', missing));
  const messages = Array.isArray(body['messages']) ? (body['messages'] as { role?: unknown; content?: unknown }[]) : [];
  const isSystem = (message: { role?: unknown }): boolean => message.role === 'system' || message.role === 'developer';
  const system = messages.filter(isSystem).map((message) => textOfContent(message.content)).join('\n');
  const wireMessages = messages
    .filter((message) => !isSystem(message))
    .map((message) => ({ role: typeof message.role === 'string' ? message.role : 'user', text: textOfContent(message.content) }));
  const userText = wireMessages.map((message) => message.text).join('\n');
  const continuation = readContinuation(wireMessages);
  const streamOptions = body['stream_options'];
  serveGeneration(openaiWire, board, options, response, {
    key,
    model: String(body['model']),
    system,
    userText,
    ...(continuation === undefined ? {} : { continuation }),
    stream: body['stream'] === true,
    maxTokens: tokenLimitOf(body['max_completion_tokens'] ?? body['max_tokens']),
    includeUsage:
      typeof streamOptions === 'object' &&
      streamOptions !== null &&
      (streamOptions as { include_usage?: unknown }).include_usage === true,
  });
  return undefined;
}
