import type { GenerationRequest, Task } from '../../src/providers/index.js';

/** A generation request as the study module builds it: the task marker line in the system prompt. */
export function studyRequest(
  task: Task = 'notes',
  options: { lang?: 'ko' | 'en'; count?: number; conceptIds?: string[]; text?: string; maxAnswerChars?: number; maxOutputTokens?: number } = {},
): GenerationRequest {
  const marker =
    task === 'notes'
      ? { task, lang: options.lang ?? 'en' }
      : { task, lang: options.lang ?? 'en', count: options.count ?? 3, conceptIds: options.conceptIds ?? ['c1', 'c2'] };
  return {
    task,
    lang: options.lang ?? 'en',
    system: `You write study material.\nstudy-helper-task: ${JSON.stringify(marker)}`,
    messages: [
      {
        role: 'user',
        content:
          options.text ??
          'Photosynthesis converts light energy into chemical energy. Chlorophyll absorbs light. Photosynthesis happens in chloroplasts. Glucose stores the energy.',
      },
    ],
    jsonSchema: { type: 'object' },
    maxOutputTokens: options.maxOutputTokens ?? 2048,
    maxAnswerChars: options.maxAnswerChars ?? (options.maxOutputTokens ?? 2048) * 16,
  };
}

/** A signal that never fires (for calls that must not be cut short). */
export function openSignal(): AbortSignal {
  return new AbortController().signal;
}
