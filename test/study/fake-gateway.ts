import type { Attempt, Gateway, GenerateInput, GenerateOutcome } from '../../src/actors/types.js';
import type { GenerationRequest, ProviderAnswer } from '../../src/providers/index.js';

/**
 * A fake of OUR `Gateway` interface (not of any SDK) for unit tests of the study layer: it records
 * every request, answers with canned texts, runs `input.validate` on them like the real gateway,
 * re-asks once on invalid output, and reports attempts.
 */

export type Responder = (request: GenerationRequest, call: number) => string | Partial<ProviderAnswer> | Promise<string | Partial<ProviderAnswer>>;

export interface FakeGateway extends Gateway {
  readonly requests: GenerationRequest[];
}

const notImplemented = (): never => {
  throw new Error('not used by the study layer');
};

/**
 * `deltaChars`: the answer's text is also handed to `input.onDelta` in pieces of this many characters before
 * it is validated, as a streaming provider would.
 */
export function createFakeGateway(respond: Responder, options: { model?: string; usage?: ProviderAnswer['usage']; deltaChars?: number } = {}): FakeGateway {
  const requests: GenerationRequest[] = [];
  const model = options.model ?? 'fake-model-1';
  return {
    requests,
    async generate<T>(input: GenerateInput<T>): Promise<GenerateOutcome<T>> {
      const attempts: Attempt[] = [];
      const link = input.chain[0];
      if (link === undefined) throw new Error('empty chain');
      for (let retry = 0; retry < 2; retry += 1) {
        if (input.signal?.aborted) return { status: 'aborted', attempts };
        const request = retry === 0 ? input.request : { ...input.request, messages: [...input.request.messages, { role: 'user' as const, content: 'fix it' }] };
        requests.push(request);
        const raw = await respond(request, requests.length);
        if (input.signal?.aborted) {
          const aborted: Attempt = { provider: link.provider, model, outcome: 'failed', errorClass: 'aborted', countedByBreaker: false, retry, durationMs: 0 };
          attempts.push(aborted);
          input.onAttempt?.(aborted);
          return { status: 'aborted', attempts };
        }
        const answer: ProviderAnswer = {
          text: '',
          model,
          usage: options.usage ?? { inputTokens: 100, outputTokens: 50 },
          truncated: false,
          ...(typeof raw === 'string' ? { text: raw } : raw),
        };
        const pieceChars = options.deltaChars;
        if (pieceChars !== undefined) for (let at = 0; at < answer.text.length; at += pieceChars) input.onDelta?.(link.provider, answer.text.slice(at, at + pieceChars));
        const checked = input.validate(answer);
        const attempt: Attempt = checked.ok
          ? { provider: link.provider, model, outcome: 'succeeded', countedByBreaker: false, retry, durationMs: 1 }
          : { provider: link.provider, model, outcome: 'failed', errorClass: 'invalid_output', countedByBreaker: false, retry, durationMs: 1, message: checked.errors.join('; ') };
        attempts.push(attempt);
        input.onAttempt?.(attempt);
        if (checked.ok) return { status: 'succeeded', value: checked.value, provider: link.provider, model, fallback: false, attempts, usage: answer.usage };
      }
      return { status: 'failed', httpStatus: 502, code: 'INVALID_PROVIDER_OUTPUT', message: 'every attempt answered invalid output', attempts };
    },
    providers: notImplemented,
    provider: notImplemented,
    keyHealth: notImplemented,
    controlBreaker: notImplemented,
    onBreakerTransition: notImplemented,
    onCall: notImplemented,
    onFallback: notImplemented,
    onCost: () => () => {},
    stop: async () => {},
  };
}

interface Marker {
  task: 'notes' | 'mcq' | 'fill';
  lang: 'ko' | 'en';
  count?: number;
  conceptIds?: string[];
}

export function readMarker(request: GenerationRequest): Marker {
  const line = request.system.split('\n').find((candidate) => candidate.startsWith('study-helper-task: '));
  if (line === undefined) throw new Error('no task marker in the system prompt');
  return JSON.parse(line.slice('study-helper-task: '.length)) as Marker;
}

const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet', 'kilo', 'lima', 'mike', 'november', 'oscar', 'papa', 'quebec', 'romeo', 'sierra', 'tango', 'uniform', 'victor', 'whiskey', 'xray', 'yankee', 'zulu'];

/** Answers valid study JSON for whatever the marker asks, like the emulator does. */
export function markerResponder(request: GenerationRequest, call: number): string {
  const marker = readMarker(request);
  // In the language asked for, as a model would answer (the service checks the language).
  const ko = marker.lang === 'ko';
  if (marker.task === 'notes') {
    return JSON.stringify({
      keyConcepts: [1, 2, 3].map((index) => ({ id: `c${index}`, term: `term ${call}-${index}`, definition: ko ? `${index}번째 개념의 정의` : `definition ${index}`, importance: 'high' })),
      sections: [{ title: `section ${call}`, summary: ko ? '자료의 요약' : 'summary', bullets: [ko ? '요점' : 'point'] }],
      glossary: [],
    });
  }
  const conceptIds = marker.conceptIds ?? [];
  const questions = Array.from({ length: marker.count ?? 1 }, (_, index) => {
    const topic = `${words[(call * 7 + index) % words.length]} ${words[(call * 3 + index * 5) % words.length]} ${call}x${index}`;
    const conceptId = conceptIds[index % conceptIds.length] ?? 'c1';
    return marker.task === 'mcq'
      ? {
          id: `q${index + 1}`,
          question: ko ? `${topic}에 대해 옳은 설명은 무엇인가?` : `Which statement about ${topic} holds?`,
          options: ko ? { A: '하나', B: '둘', C: '셋', D: '넷' } : { A: 'one', B: 'two', C: 'three', D: 'four' },
          answer: 'A',
          explanation: ko ? '자료에 그렇게 나온다' : 'because',
          conceptId,
          level: 2,
          questionType: 'concept',
        }
      : { id: `q${index + 1}`, sentence: ko ? `자료에서 ${topic}의 ___이(가) 중요하다고 설명한다.` : `The ___ of ${topic} matters.`, answer: 'role', acceptableAnswers: [], hint: ko ? '역할을 생각해 보세요' : 'h', conceptId, level: 2, questionType: 'concept' };
  });
  return JSON.stringify({ questions });
}
