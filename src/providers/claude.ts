/**
 * Claude through `@anthropic-ai/sdk` (Messages API). The SDK's retries are off: every attempt is
 * seen once by the provider actor, which also owns the deadline through the signal it passes.
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
import { rememberKeyOf } from './scrub.js';
import { sdkTimeoutMs } from './sdk-options.js';
import type { ProviderAdapter, ProviderAnswer } from './types.js';
import { UnexpectedResponseError, upstreamFailure } from './upstream-errors.js';
import { upstreamFetch } from './upstream-fetch.js';

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
 * Pure: an error the Claude adapter rejected with → its docs/errors.md class.
 * The credit-balance and usage-limit 400s carry nothing but their message, so those two are matched on text
 * (https://docs.anthropic.com/en/api/errors).
 */
export function classifyClaudeError(error: unknown): ProviderFailure {
  // The SDK is imported on first use (claude-sdk.ts): before that, no error can be one of its classes.
  const sdk = anthropicSdkIfLoaded();
  if (sdk === undefined) return classifyTransportError(error) ?? classifyUnknown(error);
  if (error instanceof sdk.APIUserAbortError) return failure('aborted', error, error.message);
  if (error instanceof sdk.APIConnectionTimeoutError) return failure('timeout', error, error.message);
  if (error instanceof sdk.APIConnectionError)
    return classifyTransportError(error.cause) ?? failure('connection', error, error.message);
  if (error instanceof sdk.APIError && typeof error.status === 'number') {
    const status = error.status;
    const { type, message = error.message, errorCode } = anthropicBody(error);
    const extra = { httpStatus: status, retryAfterMs: retryAfterMsOf(error.headers) };
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
  return classifyTransportError(error) ?? classifyUnknown(error);
}

export function createClaudeAdapter(options: ClaudeAdapterOptions): ProviderAdapter {
  const { baseUrl, model } = options;
  let client: Anthropic | undefined;
  return {
    id: 'claude',
    model,
    async generate(request, apiKey, signal) {
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
        // undici's `request` on one pool instead of the global `fetch` (upstream-fetch.ts).
        fetch: upstreamFetch,
      });
      try {
        const message: unknown = await client.messages.create(
          {
            model,
            max_tokens: request.maxOutputTokens,
            system: withJsonInstruction(request),
            messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
          },
          // SDK 1.x sends the key as a bearer token; per-request headers override the client's.
          { signal, headers: { Authorization: `Bearer ${apiKey.reveal()}` } },
        );
        return readMessage(message, model);
      } catch (error) {
        const wrapped = upstreamFailure(error, signal);
        rememberKeyOf(wrapped, apiKey);
        throw wrapped;
      }
    },
    classify: classifyClaudeError,
  };
}

/** The SDK hands back whatever a 2xx held (a string for HTML): check it is a Message. */
function readMessage(message: unknown, requestedModel: string): ProviderAnswer {
  if (
    typeof message !== 'object' ||
    message === null ||
    !Array.isArray((message as { content?: unknown }).content)
  ) {
    throw new UnexpectedResponseError('Anthropic answered 2xx with a body that is not a Message');
  }
  const record = message as {
    content: { type?: unknown; text?: unknown }[];
    model?: unknown;
    stop_reason?: unknown;
    usage?: { input_tokens?: unknown; output_tokens?: unknown };
  };
  const text = record.content
    .filter((block) => block.type === 'text' && typeof block.text === 'string')
    .map((block) => block.text as string)
    .join('');
  return {
    text,
    model: typeof record.model === 'string' && record.model ? record.model : requestedModel,
    usage: {
      inputTokens: typeof record.usage?.input_tokens === 'number' ? record.usage.input_tokens : null,
      outputTokens: typeof record.usage?.output_tokens === 'number' ? record.usage.output_tokens : null,
    },
    truncated: record.stop_reason === 'max_tokens',
  };
}
