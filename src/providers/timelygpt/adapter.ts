/**
 * TimelyGPT over HTTP (docs/providers.md): the token flow runs as `timelyGptSessionMachine`, with the
 * token cache shared by every call of this adapter. Its documented API has no stream (`stream: false`,
 * one `final_response`), so an observer gets the whole text as one piece when it has arrived.
 */
import { randomUUID } from 'node:crypto';
import { createActor, fromPromise, toPromise } from 'xstate';
import {
  timelyGptSessionMachine,
  type AcquireTokenInput,
  type CompleteChatInput,
} from '../../machines/timelygpt-session.machine.js';
import { withJsonInstruction } from '../json-instruction.js';
import type { GenerationRequest, ProviderAdapter, ProviderAnswer } from '../types.js';
import { upstreamFailure } from '../upstream-errors.js';
import { classifyTimelyGptError } from './classify.js';
import { TokenCache } from './token-cache.js';
import {
  fetchAccessToken,
  postCompletion,
  type TimelyCompletion,
  type TimelyCompletionBody,
} from './wire.js';

export interface TimelyGptAdapterOptions {
  readonly baseUrl: string;
  readonly model: string;
  /** How long a token is reused (TIMELYGPT_TOKEN_TTL_MS, 55 minutes by default). */
  readonly tokenTtlMs: number;
  /** Most keys whose tokens are cached at once. Default 10,000. */
  readonly maxCachedTokens?: number;
  /** Injected clock for the token TTL (tests). */
  readonly now?: () => number;
}

/** The adapter, plus its token cache for tests and metrics. */
export interface TimelyGptAdapter extends ProviderAdapter {
  readonly tokenCache: TokenCache;
}

/** The `llm-completion` body of one request; `locale` is the request's `lang` field. */
export function completionBody(request: GenerationRequest, model: string): TimelyCompletionBody {
  return {
    session_id: randomUUID(),
    messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
    model,
    instructions: withJsonInstruction(request),
    output_type: 'JSON',
    stream: false,
    locale: request.lang,
  };
}

function toAnswer(completion: TimelyCompletion, model: string): ProviderAnswer {
  return {
    text: completion.text,
    model: completion.model ?? model,
    usage: { inputTokens: completion.inputTokens, outputTokens: completion.outputTokens },
    // TimelyGPT reports no stop reason; a cut-off answer fails validation instead.
    truncated: false,
  };
}

export function createTimelyGptAdapter(options: TimelyGptAdapterOptions): TimelyGptAdapter {
  const { baseUrl, model } = options;
  const tokenCache = new TokenCache({
    ttlMs: options.tokenTtlMs,
    ...(options.maxCachedTokens === undefined ? {} : { maxEntries: options.maxCachedTokens }),
    ...(options.now === undefined ? {} : { now: options.now }),
  });

  return {
    id: 'timelygpt',
    model,
    tokenCache,
    async generate(request, apiKey, signal, observer) {
      const body = completionBody(request, model);
      const session = timelyGptSessionMachine.provide({
        actors: {
          acquireToken: fromPromise<string, AcquireTokenInput>(({ input }) =>
            tokenCache.acquire(
              input.apiKey.reveal(),
              (exchangeSignal) => fetchAccessToken(baseUrl, input.apiKey.reveal(), exchangeSignal),
              input.signal,
            ),
          ),
          completeChat: fromPromise<TimelyCompletion, CompleteChatInput>(({ input }) =>
            postCompletion(baseUrl, input.token, body, input.signal, request.maxAnswerChars),
          ),
        },
        actions: {
          evictToken: (_, params) => {
            if (params.token !== null) tokenCache.evict(params.apiKey.reveal(), params.token);
          },
        },
      });
      // The provider calls `generate` from inside one of its machine's actions; XState builds an actor's
      // initial context through `assign()` and, in development builds, warns about any `assign()` made
      // while a custom action runs. So the session actor is made a microtask later, after that action.
      await Promise.resolve();
      const actor = createActor(session, { input: { apiKey, signal } });
      const finished = toPromise(actor);
      actor.start();
      const output = await finished;
      if (output.status === 'succeeded') {
        // TimelyGPT's documented API answers whole (`stream: false`): the answer is one piece, at its end.
        const answer = toAnswer(output.completion, model);
        if (answer.text.length > 0) observer?.onDelta(answer.text);
        return answer;
      }
      throw upstreamFailure(output.error, signal, apiKey);
    },
    classify: classifyTimelyGptError,
  };
}
