import { describe, expect, it } from 'vitest';
import { buildMergeNotesRequest, buildNotesRequest, buildQuestionsRequest, type NotesResult } from '../../src/study/index.js';

const notes: NotesResult = { keyConcepts: [{ id: 'c1', term: '교착 상태', definition: '서로 기다림', importance: 'high' }, { id: 'c2', term: '기아', definition: '무한 대기', importance: 'low' }], sections: [], glossary: [] };
const markerLines = (system: string): string[] => system.split('\n').filter((line) => line.startsWith('study-helper-task:'));

describe('prompts', () => {
  it.each([
    ['notes ko', buildNotesRequest({ text: '본문', lang: 'ko' }), 'study-helper-task: {"task":"notes","lang":"ko"}'],
    ['merge en', buildMergeNotesRequest({ partials: [notes], lang: 'en' }), 'study-helper-task: {"task":"notes","lang":"en"}'],
    ['mcq ko', buildQuestionsRequest({ task: 'mcq', text: '본문', lang: 'ko', count: 5, notes }), 'study-helper-task: {"task":"mcq","lang":"ko","count":5,"conceptIds":["c1","c2"]}'],
    ['fill en', buildQuestionsRequest({ task: 'fill', text: 'body', lang: 'en', count: 3, notes }), 'study-helper-task: {"task":"fill","lang":"en","count":3,"conceptIds":["c1","c2"]}'],
  ])('%s carries exactly one marker line', (_name, request, marker) => {
    expect(markerLines(request.system)).toEqual([marker]);
  });

  it('lists the notes concepts in question prompts and writes Korean instructions for ko', () => {
    const request = buildQuestionsRequest({ task: 'mcq', text: '본문', lang: 'ko', count: 5, notes });
    expect(request.messages[0]?.content).toContain('c2: 기아');
    expect(request.system).toMatch(/객관식 문제 5개/);
    expect(request.jsonSchema).toMatchObject({ type: 'object', required: ['questions'] });
  });

  it('tells a part prompt which part it is', () => {
    expect(buildNotesRequest({ text: 'body', lang: 'en', part: { index: 2, total: 4 } }).messages[0]?.content).toContain('part 2 of 4');
  });
});
