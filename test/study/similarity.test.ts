import { describe, expect, it } from 'vitest';
import { checkMcq } from '../../src/study/quality.js';
import { nearDuplicateThreshold, similarityTokens, textSimilarity } from '../../src/study/similarity.js';
import type { McqQuestion } from '../../src/study/index.js';

describe('Korean-aware similarity', () => {
  it('gives Korean text a non-empty token set (the original English-only regex gave none)', () => {
    expect(similarityTokens('교착 상태의 네 가지 조건은 무엇인가?').size).toBeGreaterThan(3);
  });

  it.each([
    ['페이지 교체 알고리즘에서 LRU는 무엇을 기준으로 교체하는가?', '페이지 교체 알고리즘의 LRU가 무엇을 기준으로 교체하는가?'],
    ['운영체제의 주요 기능은 무엇인가?', '운영체제가 주요 기능을 무엇인가?'],
    ['교착 상태가 발생하는 조건은?', '교착 상태는 발생하는 조건을?'],
  ])('treats questions that differ only by particles as duplicates: %s', (left, right) => {
    expect(textSimilarity(left, right)).toBeGreaterThanOrEqual(nearDuplicateThreshold);
  });

  it.each([
    ['페이지 교체 알고리즘에서 LRU는 무엇을 기준으로 교체하는가?', '프로세스와 스레드의 차이는 무엇인가?'],
    ['TLB가 저장하는 것은 무엇인가?', '스와핑이 일어나는 저장 장치는 어디인가?'],
    ['교착 상태의 필요 조건이 아닌 것은?', '교착 상태를 회피하는 알고리즘은?'],
  ])('keeps different Korean questions apart: %s', (left, right) => {
    expect(textSimilarity(left, right)).toBeLessThan(nearDuplicateThreshold);
  });

  it('handles Latin text alike, case-insensitively', () => {
    expect(textSimilarity('What is the main function of an operating system?', 'what is the MAIN function of an operating system')).toBe(1);
    expect(textSimilarity('What is a process?', 'How does paging reduce fragmentation?')).toBeLessThan(0.2);
  });

  it('drops the later of two Korean near-duplicates in the MCQ check', () => {
    const question = (id: string, text: string): McqQuestion => ({
      id, question: text, options: { A: '1', B: '2', C: '3', D: '4' }, answer: 'A', explanation: '', conceptId: 'c1', level: 1, questionType: 'concept',
    });
    const checked = checkMcq(
      { questions: [question('q1', '운영체제의 주요 기능은 무엇인가?'), question('q2', '운영체제가 주요 기능을 무엇인가?'), question('q3', '프로세스와 스레드의 차이는 무엇인가?')] },
      { count: 3, conceptIds: ['c1'] },
    );
    expect(checked.ok && checked.value.questions.map((kept) => kept.id)).toEqual(['q1', 'q3']);
  });
});
