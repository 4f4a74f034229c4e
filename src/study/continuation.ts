import type { AnswerContinuation } from '../actors/types.js';
import type { GenerationRequest, Task } from '../providers/index.js';
import type { StudyLang } from './schemas.js';
import { StudyItemExtractor, type ContinuationPoint } from './stream-items.js';

/**
 * Continuing a cut answer on the next provider (what was streamed stays valid). When a stream fails in the
 * middle of an
 * answer, the partial JSON is cut back to the end of its last complete element; the next provider gets
 * the same request with that prefix as the start of its answer and the instruction to write only the
 * rest, exactly; the prefix and what it writes are joined into the one answer that is validated.
 */

/** The line that marks a continuation request (machine-readable, like the task marker of prompts.ts). */
export const continuationMarker = 'study-helper-continue:';

const instruction: Readonly<Record<StudyLang, string>> = {
  en: 'Your previous answer (the assistant message above) was cut off after its last complete element. Continue it exactly from its last character: write only the rest of the JSON (starting with "," for the next element, or with the closing brackets), never repeat what is already written, no code fence, no text before or after.',
  ko: '위의 assistant 메시지(이전 답)는 마지막으로 완성된 항목 뒤에서 끊겼습니다. 그 마지막 문자 바로 다음부터 정확히 이어 쓰세요: 나머지 JSON만 쓰고(다음 항목이면 ","로, 끝이면 닫는 괄호로 시작), 이미 쓴 부분은 반복하지 말고, 코드 펜스나 앞뒤 설명은 쓰지 마세요.',
};

/**
 * The cut point of a failed attempt's partial output: its JSON up to the end of the last complete
 * element, or undefined when the answer cannot be continued (no complete element yet, the JSON had
 * already closed, or it went past the extractor's bounds) and must start over.
 */
export function continuationPointOf(task: Task, partialText: string): ContinuationPoint | undefined {
  const extractor = new StudyItemExtractor({ task });
  extractor.push(partialText);
  return extractor.continuationPoint();
}

/**
 * The request that asks the next provider to continue `prefix`: the original request (its system prompt,
 * task marker and document unchanged), the prefix as the assistant's answer so far, and the instruction
 * to write only the rest. Its output room is the original's: the rest is never longer than a whole answer.
 */
export function continuationRequest(request: GenerationRequest, prefix: string): GenerationRequest {
  const marker = `${continuationMarker} ${JSON.stringify({ prefixChars: prefix.length })}`;
  return {
    ...request,
    messages: [...request.messages, { role: 'assistant', content: prefix }, { role: 'user', content: `${instruction[request.lang]}\n${marker}` }],
  };
}

const openingFence = /^\s*```[a-zA-Z0-9_-]*[ \t]*\r?\n/;
const closingFence = /\r?\n?```\s*$/;

/**
 * The one answer: `prefix` and the continuation joined. A continuation in a code fence is taken out of it;
 * one that starts the whole answer over (it repeats `prefix`) is taken as it is; a continuation that repeats
 * only a tail of the prefix is joined where they overlap (longest overlap up to 4 KiB, found in linear time).
 */
export function mergeContinuation(prefix: string, continuation: string): string {
  let rest = continuation;
  const fenced = openingFence.exec(rest);
  if (fenced !== null) rest = rest.slice(fenced[0].length).replace(closingFence, '');
  const trimmed = rest.trimStart();
  if (trimmed.startsWith(prefix)) return trimmed;
  const overlap = longestOverlap(prefix, trimmed);
  // Only an overlap that is clearly a repeat (a whole element's worth) is dropped: "}" or "," overlapping
  // by chance must stay.
  return overlap >= 16 ? prefix + trimmed.slice(overlap) : prefix + rest;
}

const maxOverlapChars = 4096;

/** Length of the longest suffix of `head` that is a prefix of `tail` (KMP failure function over tail#head). */
function longestOverlap(head: string, tail: string): number {
  const probe = tail.slice(0, maxOverlapChars);
  const text = `${probe}\u0000${head.slice(-maxOverlapChars)}`;
  const failure = new Array<number>(text.length).fill(0);
  for (let index = 1; index < text.length; index += 1) {
    let length = failure[index - 1] ?? 0;
    while (length > 0 && text[index] !== text[length]) length = failure[length - 1] ?? 0;
    if (text[index] === text[length]) length += 1;
    failure[index] = length;
  }
  return Math.min(failure[text.length - 1] ?? 0, probe.length);
}

const continuations = new Map<Task, AnswerContinuation>();

/**
 * How a run continues a cut answer of `task` (GenerateInput.continuation): the fallback machine asks it
 * where a failed attempt's output can be continued from, and for the request and the merged answer.
 */
export function continuationOf(task: Task): AnswerContinuation {
  let continuation = continuations.get(task);
  if (continuation === undefined) {
    continuation = {
      pointOf: (written) => continuationPointOf(task, written)?.prefix,
      request: continuationRequest,
      merge: mergeContinuation,
    };
    continuations.set(task, continuation);
  }
  return continuation;
}
