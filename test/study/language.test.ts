/**
 * The language check's threshold, pinned by golden cases. The rule, stated here on its own: count the
 * whitespace-separated words of the prose (definitions, summaries, bullets, questions, options,
 * explanations, hints); a word with any Hangul is Korean, a word of Latin letters is Latin; code in
 * backticks, formulas and letter-digit mixes do not count. `ko` passes with at least 60 % Korean
 * words, `en` with at least 60 % Latin words; fewer than 3 counted words always pass.
 */
import { describe, expect, it } from 'vitest';
import { checkLanguage, detectLang } from '../../src/study/language.js';
import { validateStudyValue } from '../../src/study/index.js';
import type { McqResult, NotesResult, StudyLang } from '../../src/study/index.js';

/** Notes whose only prose is `summary` (term and title carry no prose). */
function notesWith(summary: string): NotesResult {
  return {
    keyConcepts: [{ id: 'c1', term: 'term', definition: '-', importance: 'high' }],
    sections: [{ title: 'Title', summary, bullets: [] }],
    glossary: [],
  };
}

function passes(summary: string, lang: StudyLang): boolean {
  return checkLanguage(notesWith(summary), lang).ok;
}

const korean = (n: number): string => Array.from({ length: n }, () => '한국어').join(' ');
const latin = (n: number): string => Array.from({ length: n }, () => 'english').join(' ');

describe('language check: golden cases', () => {
  it('Korean prose with English technical terms passes for ko and fails for en', () => {
    const text = 'TCP는 연결 지향 프로토콜로, 3-way handshake를 통해 연결을 설정한다. Round Robin은 time quantum 단위로 CPU를 할당한다.';
    expect(passes(text, 'ko')).toBe(true);
    expect(passes(text, 'en')).toBe(false);
  });

  it('English prose fails for ko and passes for en', () => {
    const text = 'Photosynthesis turns light energy into chemical energy stored in glucose.';
    expect(passes(text, 'ko')).toBe(false);
    expect(passes(text, 'en')).toBe(true);
  });

  it('English prose with a Korean gloss passes for en', () => {
    expect(passes('Photosynthesis (광합성) turns light energy into chemical energy stored in glucose.', 'en')).toBe(true);
  });

  it('mixed-script notes around the boundary: 6 of 10 words pass, 5 of 9 fail (both directions)', () => {
    expect(passes(`${korean(6)} ${latin(4)}`, 'ko')).toBe(true); // 60 %
    expect(passes(`${korean(5)} ${latin(4)}`, 'ko')).toBe(false); // 55 %
    expect(passes(`${latin(6)} ${korean(4)}`, 'en')).toBe(true);
    expect(passes(`${latin(5)} ${korean(4)}`, 'en')).toBe(false);
    // Half and half is neither language.
    expect(passes(`${korean(5)} ${latin(5)}`, 'ko')).toBe(false);
    expect(passes(`${korean(5)} ${latin(5)}`, 'en')).toBe(false);
  });

  it('code in backticks, formulas and letter-digit mixes do not count', () => {
    const text = '질량과 에너지는 E=mc^2 관계이다 `const energy = mass * speedOfLight ** 2; return energy` H2O x86 O(n^2)';
    expect(passes(text, 'ko')).toBe(true);
  });

  it('other scripts count against both languages', () => {
    expect(passes('Фотосинтез превращает энергию света в химическую энергию', 'en')).toBe(false);
    expect(passes('光合作用 将 光能 转化 为 化学能', 'ko')).toBe(false);
  });

  it('too little prose to judge passes', () => {
    expect(passes('Hello world', 'ko')).toBe(true);
    expect(passes('', 'en')).toBe(true);
  });

  it('mcq: English option terms are fine when stems and explanations are Korean', () => {
    const mcq: McqResult = {
      questions: [
        {
          id: 'q1',
          question: '다음 중 연결 지향 전송 계층 프로토콜은 무엇인가?',
          options: { A: 'TCP', B: 'UDP', C: 'ICMP', D: 'ARP' },
          answer: 'A',
          explanation: 'TCP는 연결을 설정한 뒤 데이터를 보낸다.',
          conceptId: 'c1',
          level: 1,
          questionType: 'concept',
        },
      ],
    };
    expect(checkLanguage(mcq, 'ko').ok).toBe(true);
  });

  it('the reason says what was wrong, and validateStudyValue fails with it', () => {
    const verdict = validateStudyValue('notes', notesWith('Photosynthesis turns light energy into chemical energy.'), { lang: 'ko' });
    expect(verdict.ok).toBe(false);
    if (verdict.ok) return;
    expect(verdict.errors[0]).toMatch(/^language: .*Korean.*only 0% of the words are, at least 60% needed/);
  });

  it('terms and titles are not prose: English ones never fail a Korean answer', () => {
    const notes: NotesResult = {
      keyConcepts: [{ id: 'c1', term: 'Photosynthesis and cellular respiration', definition: '빛 에너지를 화학 에너지로 바꾸는 과정이다.', importance: 'high' }],
      sections: [{ title: 'Photosynthesis in green plants', summary: '식물은 엽록소로 빛을 흡수한다.', bullets: ['포도당에 에너지가 저장된다.'] }],
      glossary: [{ term: 'Chlorophyll pigment', definition: '빛을 흡수하는 색소이다.' }],
    };
    expect(checkLanguage(notes, 'ko').ok).toBe(true);
  });
});

/**
 * Detection when a request gives no lang, stated on its own: in the first 20 000 characters, Hangul
 * syllables (U+AC00–U+D7A3) at least half the ASCII letters (either case) → ko, else en.
 */
describe('detectLang', () => {
  it('ko when the Hangul syllables are at least half the Latin letters, en below', () => {
    expect(detectLang('가나' + 'abcd')).toBe('ko');
    expect(detectLang('가나' + 'ABCDE')).toBe('en');
    expect(detectLang('가' + 'Ab')).toBe('ko');
    expect(detectLang('1234 !?')).toBe('en');
    expect(detectLang('')).toBe('en');
  });

  it('counts neither jamo, accented letters nor characters next to the ASCII letter ranges', () => {
    expect(detectLang('ㄱㄴㄷ a')).toBe('en');
    expect(detectLang('가 éèêëàâ@[`{')).toBe('ko');
  });

  it('reads the first 20 000 characters only', () => {
    expect(detectLang(`${'가'.repeat(20_000)}${'a'.repeat(100_000)}`)).toBe('ko');
    expect(detectLang(`${'a'.repeat(20_000)}${'가'.repeat(100_000)}`)).toBe('en');
  });
});
