import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StudyItemExtractor, type StudyItem } from '../../src/study/stream-items.js';
import { validateStudyValue } from '../../src/study/validate.js';
import type { FillQuestion, KeyConcept, McqQuestion } from '../../src/study/schemas.js';

/**
 * The oracle is the generated answer itself: every element it holds is valid by construction (unique ids,
 * distinct options, known concept ids, question texts made of words no other question uses), so the items
 * must be exactly its elements, in the order written, once each, whatever way the text is split.
 */

const word = fc.stringMatching(/^[a-z]{3,8}$/);
const prose = fc.array(word, { minLength: 1, maxLength: 5 }).map((words) => words.join(' '));
// Strings with characters that matter to a JSON tokenizer: quotes, backslashes, brackets, commas, Hangul.
const trickyText = fc
  .array(fc.constantFrom('a', 'b', ' ', '"', '\\', '{', '}', '[', ']', ',', ':', '한', '\n', 'é', '😀'), { minLength: 1, maxLength: 12 })
  .map((chars) => `x${chars.join('')}`.trim() || 'x');

const conceptIds = ['c1', 'c2', 'c3'];

const notesArb = fc.record({
  keyConcepts: fc.array(fc.record({ term: trickyText, definition: prose, importance: fc.constantFrom('high', 'medium', 'low') }), { minLength: 1, maxLength: 6 }),
  sections: fc.array(fc.record({ title: trickyText, summary: prose, bullets: fc.array(prose, { maxLength: 3 }) }), { maxLength: 4 }),
  glossary: fc.array(fc.record({ term: trickyText, definition: prose }), { maxLength: 4 }),
}).map((notes) => ({ ...notes, keyConcepts: notes.keyConcepts.map((concept, index): KeyConcept => ({ id: `c${index + 1}`, ...concept })) }));

/** Words no other question uses: question i is made of `u{i}x…` tokens, so no two are near-duplicates. */
const uniqueStem = (index: number, words: readonly string[]): string => words.map((item) => `u${index}${item}`).join(' ');

const mcqArb = fc.array(fc.tuple(fc.array(word, { minLength: 2, maxLength: 4 }), fc.constantFrom('A', 'B', 'C', 'D'), fc.constantFrom(...conceptIds), fc.integer({ min: 1, max: 5 })), { minLength: 1, maxLength: 8 }).map((rows) => ({
  questions: rows.map(([words, answer, conceptId, level], index): McqQuestion => ({
    id: `q${index + 1}`,
    question: `${uniqueStem(index, words)}?`,
    options: { A: `one ${index}`, B: `two "${index}"`, C: `three [${index}]`, D: `four {${index}}` },
    answer: answer as McqQuestion['answer'],
    explanation: 'because',
    conceptId,
    level,
    questionType: level > 3 ? 'application' : 'concept',
  })),
}));

const fillArb = fc.array(fc.tuple(fc.array(word, { minLength: 2, maxLength: 4 }), word, fc.constantFrom(...conceptIds)), { minLength: 1, maxLength: 8 }).map((rows) => ({
  questions: rows.map(([words, answer, conceptId], index): FillQuestion => ({
    id: `q${index + 1}`,
    sentence: `${uniqueStem(index, words)} ___ end.`,
    answer,
    acceptableAnswers: [answer],
    hint: 'a hint',
    conceptId,
    level: 2,
    questionType: 'concept',
  })),
}));

/** The elements in the order they are written in the JSON text (the oracle, written out). */
function notesElements(notes: { keyConcepts: unknown[]; sections: unknown[]; glossary: unknown[] }): StudyItem[] {
  return [
    ...notes.keyConcepts.map((value) => ({ kind: 'keyConcept', value }) as StudyItem),
    ...notes.sections.map((value) => ({ kind: 'section', value }) as StudyItem),
    ...notes.glossary.map((value) => ({ kind: 'glossaryEntry', value }) as StudyItem),
  ];
}
const questionElements = (result: { questions: unknown[] }): StudyItem[] => result.questions.map((value) => ({ kind: 'question', value }) as StudyItem);

/** The text cut at the given (sorted, deduplicated) positions. */
function splitAt(text: string, cuts: readonly number[]): string[] {
  const points = [...new Set(cuts.map((cut) => cut % (text.length + 1)))].sort((a, b) => a - b);
  const pieces: string[] = [];
  let last = 0;
  for (const point of points) {
    pieces.push(text.slice(last, point));
    last = point;
  }
  pieces.push(text.slice(last));
  return pieces;
}

const layout = fc.constantFrom(
  (json: string) => json,
  (json: string) => `\`\`\`json\n${json}\n\`\`\``,
  (json: string) => `Here is the material:\n\n${json}\n\nGood luck!`,
  (json: string) => `\n  ${json}  \n`,
);
const indent = fc.constantFrom(undefined, 2, '\t');

function extractAll(task: 'notes' | 'mcq' | 'fill', pieces: readonly string[], count = 50): StudyItem[] {
  const extractor = new StudyItemExtractor({ task, questions: { count, conceptIds } });
  return pieces.flatMap((piece) => extractor.push(piece));
}

describe('StudyItemExtractor: any split of a valid answer yields exactly its elements, in order, once each', () => {
  it('notes', () => {
    fc.assert(
      fc.property(notesArb, layout, indent, fc.array(fc.nat(), { maxLength: 40 }), (notes, wrap, space, cuts) => {
        const text = wrap(JSON.stringify(notes, null, space));
        expect(extractAll('notes', splitAt(text, cuts))).toEqual(notesElements(notes));
      }),
      { numRuns: 300 },
    );
  });

  it('mcq', () => {
    fc.assert(
      fc.property(mcqArb, layout, indent, fc.array(fc.nat(), { maxLength: 40 }), (mcq, wrap, space, cuts) => {
        const text = wrap(JSON.stringify(mcq, null, space));
        expect(extractAll('mcq', splitAt(text, cuts))).toEqual(questionElements(mcq));
      }),
      { numRuns: 300 },
    );
  });

  it('fill, also as a bare top-level array', () => {
    fc.assert(
      fc.property(fillArb, fc.boolean(), fc.array(fc.nat(), { maxLength: 40 }), (fill, bare, cuts) => {
        const text = JSON.stringify(bare ? fill.questions : fill);
        expect(extractAll('fill', splitAt(text, cuts))).toEqual(questionElements(fill));
      }),
      { numRuns: 200 },
    );
  });

  it('one character at a time gives what the whole text at once gives', () => {
    fc.assert(
      fc.property(notesArb, (notes) => {
        const text = JSON.stringify(notes);
        expect(extractAll('notes', [...text])).toEqual(notesElements(notes));
      }),
      { numRuns: 50 },
    );
  });
});

describe('StudyItemExtractor: elements are sent when complete, and only when valid', () => {
  it('sends an element the moment its closing bracket arrives, not before', () => {
    const extractor = new StudyItemExtractor({ task: 'notes' });
    expect(extractor.push('{"keyConcepts":[{"id":"c1","term":"Paging","definition":"Fixed-size blocks","importance":"high"')).toEqual([]);
    expect(extractor.push('}')).toEqual([{ kind: 'keyConcept', value: { id: 'c1', term: 'Paging', definition: 'Fixed-size blocks', importance: 'high' } }]);
    expect(extractor.push(',{"id":"c2","term":"TLB"')).toEqual([]);
  });

  it('normalizes each element as the whole answer is normalized (legacy names, defaults, ids by position)', () => {
    const extractor = new StudyItemExtractor({ task: 'notes' });
    const items = extractor.push('{"key_concepts":[{"name":" Paging ","brief_def":"Blocks","importance":"높음"},{"term":"TLB","definition":"Cache"}],"sections":[{"heading":"Memory","bullets":"one point"}],"terms":[{"word":"page"}]}');
    expect(items).toEqual([
      { kind: 'keyConcept', value: { id: 'c1', term: 'Paging', definition: 'Blocks', importance: 'high' } },
      { kind: 'keyConcept', value: { id: 'c2', term: 'TLB', definition: 'Cache', importance: 'medium' } },
      { kind: 'section', value: { title: 'Memory', summary: '', bullets: ['one point'] } },
      { kind: 'glossaryEntry', value: { term: 'page', definition: '' } },
    ]);
  });

  it('reads lists inside one wrapper object', () => {
    const extractor = new StudyItemExtractor({ task: 'mcq', questions: { count: 5, conceptIds: ['c1'] } });
    const question = { id: 'q1', question: 'What?', options: ['A) a', 'B) b', 'C) c', 'D) d'], correct_answer: '(b)', explanation: '', concept_id: 'c1', difficulty: 'easy', type: 'concept' };
    expect(extractor.push(JSON.stringify({ result: { questions: [question] } }))).toEqual([
      {
        kind: 'question',
        value: { id: 'q1', question: 'What?', options: { A: 'a', B: 'b', C: 'c', D: 'd' }, answer: 'B', explanation: '', conceptId: 'c1', level: 2, questionType: 'concept' },
      },
    ]);
  });

  it('skips what the schema or the per-question checks drop, and stops at count', () => {
    const base = { options: { A: 'a', B: 'b', C: 'c', D: 'd' }, answer: 'A', explanation: '', level: 2, questionType: 'concept' };
    const questions = [
      { ...base, id: 'q1', question: 'alpha beta gamma', conceptId: 'c1' },
      { ...base, id: 'q2', question: 'delta epsilon zeta', conceptId: 'c9' }, // not a notes concept
      { ...base, id: 'q3', question: 'eta theta iota', conceptId: 'c1', options: { A: 'x', B: 'X', C: 'c', D: 'd' } }, // repeated option
      { ...base, id: 'q4', question: 'alpha beta gamma', conceptId: 'c1' }, // near-duplicate of q1
      { ...base, id: 'q5', question: 'kappa lambda mu', conceptId: 'c1', level: 9 }, // schema: level too big
      { ...base, id: 'q1', question: 'nu xi omicron', conceptId: 'c1' }, // repeated id: renamed
      { ...base, id: 'q7', question: 'pi rho sigma', conceptId: 'c1' }, // over count
    ];
    const extractor = new StudyItemExtractor({ task: 'mcq', questions: { count: 2, conceptIds: ['c1'] } });
    const items = extractor.push(JSON.stringify({ questions }));
    expect(items.map((item) => (item.value as McqQuestion).id)).toEqual(['q1', 'q1-2']);
    expect((items[1]?.value as McqQuestion).question).toBe('nu xi omicron');
  });

  it('sends a repeated key concept id once (the first)', () => {
    const extractor = new StudyItemExtractor({ task: 'notes' });
    const items = extractor.push('{"keyConcepts":[{"id":"c1","term":"a","definition":"x"},{"id":"c1","term":"b","definition":"y"}]}');
    expect(items.map((item) => (item.value as KeyConcept).term)).toEqual(['a']);
  });

  it('ignores lists under other names, values that are not objects, and a second list of one kind', () => {
    const extractor = new StudyItemExtractor({ task: 'notes' });
    const text = '{"keyConcepts":[1,"two",null,{"term":"t","definition":"d"}],"meta":{"sections":[{"title":"no"}]},"sections":[],"glossary":[{"term":"g"}],"terms":[{"term":"h"}]}';
    expect(extractor.push(text)).toEqual([
      { kind: 'keyConcept', value: { id: 'c4', term: 't', definition: 'd', importance: 'medium' } },
      { kind: 'glossaryEntry', value: { term: 'g', definition: '' } },
    ]);
  });

  it('ignores a "[" in prose before the object and anything after the JSON closes', () => {
    const extractor = new StudyItemExtractor({ task: 'notes' });
    const items = extractor.push('See [1]. {"keyConcepts":[{"term":"t","definition":"d"}]} and {"keyConcepts":[{"term":"u","definition":"e"}]}');
    expect(items.map((item) => (item.value as KeyConcept).term)).toEqual(['t']);
    expect(extractor.finished).toBe(true);
  });

  it('stops (no items, no continuation) past maxChars and maxDepth', () => {
    const long = new StudyItemExtractor({ task: 'notes', maxChars: 40 });
    expect(long.push('{"keyConcepts":[{"term":"t","definition":"d"},{"term":"u","definition":"a long definition"}]}')).toEqual([]);
    expect(long.continuationPoint()).toBeUndefined();
    const deep = new StudyItemExtractor({ task: 'notes', maxDepth: 4 });
    expect(deep.push('{"keyConcepts":[{"term":"t","definition":"d","x":[[1]]}]}')).toEqual([]);
  });
});

describe('StudyItemExtractor agrees with the whole answer\'s validation', () => {
  it('sends exactly the questions validateStudyValue keeps, for answers with dropped questions', () => {
    const base = { options: { A: 'a', B: 'b', C: 'c', D: 'd' }, answer: 'A', explanation: '', level: 2, questionType: 'concept' };
    const candidate = fc.record({
      stem: fc.constantFrom('alpha beta gamma', 'delta epsilon zeta', 'eta theta iota', 'kappa lambda mu'),
      conceptId: fc.constantFrom('c1', 'c2', 'c9'),
      id: fc.constantFrom('q1', 'q2', 'q3', undefined),
      repeatOption: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(candidate, { minLength: 1, maxLength: 8 }), fc.integer({ min: 1, max: 6 }), (rows, count) => {
        const questions = rows.map((row) => ({ ...base, question: row.stem, conceptId: row.conceptId, ...(row.id === undefined ? {} : { id: row.id }), ...(row.repeatOption ? { options: { A: 'a', B: 'A', C: 'c', D: 'd' } } : {}) }));
        const items = new StudyItemExtractor({ task: 'mcq', questions: { count, conceptIds: ['c1', 'c2'] } }).push(JSON.stringify({ questions }));
        const whole = validateStudyValue('mcq', { questions }, { count, conceptIds: ['c1', 'c2'] });
        if (whole.ok) expect(items.map((item) => item.value)).toEqual(whole.value.questions);
      }),
      { numRuns: 300 },
    );
  });

  it('follows the lists of a wrapper under the root\'s first key', () => {
    const extractor = new StudyItemExtractor({ task: 'notes' });
    expect(extractor.push('{"notes":{"keyConcepts":[{"term":"t","definition":"d"}]}}')).toEqual([
      { kind: 'keyConcept', value: { id: 'c1', term: 't', definition: 'd', importance: 'medium' } },
    ]);
  });
});
