/**
 * TimelyGPT over plain HTTP (docs/providers.md): the token exchange and one completion, through the service's
 * upstream `fetch` (../upstream-fetch.ts).
 * Default base: https://hello.timelygpt.co.kr/api/v2/chat
 */
import { numberOrNull } from '../streamed-text.js';
import { AnswerTooLongError, UnexpectedResponseError } from '../upstream-errors.js';
import { answerCeiling, upstreamFetch } from '../upstream-fetch.js';
import type { TimelyCompletion } from '../../machines/timelygpt-session.machine.js';
import { TimelyGptHttpError, type TimelyGptEndpoint } from './errors.js';

export interface TimelyCompletionBody {
  readonly session_id: string;
  readonly messages: readonly { readonly role: string; readonly content: string }[];
  readonly model: string;
  readonly instructions?: string;
  readonly output_type?: 'TEXT' | 'JSON';
  readonly stream: false;
  readonly locale: string;
}

export type { TimelyCompletion } from '../../machines/timelygpt-session.machine.js';

async function readJson(endpoint: TimelyGptEndpoint, response: Response): Promise<unknown> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    if (response.ok)
      throw new UnexpectedResponseError(
        `TimelyGPT ${endpoint} answered ${response.status} with a body that is not JSON`,
        response.status,
      );
  }
  if (!response.ok) throw new TimelyGptHttpError(endpoint, response.status, body, response.headers);
  return body;
}

/** `GET {base}/sdk-auth/authenticate` with `X-Timely-API: <key>` → the access token. */
export async function fetchAccessToken(
  baseUrl: string,
  apiKey: string,
  signal: AbortSignal,
): Promise<string> {
  const response = await upstreamFetch(`${baseUrl}/sdk-auth/authenticate`, {
    method: 'GET',
    headers: { 'X-Timely-API': apiKey, accept: 'application/json' },
    signal,
  });
  const body = (await readJson('authenticate', response)) as
    { success?: unknown; data?: { access_token?: unknown } } | undefined;
  const token = body?.data?.access_token;
  if (body?.success !== true || typeof token !== 'string' || token.length === 0) {
    throw new UnexpectedResponseError(
      'TimelyGPT authenticate answered 2xx without an access token',
      response.status,
    );
  }
  return token;
}

/**
 * `POST {base}/llm-completion` with the bearer token. A 2xx `{"type":"error"}` is a provider failure.
 * The answer is read whole, so `maxAnswerChars` (the call's ceiling) bounds the bytes read (the transport
 * stops past them) and then the text: past either the call fails `invalid_output` (`AnswerTooLongError`).
 */
export async function postCompletion(
  baseUrl: string,
  token: string,
  body: TimelyCompletionBody,
  signal: AbortSignal,
  maxAnswerChars: number,
): Promise<TimelyCompletion> {
  const response = await upstreamFetch(`${baseUrl}/llm-completion`, {
    ...answerCeiling(maxAnswerChars),
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json',
    },
    body: JSON.stringify(body),
    signal,
  });
  const answer = (await readJson('completion', response)) as
    | {
        type?: unknown;
        message?: unknown;
        error?: unknown;
        model?: unknown;
        usage?: { input_tokens?: unknown; output_tokens?: unknown };
      }
    | undefined;
  if (answer?.type === 'error') {
    const detail = typeof answer.error === 'string' ? answer.error : JSON.stringify(answer.error ?? null);
    throw new UnexpectedResponseError(
      `TimelyGPT answered an error inside a ${response.status}: ${detail.slice(0, 200)}`,
      response.status,
    );
  }
  if (answer?.type !== 'final_response' || answer.message === undefined || answer.message === null) {
    throw new UnexpectedResponseError(
      `TimelyGPT answered ${response.status} without a final_response`,
      response.status,
    );
  }
  const text = typeof answer.message === 'string' ? answer.message : JSON.stringify(answer.message);
  if (text.length > maxAnswerChars) throw new AnswerTooLongError(maxAnswerChars, 'characters', text.length);
  return {
    text,
    model: typeof answer.model === 'string' ? answer.model : undefined,
    inputTokens: numberOrNull(answer.usage?.input_tokens),
    outputTokens: numberOrNull(answer.usage?.output_tokens),
  };
}
