import { describe, expect, it } from 'vitest';
import { extractJson } from '../../src/study/extract-json.js';
import { normalizeFill, normalizeMcq, normalizeNotes } from '../../src/study/normalize.js';
import { studyJsonSchema } from '../../src/study/index.js';

describe('extractJson', () => {
  it.each([
    ['a bare object', '{"a":1}', { a: 1 }],
    ['a fenced object', '```json\n{"a":1}\n```', { a: 1 }],
    ['a fence without a language', 'Here:\n```\n{"a":[1,2]}\n```\nDone.', { a: [1, 2] }],
    ['prose around an object', 'Sure, here it is: {"a":"x}"} Hope it helps {not json}', { a: 'x}' }],
    ['a trailing comma', '{"a":[1,2,],}', { a: [1, 2] }],
    ['a top-level array', '[{"id":"q1"}]', [{ id: 'q1' }]],
    ['a citation before the object', 'See [1].\n{"a":1}', { a: 1 }],
  ])('reads %s', (_name, text, expected) => {
    expect(extractJson(text)).toEqual({ ok: true, value: expected });
  });

  it.each([
    ['empty', '   ', /empty/],
    ['cut off', '{"a":[1,2', /incomplete/],
    ['no JSON at all', 'I cannot help with that.', /no JSON object/],
  ])('explains %s', (_name, text, message) => {
    const result = extractJson(text);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatch(message);
  });
});

describe('normalization', () => {
  it('turns missing arrays into []', () => {
    expect(normalizeNotes({ keyConcepts: [{ id: 'c1', term: 't', definition: 'd', importance: 'low' }] })).toEqual({
      keyConcepts: [{ id: 'c1', term: 't', definition: 'd', importance: 'low' }],
      sections: [],
      glossary: [],
    });
    expect(normalizeMcq({})).toEqual({ questions: [] });
  });

  it('coerces numeric strings where the schema wants numbers and leaves words it cannot map', () => {
    const result = normalizeFill({ questions: [{ level: '4' }, { level: 'hard' }, { level: 'very' }] }) as { questions: { level: unknown }[] };
    expect(result.questions.map((question) => question.level)).toEqual([4, 4, 'very']);
  });

  it('maps an answer given as a lowercase letter, a labelled letter, or the option text', () => {
    const options = { A: 'Paging', B: 'Segmentation', C: 'Swapping', D: 'Caching' };
    const answers = ['d', '(B)', 'C. Swapping', ' paging '].map(
      (answer) => (normalizeMcq({ questions: [{ options, answer }] }) as { questions: { answer: unknown }[] }).questions[0]?.answer,
    );
    expect(answers).toEqual(['D', 'B', 'C', 'A']);
  });

  it('leaves an options list of the wrong length for the schema to reject', () => {
    const result = normalizeMcq({ questions: [{ options: ['a', 'b', 'c'] }] }) as { questions: { options: unknown }[] };
    expect(result.questions[0]?.options).toEqual(['a', 'b', 'c']);
  });

  it('unwraps a result wrapped in one extra object', () => {
    const result = normalizeNotes({ notes: { key_concepts: [{ id: 'c1', term: 't', definition: 'd' }] } }) as { keyConcepts: unknown[] };
    expect(result.keyConcepts).toHaveLength(1);
  });
});

describe('provider JSON schemas', () => {
  it.each(['notes', 'mcq', 'fill'] as const)('%s is a closed object schema with every field required', (task) => {
    const schema = studyJsonSchema(task) as { type: string; required: string[]; additionalProperties: boolean };
    expect(schema.type).toBe('object');
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required.length).toBeGreaterThan(0);
  });
});
