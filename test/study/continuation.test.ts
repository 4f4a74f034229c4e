import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { continuationMarker, continuationPointOf, continuationRequest, mergeContinuation } from '../../src/study/continuation.js';
import { buildNotesRequest } from '../../src/study/prompts.js';
import { validateStudyValue } from '../../src/study/validate.js';
import { extractJson } from '../../src/study/extract-json.js';

/**
 * The oracle writes the answer itself, piece by piece, and notes where each element ends: the cut of any
 * prefix of it must be the text up to the last element end at or before the prefix's length.
 */

const word = fc.stringMatching(/^[a-z]{3,8}$/);
const tricky = fc.array(fc.constantFrom('a', ' ', '"', '\\', '}', ']', ',', '한'), { minLength: 1, maxLength: 8 }).map((chars) => `x${chars.join('')}`);

const notesArb = fc.record({
  keyConcepts: fc.array(fc.record({ id: word, term: tricky, definition: word, importance: fc.constantFrom('high', 'low') }), { minLength: 1, maxLength: 5 }),
  sections: fc.array(fc.record({ title: tricky, summary: word, bullets: fc.array(tricky, { maxLength: 2 }) }), { maxLength: 3 }),
  glossary: fc.array(fc.record({ term: tricky, definition: word }), { maxLength: 3 }),
});

type Notes = { keyConcepts: unknown[]; sections: unknown[]; glossary: unknown[] };

/** The compact JSON of `notes` and the offset just after each list element, written out by hand. */
function written(notes: Notes): { text: string; ends: number[] } {
  let text = '{';
  const ends: number[] = [];
  (['keyConcepts', 'sections', 'glossary'] as const).forEach((list, listIndex) => {
    text += `${listIndex === 0 ? '' : ','}"${list}":[`;
    notes[list].forEach((element, index) => {
      text += `${index === 0 ? '' : ','}${JSON.stringify(element)}`;
      ends.push(text.length);
    });
    text += ']';
  });
  return { text: `${text}}`, ends };
}

describe('continuationPointOf', () => {
  it('cuts any partial answer back to the end of its last complete element', () => {
    fc.assert(
      fc.property(notesArb, fc.nat(), fc.constantFrom('', '```json\n', 'Sure: '), (notes, at, lead) => {
        const { text, ends } = written(notes);
        const length = at % text.length; // a strict prefix: the JSON has not closed
        const expectedEnd = ends.filter((end) => end <= length).at(-1);
        const point = continuationPointOf('notes', lead + text.slice(0, length));
        if (expectedEnd === undefined) expect(point).toBeUndefined();
        else expect(point).toEqual({ prefix: text.slice(0, expectedEnd), elements: ends.filter((end) => end <= length).length });
      }),
      { numRuns: 400 },
    );
  });

  it('has no cut for an answer whose JSON already closed (nothing to continue)', () => {
    expect(continuationPointOf('notes', '{"keyConcepts":[{"term":"t","definition":"d"}]}')).toBeUndefined();
  });
});

describe('mergeContinuation', () => {
  it('prefix + the rest, however the rest comes, is the whole answer, valid against its schema', () => {
    fc.assert(
      fc.property(notesArb, fc.nat(), fc.constantFrom('plain', 'fenced', 'restarted', 'repeats-last'), (notes, at, style) => {
        const { text, ends } = written(notes);
        const point = continuationPointOf('notes', text.slice(0, at % text.length));
        if (point === undefined) return;
        const rest = text.slice(point.prefix.length);
        let continuation = rest;
        if (style === 'fenced') continuation = `\`\`\`json\n${rest}\n\`\`\``;
        if (style === 'restarted') continuation = text;
        if (style === 'repeats-last') {
          const endIndex = ends.indexOf(point.prefix.length);
          const previousEnd = endIndex > 0 ? (ends[endIndex - 1] as number) : point.prefix.indexOf('[') + 1;
          // The model writes its last element again (after the comma or bracket before it) and goes on.
          const lastElement = text.slice(previousEnd, point.prefix.length).replace(/^,/, '');
          if (lastElement.length < 16) return;
          continuation = `${lastElement}${rest}`;
        }
        const merged = mergeContinuation(point.prefix, continuation);
        expect(merged).toBe(text);
        const parsed = extractJson(merged);
        expect(parsed.ok && validateStudyValue('notes', parsed.value).ok).toBe(notes.keyConcepts.every((concept, index, all) => all.findIndex((other) => (other as { id: string }).id === (concept as { id: string }).id) === index));
      }),
      { numRuns: 400 },
    );
  });

  it('keeps a short accidental overlap ("}" after "}")', () => {
    expect(mergeContinuation('{"a":[{"b":1}', '],"c":{}}')).toBe('{"a":[{"b":1}],"c":{}}');
    expect(mergeContinuation('{"a":[{"b":{}}', '}]}')).toBe('{"a":[{"b":{}}}]}');
  });
});

describe('continuationRequest', () => {
  it('keeps the original request and adds the prefix as the answer so far, then the instruction with its marker', () => {
    const original = buildNotesRequest({ text: 'Paging splits memory into pages.', lang: 'en' });
    const request = continuationRequest(original, '{"keyConcepts":[{"id":"c1"}');
    expect(request.system).toBe(original.system);
    expect(request.maxOutputTokens).toBe(original.maxOutputTokens);
    expect(request.messages.slice(0, original.messages.length)).toEqual(original.messages);
    expect(request.messages.at(-2)).toEqual({ role: 'assistant', content: '{"keyConcepts":[{"id":"c1"}' });
    const last = request.messages.at(-1);
    expect(last?.role).toBe('user');
    expect(last?.content).toContain('Continue it exactly');
    expect(last?.content).toContain(`${continuationMarker} {"prefixChars":27}`);
  });

  it('asks in Korean for a Korean answer', () => {
    const request = continuationRequest(buildNotesRequest({ text: '페이징은 메모리를 나눈다.', lang: 'ko' }), '{"keyConcepts":[{"id":"c1"}');
    expect(request.messages.at(-1)?.content).toMatch(/이어 쓰세요/);
  });
});
