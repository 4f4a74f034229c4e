import { createEmptyActor, type AnyActorRef } from 'xstate';
import type { CallRequest } from './call-request.js';

/** Where the answer to a question asked through the pure `transition` goes: nowhere (it is read from the actions). */
const nobody: AnyActorRef = createEmptyActor();

/**
 * A call that only asks a machine what it would answer (`key.admit`, `breaker.admit`) through the pure
 * `transition`: a view, or the fleet's copy of a breaker, which knows a call only by its id. It carries no
 * request and no key, and never goes out.
 */
export function askingCall(callId: string, at: number): CallRequest {
  return {
    callId,
    replyTo: nobody,
    keyId: '',
    request: {
      task: 'notes',
      lang: 'en',
      system: '',
      messages: [],
      jsonSchema: {},
      maxOutputTokens: 1,
      maxAnswerChars: 1,
    },
    apiKey: { fingerprint: '', reveal: () => '' },
    validate: () => ({ ok: true, value: null }),
    at,
  };
}
