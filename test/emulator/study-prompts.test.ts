import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import type { GenerationRequest } from '../../src/providers/index.js';
import { splitText } from '../../src/study/split.js';
import {
  buildMergeNotesRequest,
  buildNotesRequest,
  buildQuestionsRequest,
  validateStudyValue,
  type FillResult,
  type McqResult,
  type NotesResult,
} from '../../src/study/index.js';
import { nearDuplicateThreshold, textSimilarity } from '../../src/study/similarity.js';
import { longDocument } from '../study/long-text.js';

/**
 * The emulator answers the prompts the study module really builds (src/study/prompts.ts): notes
 * only from the document inside `<document>`, and questions per part of a long document that are
 * not near-duplicates of another part's questions once the parts are combined.
 */

const scaffolding = {
  en: [/\bdocument\b/i, /<\/?document>/, /part \d+ of \d+/, /cover this part/i, /concepts \(use/i],
  ko: [/문서/, /<\/?document>/, /번째 부분/, /개념 목록/],
} as const;

const englishText =
  'Photosynthesis converts light energy into chemical energy. Chlorophyll absorbs light in the chloroplasts. ' +
  'The Calvin cycle fixes carbon dioxide into glucose. Glucose stores energy for the plant.';
const koreanText =
  '광합성은 빛 에너지를 화학 에너지로 바꾼다. 엽록소는 엽록체에서 빛을 흡수한다. 캘빈 회로는 이산화탄소를 포도당으로 고정한다. 포도당은 식물의 에너지를 저장한다.';

describe('emulator answers to the study prompts', () => {
  let emulator: Emulator;
  beforeAll(async () => {
    emulator = await startEmulator();
  });
  afterAll(async () => {
    await emulator.close();
  });

  /** One request through the Anthropic endpoint, the study JSON parsed. */
  async function ask<T>(request: GenerationRequest): Promise<T> {
    const response = await fetch(`${emulator.anthropicBaseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'test-claude-key-0001', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-emu', max_tokens: request.maxOutputTokens, system: request.system, messages: request.messages }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { content: { text: string }[] };
    return JSON.parse(body.content[0]?.text ?? '') as T;
  }

  it('never takes a run of more than 40 letters as a term: notes of a text without spaces stay small, as a model\'s would', async () => {
    const text = `${'a'.repeat(30_000)} Photosynthesis converts light energy into chemical energy.`;
    const notes = await ask<NotesResult>(buildNotesRequest({ text, lang: 'en' }));
    expect(validateStudyValue('notes', notes).ok).toBe(true);
    for (const concept of notes.keyConcepts) expect(concept.term.length).toBeLessThanOrEqual(40);
    // A model answering within 4096 output tokens: the whole answer is a few KB, not the run echoed back.
    expect(JSON.stringify(notes).length).toBeLessThan(4000);
  });

  describe.each([
    ['en', englishText],
    ['ko', koreanText],
  ] as const)('notes in %s', (lang, text) => {
    it('come from the document text only, never from the prompt around it', async () => {
      const whole = await ask<NotesResult>(buildNotesRequest({ text, lang }));
      const part = await ask<NotesResult>(buildNotesRequest({ text, lang, part: { index: 2, total: 3 } }));
      for (const notes of [whole, part]) {
        expect(validateStudyValue('notes', notes).ok).toBe(true);
        const terms = notes.keyConcepts.map((concept) => concept.term);
        const written = [
          ...terms,
          ...notes.keyConcepts.map((concept) => concept.definition),
          ...notes.sections.flatMap((section) => [section.title, section.summary, ...section.bullets]),
          ...notes.glossary.flatMap((entry) => [entry.term, entry.definition]),
        ];
        for (const pattern of scaffolding[lang]) expect(written.filter((line) => pattern.test(line))).toEqual([]);
        // Every concept is a word of the document itself.
        for (const term of terms) expect(text.toLowerCase()).toContain(term.toLowerCase());
      }
      // The part heading changes nothing: the same document text gives the same notes.
      expect(part).toEqual(whole);
    });

    it('a merge request merges the per-part notes instead of reading the JSON as text', async () => {
      const first = await ask<NotesResult>(buildNotesRequest({ text, lang, part: { index: 1, total: 2 } }));
      const second = await ask<NotesResult>(buildNotesRequest({ text: lang === 'en' ? 'Mitochondria release energy from glucose.' : '미토콘드리아는 포도당에서 에너지를 꺼낸다.', lang, part: { index: 2, total: 2 } }));
      const merged = await ask<NotesResult>(buildMergeNotesRequest({ partials: [first, second], lang }));
      expect(validateStudyValue('notes', merged).ok).toBe(true);
      const terms = merged.keyConcepts.map((concept) => concept.term);
      const partTerms = new Set([...first.keyConcepts, ...second.keyConcepts].map((concept) => concept.term));
      for (const term of terms) expect(partTerms.has(term)).toBe(true);
      expect(new Set(terms).size).toBe(terms.length);
      expect(terms).toEqual(expect.arrayContaining(second.keyConcepts.slice(0, 1).map((concept) => concept.term)));
      expect(merged.keyConcepts.map((concept) => concept.id)).toEqual(terms.map((_, index) => `c${index + 1}`));
      for (const forbidden of ['keyconcepts', 'definition', 'importance', 'glossary']) expect(terms).not.toContain(forbidden);
    });
  });

  describe.each(['en', 'ko'] as const)('questions per part of a long document in %s', (lang) => {
    const parts = splitText(longDocument(6, lang), { budgetTokens: 500 });
    const position = (index: number) => ({ index: index + 1, total: parts.length });

    it.each(['mcq', 'fill'] as const)('%s: two parts asked for the same concepts give no near-duplicates', async (task) => {
      expect(parts.length).toBeGreaterThan(2);
      const notes = await ask<NotesResult>(buildNotesRequest({ text: parts[0] ?? '', lang, part: position(0) }));
      const conceptIds = notes.keyConcepts.map((concept) => concept.id);
      const count = 4;
      const answers = await Promise.all(
        [0, 1].map((index) => ask<McqResult | FillResult>(buildQuestionsRequest({ task, text: parts[index] ?? '', lang, count, notes, part: position(index) }))),
      );
      const texts = answers.map((answer) =>
        answer.questions.map((question) => ('question' in question ? question.question : question.sentence)),
      );
      for (const answer of answers) {
        expect(validateStudyValue(task, answer, { count, conceptIds })).toMatchObject({ ok: true });
        for (const question of answer.questions) expect(conceptIds).toContain(question.conceptId);
      }
      const [first = [], second = []] = texts;
      let highest = 0;
      for (const left of first) for (const right of second) highest = Math.max(highest, textSimilarity(left, right));
      expect(highest).toBeLessThan(nearDuplicateThreshold);
      // Combined as the study module combines them, every question survives the near-duplicate check.
      const questions = answers
        .flatMap((answer): readonly object[] => answer.questions)
        .map((question, index) => ({ ...question, id: `q${index + 1}` }));
      const combined = validateStudyValue(task, { questions }, { count: questions.length, conceptIds });
      expect(combined.ok && combined.value.questions.length).toBe(questions.length);
    });

    it('the same part asked twice gives the same questions (deterministic)', async () => {
      const notes = await ask<NotesResult>(buildNotesRequest({ text: parts[1] ?? '', lang }));
      const request = buildQuestionsRequest({ task: 'mcq', text: parts[1] ?? '', lang, count: 3, notes, part: position(1) });
      expect(await ask<McqResult>(request)).toEqual(await ask<McqResult>(request));
    });
  });
});
