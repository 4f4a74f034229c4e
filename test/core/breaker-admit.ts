import { createActor, fromCallback, type AnyActorRef } from 'xstate';
import type { BreakerEvent } from '../../src/machines/breaker.machine.js';
import type { CallRequest } from '../../src/machines/call-request.js';
import { Secret } from '../../src/security/secret.js';

/** Where a breaker's answers go in tests that only read the breaker's own state: nowhere. */
const answerSink: AnyActorRef = createActor(fromCallback(() => undefined)).start();

/** A call as the provider actor asks the breaker about it (only its id and time matter to the breaker). */
function stubCall(callId: string, at: number, replyTo: AnyActorRef = answerSink): CallRequest {
  return {
    callId,
    replyTo,
    keyId: 'key',
    request: { task: 'notes', lang: 'en', system: '', messages: [], jsonSchema: {}, maxOutputTokens: 1, maxAnswerChars: 16 },
    apiKey: new Secret('test-claude-key-admit'),
    validate: () => ({ ok: true, value: null }),
    at,
  };
}

/** `breaker.admit` for `callId` at `at` (the probe when the breaker is half-open or past `retryAt`). */
export function admit(
  callId: string,
  at: number,
  options: { leased?: boolean; replyTo?: AnyActorRef } = {},
): Extract<BreakerEvent, { type: 'breaker.admit' }> {
  const replyTo = options.replyTo ?? answerSink;
  return { type: 'breaker.admit', call: stubCall(callId, at, replyTo), replyTo, leased: options.leased ?? false, at };
}
