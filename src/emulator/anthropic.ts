/**
 * Anthropic Messages, as the emulator speaks it: `POST /v1/messages` with `x-api-key` (or
 * `Authorization: Bearer`, as SDK 1.x sends it) and `anthropic-version`; bodies as https://docs.anthropic.com/en/api/errors and docs/errors.md show them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readContinuation } from './continuation.js';
import type { FaultBoard } from './faults.js';
import { serveGeneration, type GenerationOptions, type ProviderWire, type WireErrorKind } from './generation.js';
import { countOf, sseEvent, tokenLimitOf, type ReplayedAnswer, type StreamDetail } from './streaming.js';
import { bearerToken, headerValue, parseJsonObject, readBody, send, type WireResponse } from './http-io.js';

function requestId(sequence: number): string {
  return `req_emu${sequence.toString(16).padStart(20, '0')}`;
}

function anthropicError(status: number, type: string, message: string, sequence = 0): WireResponse {
  return { status, body: { type: 'error', error: { type, message }, request_id: requestId(sequence) } };
}

const errors: Readonly<Record<WireErrorKind, (message: string | undefined, inputTokens: number | undefined) => WireResponse>> = {
  auth: () => anthropicError(401, 'authentication_error', 'invalid x-api-key'),
  permission: () => anthropicError(403, 'permission_error', 'Your API key does not have permission to use the specified resource.'),
  quota: () =>
    anthropicError(
      400,
      'invalid_request_error',
      'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.',
    ),
  rateLimit: () => ({
    ...anthropicError(
      429,
      'rate_limit_error',
      'This request would exceed the rate limit for your organization of 50 requests per minute. Please try again later.',
    ),
    headers: { 'retry-after': '7', 'anthropic-ratelimit-requests-limit': '50', 'anthropic-ratelimit-requests-remaining': '0' },
  }),
  http500: () => anthropicError(500, 'api_error', 'Internal server error'),
  http503: () => anthropicError(503, 'api_error', 'Service temporarily unavailable'),
  overloaded: () => anthropicError(529, 'overloaded_error', 'Overloaded'),
  badRequest: (message) => anthropicError(400, 'invalid_request_error', message ?? 'Invalid request'),
  notFound: (message) => anthropicError(404, 'not_found_error', `model: ${message ?? 'unknown'}`),
  contextTooLong: (_message, inputTokens) =>
    anthropicError(400, 'invalid_request_error', `prompt is too long: ${inputTokens ?? 0} tokens > 200000 maximum`),
};

function messageId(sequence: number): string {
  return `msg_emu${sequence.toString(16).padStart(20, '0')}`;
}

/**
 * The Messages stream (https://docs.anthropic.com/en/api/messages-streaming): `message_start`,
 * `content_block_start`, a `ping`, one `content_block_delta` `text_delta` per token, `content_block_stop`,
 * `message_delta` (stop reason, cumulative usage), `message_stop`; an error is `event: error`.
 */
const anthropicStream = {
  replay: (body: unknown): ReplayedAnswer | undefined => {
    const message = body as {
      type?: unknown;
      content?: unknown;
      model?: unknown;
      stop_reason?: unknown;
      usage?: { input_tokens?: unknown; output_tokens?: unknown };
    } | null;
    if (typeof message !== 'object' || message === null || message.type !== 'message' || !Array.isArray(message.content))
      return undefined;
    const inputTokens = countOf(message.usage?.input_tokens);
    const outputTokens = countOf(message.usage?.output_tokens);
    return {
      text: textOfContent(message.content),
      ...(typeof message.model === 'string' ? { model: message.model } : {}),
      truncated: message.stop_reason === 'max_tokens',
      ...(inputTokens === undefined ? {} : { inputTokens }),
      ...(outputTokens === undefined ? {} : { outputTokens }),
    };
  },
  open: (detail: StreamDetail): string =>
    sseEvent('message_start', {
      type: 'message_start',
      message: {
        id: messageId(detail.sequence),
        type: 'message',
        role: 'assistant',
        model: detail.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: detail.inputTokens, output_tokens: 1 },
      },
    }) +
    sseEvent('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }) +
    sseEvent('ping', { type: 'ping' }),
  delta: (text: string): string =>
    sseEvent('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }),
  close: (detail: StreamDetail): string =>
    sseEvent('content_block_stop', { type: 'content_block_stop', index: 0 }) +
    sseEvent('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: detail.truncated ? 'max_tokens' : 'end_turn', stop_sequence: null },
      usage: { output_tokens: detail.outputTokens },
    }) +
    sseEvent('message_stop', { type: 'message_stop' }),
  error: (body: unknown): string => sseEvent('error', body),
  malformed: (): string => 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_del\n\n',
  /** The in-band error event's body: the HTTP error body's `error`, under `type: "error"`. */
  errorBody: (kind: WireErrorKind): unknown => {
    const body = errors[kind](undefined, undefined).body as { error: unknown };
    return { type: 'error', error: body.error };
  },
};

export const anthropicWire: ProviderWire = {
  stream: anthropicStream,
  provider: 'claude',
  error: (kind, detail) => errors[kind](detail.message, detail.inputTokens),
  commonHeaders: (sequence) => ({ 'request-id': requestId(sequence) }),
  success: ({ model, text, truncated, inputTokens, outputTokens, sequence }) => ({
    status: 200,
    body: {
      id: messageId(sequence),
      type: 'message',
      role: 'assistant',
      model,
      content: [{ type: 'text', text }],
      stop_reason: truncated ? 'max_tokens' : 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: inputTokens, output_tokens: outputTokens },
    },
  }),
};

/** Text of a `system` or message `content` that is a string or an array of text blocks. */
export function textOfContent(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((block: unknown) =>
        typeof block === 'object' && block !== null && typeof (block as { text?: unknown }).text === 'string'
          ? (block as { text: string }).text
          : '',
      )
      .join('\n');
  }
  return '';
}

export async function handleAnthropicMessages(
  request: IncomingMessage,
  response: ServerResponse,
  board: FaultBoard,
  options: GenerationOptions,
): Promise<void> {
  const raw = await readBody(request);
  // The API takes `x-api-key`; @anthropic-ai/sdk 1.x sends the key as `Authorization: Bearer` instead.
  const key = headerValue(request, 'x-api-key') ?? bearerToken(request);
  board.countCall('claude', key);
  if (!key) return send(response, anthropicError(401, 'authentication_error', 'x-api-key header is required'));
  if (!headerValue(request, 'anthropic-version')) {
    return send(response, anthropicError(400, 'invalid_request_error', 'anthropic-version: header is required'));
  }
  const body = parseJsonObject(raw);
  if (!body) return send(response, anthropicError(400, 'invalid_request_error', 'There was an issue with the request body: invalid JSON'));
  const missing = ['model', 'max_tokens', 'messages'].find((field) => body[field] === undefined);
  if (missing) return send(response, anthropicError(400, 'invalid_request_error', `${missing}: Field required`));
  const messages = Array.isArray(body['messages']) ? (body['messages'] as unknown[]) : [];
  const wireMessages = messages.map((message) => {
    const record = typeof message === 'object' && message !== null ? (message as { role?: unknown; content?: unknown }) : {};
    return { role: typeof record.role === 'string' ? record.role : 'user', text: textOfContent(record.content) };
  });
  const userText = wireMessages.map((message) => message.text).join('\n');
  const continuation = readContinuation(wireMessages);
  const call = {
    key,
    ...(continuation === undefined ? {} : { continuation }),
    model: String(body['model']),
    system: textOfContent(body['system']),
    userText,
    stream: body['stream'] === true,
    includeUsage: true,
    maxTokens: tokenLimitOf(body['max_tokens']),
  };
  serveGeneration(anthropicWire, board, options, response, call);
  return undefined;
}
