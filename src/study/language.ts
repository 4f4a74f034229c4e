import type { Validation } from '../actors/types.js';
import type { FillResult, McqResult, NotesResult, StudyLang } from './schemas.js';

/**
 * Is the material in the language asked for? Its prose is counted word by word (whitespace-separated):
 * a word with any Hangul in it is Korean (so `TCP는` is Korean: particles glue to English terms), a
 * word of Latin letters is Latin, a word of other letters (Hanja, kana, Cyrillic, …) is other. Code
 * in backticks, formulas (`E=mc^2`, `O(n^2)`, `a_i`), letter-digit mixes (`H2O`, `x86`) and words
 * without letters count for nothing. `ko` needs at least `minLanguagePercent` of the counted words Korean,
 * `en` at least `minLanguagePercent` Latin. One pass over the text: linear in its length.
 */

/** Fewest percent of counted words in the asked script (pinned by test/study/language.test.ts). */
export const minLanguagePercent = 60;
/** Below this many counted words the material is too short to judge and passes. */
export const minJudgedWords = 3;

export interface ScriptCounts {
  hangul: number;
  latin: number;
  other: number;
}

const hangulRanges: readonly (readonly [number, number])[] = [
  [0x1100, 0x11ff],
  [0x3130, 0x318f],
  [0xa960, 0xa97f],
  [0xac00, 0xd7a3],
  [0xd7b0, 0xd7ff],
];

function isHangul(code: number): boolean {
  return hangulRanges.some(([low, high]) => code >= low && code <= high);
}

function isLatinLetter(code: number): boolean {
  return (
    (code >= 0x41 && code <= 0x5a) ||
    (code >= 0x61 && code <= 0x7a) ||
    (code >= 0xc0 && code <= 0x24f && code !== 0xd7 && code !== 0xf7) ||
    (code >= 0x1e00 && code <= 0x1eff)
  );
}

/** Characters that make a word a formula or code rather than prose. */
const formulaMarks = new Set('=<>+*/^_\\{}[]|#$%&@~');
const otherLetter = /\p{L}/u;

interface WordState {
  hangul: boolean;
  latin: boolean;
  other: boolean;
  digit: boolean;
  formula: boolean;
}

function emptyWord(): WordState {
  return { hangul: false, latin: false, other: false, digit: false, formula: false };
}

function countWord(word: WordState, counts: ScriptCounts): void {
  if (word.hangul) counts.hangul += 1;
  else if (word.formula || (word.latin && word.digit)) return;
  else if (word.latin) counts.latin += 1;
  else if (word.other) counts.other += 1;
}

/** Adds the words of `text` to `counts`. */
export function countScriptWords(text: string, counts: ScriptCounts): ScriptCounts {
  let word = emptyWord();
  let inCode = false;
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    if (char === '`') {
      countWord(word, counts);
      word = emptyWord();
      inCode = !inCode;
    } else if (inCode) {
      continue;
    } else if (/\s/.test(char)) {
      countWord(word, counts);
      word = emptyWord();
    } else if (isHangul(code)) word.hangul = true;
    else if (isLatinLetter(code)) word.latin = true;
    else if (code >= 0x30 && code <= 0x39) word.digit = true;
    else if (formulaMarks.has(char)) word.formula = true;
    else if (code > 0x7f && otherLetter.test(char)) word.other = true;
  }
  if (!inCode) countWord(word, counts);
  return counts;
}

/** The prose of the material: what a student reads as sentences (terms, titles and answers may be names). */
export function proseOf(value: NotesResult | McqResult | FillResult): string[] {
  if ('keyConcepts' in value) {
    return [
      ...value.keyConcepts.map((concept) => concept.definition),
      ...value.sections.flatMap((section) => [section.summary, ...section.bullets]),
      ...value.glossary.map((entry) => entry.definition),
    ];
  }
  return value.questions.flatMap((question) =>
    'options' in question
      ? [question.question, question.options.A, question.options.B, question.options.C, question.options.D, question.explanation]
      : [question.sentence, question.hint],
  );
}

const languageNames: Readonly<Record<StudyLang, string>> = { ko: 'Korean (Hangul)', en: 'English (Latin script)' };

/** `{ok:true}` when the prose is predominantly in `lang`'s script; else the reason, for the re-ask. */
export function checkLanguage<T extends NotesResult | McqResult | FillResult>(value: T, lang: StudyLang): Validation<T> {
  const counts: ScriptCounts = { hangul: 0, latin: 0, other: 0 };
  for (const text of proseOf(value)) countScriptWords(text, counts);
  const total = counts.hangul + counts.latin + counts.other;
  if (total < minJudgedWords) return { ok: true, value };
  const inScript = lang === 'ko' ? counts.hangul : counts.latin;
  if (inScript * 100 >= minLanguagePercent * total) return { ok: true, value };
  const percent = Math.floor((inScript / total) * 100);
  return {
    ok: false,
    errors: [
      `language: write every definition, summary, bullet, question, option and explanation in ${languageNames[lang]} ` +
        `(lang "${lang}"); only ${percent}% of the words are, at least ${minLanguagePercent}% needed` +
        (lang === 'ko' ? '; English technical terms, formulas and code may stay as they are' : ''),
    ],
  };
}

/** How the language of a request was decided: given in `options.lang`, or detected from the document. */
export type LangSource = 'request' | 'detected';

/** Characters of the document read by `detectLang` (its first ones): bounded work whatever the size. */
export const detectSampleChars = 20_000;

/** The document's language when the request gives none: Hangul syllables at least half the Latin letters → `ko`, else `en`. */
export function detectLang(text: string): StudyLang {
  // A counting loop: a regular expression's match array would hold one string per letter (20 000 of them).
  const end = Math.min(text.length, detectSampleChars);
  let hangul = 0;
  let latin = 0;
  for (let index = 0; index < end; index += 1) {
    const code = text.charCodeAt(index);
    if (code >= 0xac00 && code <= 0xd7a3) hangul += 1;
    else if ((code | 0x20) >= 0x61 && (code | 0x20) <= 0x7a) latin += 1;
  }
  return hangul * 2 >= latin && hangul > 0 ? 'ko' : 'en';
}

/** The request's language, or the detected one, with where it came from (reported in `meta`). */
export function resolveLang(requested: StudyLang | undefined, text: string): { readonly lang: StudyLang; readonly langSource: LangSource } {
  return requested === undefined ? { lang: detectLang(text), langSource: 'detected' } : { lang: requested, langSource: 'request' };
}
