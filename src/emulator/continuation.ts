/**
 * Continuation requests (docs/emulator.md "Streams"): the study module asks a provider to continue an
 * answer another call began and failed in the middle of — the original messages, the answer so far as an
 * assistant message, then a user message carrying the line `study-helper-continue: {"prefixChars":n}`.
 * The emulator answers the rest of the answer it would have given the original messages.
 */

const continuationPattern = /study-helper-continue:\s*\{[^\n]*\}/;

/** A chat message as the emulator's routes read it (role and text). */
export interface WireMessage {
  readonly role: string;
  readonly text: string;
}

/** What a continuation request asks: the answer so far, and the user text of the messages before it. */
export interface ContinuationAsk {
  readonly prefix: string;
  readonly userText: string;
}

/** The continuation a request's messages ask for, or undefined when they ask for a whole answer. */
export function readContinuation(messages: readonly WireMessage[]): ContinuationAsk | undefined {
  const last = messages.at(-1);
  const answer = messages.at(-2);
  if (last === undefined || answer === undefined) return undefined;
  if (last.role !== 'user' || answer.role !== 'assistant' || !continuationPattern.test(last.text)) return undefined;
  return {
    prefix: answer.text,
    userText: messages
      .slice(0, -2)
      .map((message) => message.text)
      .join('\n'),
  };
}

/**
 * The rest of `whole` after `prefix`. A prefix that is not how `whole` begins (another model's words) gets
 * the whole answer again, as a model that starts over would write it.
 */
export function restAfter(whole: string, prefix: string): string {
  return whole.startsWith(prefix) ? whole.slice(prefix.length) : whole;
}
