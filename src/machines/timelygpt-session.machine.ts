/**
 * One TimelyGPT call as states (docs/providers.md): get a token (cached, or one exchange shared by every
 * concurrent call with the same key), generate, and when `llm-completion` answers 401 (the token
 * expired) evict it, re-authenticate and generate once more, automatically. A second 401 — or a 401
 * from `authenticate`, which means a bad key — ends in `failed`, and the classifier makes it `auth`:
 * never a class that counts toward the breaker (test/providers/timelygpt-session.graph.test.ts).
 */
import { assign, fromPromise, setup } from 'xstate';
import type { ApiKey } from './types.js';

/** One `llm-completion` answer, as the session carries it (src/providers/timelygpt/wire.ts reads it off the wire). */
export interface TimelyCompletion {
  readonly text: string;
  readonly model: string | undefined;
  readonly inputTokens: number | null;
  readonly outputTokens: number | null;
}

/** A TimelyGPT HTTP failure as the session sees it: which endpoint answered which status. */
interface EndpointFailure {
  readonly status: number;
  readonly endpoint: string;
}

function isEndpointFailure(error: unknown): error is EndpointFailure {
  return (
    typeof error === 'object' &&
    error !== null &&
    'status' in error &&
    typeof error.status === 'number' &&
    'endpoint' in error &&
    typeof error.endpoint === 'string'
  );
}

/** Is this the 401 of an expired token at `llm-completion` (the one that earns a re-authentication)? */
export function isExpiredTokenError(error: unknown): boolean {
  return isEndpointFailure(error) && error.status === 401 && error.endpoint === 'completion';
}

export interface TimelyGptSessionInput {
  readonly apiKey: ApiKey;
  /** Aborts on the caller's cancel and on the provider actor's deadline. */
  readonly signal: AbortSignal;
}

export interface TimelyGptSessionContext {
  readonly apiKey: ApiKey;
  readonly signal: AbortSignal;
  readonly token: string | null;
  readonly completion: TimelyCompletion | null;
  /** What the last step rejected with, for the classifier. */
  readonly error: unknown;
}

export type TimelyGptSessionOutput =
  | { readonly status: 'succeeded'; readonly completion: TimelyCompletion }
  | { readonly status: 'failed'; readonly error: unknown };

export interface AcquireTokenInput {
  readonly apiKey: ApiKey;
  readonly signal: AbortSignal;
}

export interface CompleteChatInput {
  readonly token: string;
  readonly signal: AbortSignal;
}

function notProvided(name: string): never {
  throw new Error(`timelyGptSessionMachine: provide the ${name} implementation`);
}

export const timelyGptSessionMachine = setup({
  types: {
    context: {} as TimelyGptSessionContext,
    input: {} as TimelyGptSessionInput,
    output: {} as TimelyGptSessionOutput,
  },
  actors: {
    /** A cached token for the key, or a (shared) exchange at `sdk-auth/authenticate`. */
    acquireToken: fromPromise<string, AcquireTokenInput>(async () => notProvided('acquireToken actor')),
    /** One `llm-completion` call with the token. */
    completeChat: fromPromise<TimelyCompletion, CompleteChatInput>(async () => notProvided('completeChat actor')),
  },
  actions: {
    /** Drop the expired token from the cache (only if it is still the cached one). */
    evictToken: (_, _params: { apiKey: ApiKey; token: string | null }) => undefined,
    recordToken: assign({ token: (_, params: { token: string }) => params.token }),
    recordCompletion: assign({ completion: (_, params: { completion: TimelyCompletion }) => params.completion }),
    recordError: assign({ error: (_, params: { error: unknown }) => params.error }),
  },
  guards: {
    /** `llm-completion` answered 401: the token expired (a 401 from `authenticate` is a bad key, not this). */
    isExpiredToken: (_, params: { error: unknown }) => isExpiredTokenError(params.error),
  },
}).createMachine({
  id: 'timelyGptSession',
  context: ({ input }) => ({ apiKey: input.apiKey, signal: input.signal, token: null, completion: null, error: null }),
  initial: 'authenticating',
  states: {
    /** Getting a token: from the cache, or from an exchange (shared with concurrent calls for the same key). */
    authenticating: {
      invoke: {
        id: 'authenticate',
        src: 'acquireToken',
        input: ({ context }) => ({ apiKey: context.apiKey, signal: context.signal }),
        onDone: { target: 'generating', actions: { type: 'recordToken', params: ({ event }) => ({ token: event.output }) } },
        onError: { target: 'failed', actions: { type: 'recordError', params: ({ event }) => ({ error: event.error }) } },
      },
    },
    /** The first `llm-completion` call. */
    generating: {
      invoke: {
        id: 'generate',
        src: 'completeChat',
        input: ({ context }) => ({ token: context.token ?? '', signal: context.signal }),
        onDone: {
          target: 'succeeded',
          actions: { type: 'recordCompletion', params: ({ event }) => ({ completion: event.output }) },
        },
        onError: [
          {
            guard: { type: 'isExpiredToken', params: ({ event }) => ({ error: event.error }) },
            target: 'reauthenticating',
            actions: { type: 'evictToken', params: ({ context }) => ({ apiKey: context.apiKey, token: context.token }) },
          },
          { target: 'failed', actions: { type: 'recordError', params: ({ event }) => ({ error: event.error }) } },
        ],
      },
    },
    /** The token expired: exchange the key for a fresh one (once per call). */
    reauthenticating: {
      invoke: {
        id: 'reauthenticate',
        src: 'acquireToken',
        input: ({ context }) => ({ apiKey: context.apiKey, signal: context.signal }),
        onDone: { target: 'regenerating', actions: { type: 'recordToken', params: ({ event }) => ({ token: event.output }) } },
        onError: { target: 'failed', actions: { type: 'recordError', params: ({ event }) => ({ error: event.error }) } },
      },
    },
    /** The single retry with the fresh token; any failure here, a second 401 included, is final. */
    regenerating: {
      invoke: {
        id: 'regenerate',
        src: 'completeChat',
        input: ({ context }) => ({ token: context.token ?? '', signal: context.signal }),
        onDone: {
          target: 'succeeded',
          actions: { type: 'recordCompletion', params: ({ event }) => ({ completion: event.output }) },
        },
        onError: { target: 'failed', actions: { type: 'recordError', params: ({ event }) => ({ error: event.error }) } },
      },
    },
    /** A completion arrived. */
    succeeded: { type: 'final' },
    /** The call failed; `error` goes to `classifyTimelyGptError`. */
    failed: { type: 'final' },
  },
  output: ({ context }) =>
    context.completion ? { status: 'succeeded', completion: context.completion } : { status: 'failed', error: context.error },
});

