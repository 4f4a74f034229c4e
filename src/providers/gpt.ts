/**
 * GPT through `openai` v6 (Chat Completions) with `response_format: json_schema`. The SDK's retries
 * are off; the provider actor owns the deadline through the signal it passes.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ProviderFailure } from '../errors/index.js';
import {
  classifyTransportError,
  classifyUnknown,
  classOfStatus,
  failure,
  retryAfterMsOf,
} from './classify-common.js';
import { callOptions, PerCallKeyOpenAI } from './openai-client.js';
import { rememberKeyOf } from './scrub.js';
import { sdkTimeoutMs } from './sdk-options.js';
import { upstreamFetch } from './upstream-fetch.js';
import type { ProviderAdapter, ProviderAnswer } from './types.js';
import { UnexpectedResponseError, upstreamFailure } from './upstream-errors.js';

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

/** Pure: an error the GPT adapter rejected with → its docs/errors.md class (OpenAI's classes keep `.name` "Error": use instanceof). */
export function classifyGptError(error: unknown): ProviderFailure {
  if (error instanceof APIUserAbortError) return failure('aborted', error, error.message);
  if (error instanceof APIConnectionTimeoutError) return failure('timeout', error, error.message);
  if (error instanceof APIConnectionError)
    return classifyTransportError(error.cause) ?? failure('connection', error, error.message);
  if (error instanceof APIError && typeof error.status === 'number') {
    const status = error.status;
    const code = stringOrUndefined(error.code);
    const type = stringOrUndefined(error.type);
    const message = error.message;
    const extra = { httpStatus: status, retryAfterMs: retryAfterMsOf(error.headers) };
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
  return classifyTransportError(error) ?? classifyUnknown(error);
}

/**
 * One SDK client per adapter, with no user's key in it: each call passes its own key and signal in its
 * request options (openai-client.ts). (A client per call cost ~190 µs of CPU; a client per key would keep
 * users' keys in memory past their request.)
 * Every credential option is explicit: the SDK never reads OPENAI_API_KEY / OPENAI_ADMIN_KEY / OPENAI_ORG_ID.
 */
function createClient(baseUrl: string): PerCallKeyOpenAI {
  return new PerCallKeyOpenAI({
    // A placeholder the SDK requires; every request's headers get the call's own key instead.
    apiKey: 'sent-per-request',
    adminAPIKey: null,
    organization: null,
    project: null,
    webhookSecret: null,
    baseURL: baseUrl,
    maxRetries: 0,
    timeout: sdkTimeoutMs,
    // undici's `request` on one pool instead of the global `fetch` (upstream-fetch.ts: half the CPU per call).
    fetch: upstreamFetch,
  });
}

export function createGptAdapter(options: GptAdapterOptions): ProviderAdapter {
  const { baseUrl, model } = options;
  let client: PerCallKeyOpenAI | undefined;
  return {
    id: 'gpt',
    model,
    async generate(request, apiKey, signal) {
      client ??= createClient(baseUrl);
      try {
        const completion: unknown = await client.chat.completions.create(
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
          },
          callOptions(apiKey, signal),
        );
        return readCompletion(completion, model);
      } catch (error) {
        const wrapped = upstreamFailure(error, signal);
        rememberKeyOf(wrapped, apiKey);
        throw wrapped;
      }
    },
    classify: classifyGptError,
  };
}

/** The SDK hands back whatever a 2xx held (a string for HTML): check it is a chat completion. */
function readCompletion(completion: unknown, requestedModel: string): ProviderAnswer {
  const record = (typeof completion === 'object' && completion !== null ? completion : {}) as {
    choices?: { message?: { content?: unknown }; finish_reason?: unknown }[];
    model?: unknown;
    usage?: { prompt_tokens?: unknown; completion_tokens?: unknown };
  };
  const choice = Array.isArray(record.choices) ? record.choices[0] : undefined;
  if (!choice || typeof choice.message !== 'object' || choice.message === null) {
    throw new UnexpectedResponseError('OpenAI answered 2xx with a body that is not a chat completion');
  }
  return {
    text: typeof choice.message.content === 'string' ? choice.message.content : '',
    model: typeof record.model === 'string' && record.model ? record.model : requestedModel,
    usage: {
      inputTokens: typeof record.usage?.prompt_tokens === 'number' ? record.usage.prompt_tokens : null,
      outputTokens:
        typeof record.usage?.completion_tokens === 'number' ? record.usage.completion_tokens : null,
    },
    truncated: choice.finish_reason === 'length',
  };
}
