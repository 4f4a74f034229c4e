import type { Validation } from '../actors/types.js';
import type { FillResult, McqResult, NotesResult, StudyLang } from './schemas.js';
import { isSpace } from './whitespace.js';

/**
 * Is the material in the language asked for? Its prose is counted word by word (whitespace-separated):
 * a word with any Hangul in it is Korean (so `TCP는` is Korean: particles glue to English terms), a
 * word of Latin letters is Latin, a word of other letters (Hanja, kana, Cyrillic, …) is other. Code
 * in backticks, formulas (`E=mc^2`, `O(n^2)`, `a_i`), letter-digit mixes (`H2O`, `x86`) and words
 * without letters count for nothing. `ko` needs at least `minLanguagePercent` of the counted words Korean,
 * `en` at least `minLanguagePercent` Latin. One pass over the text: linear in its length.
 */

/** Fewest percent of counted words in the asked script (pinned by test/study/language.test.ts). */
const minLanguagePercent = 60;
/** Below this many counted words the material is too short to judge and passes. */
const minJudgedWords = 3;

interface ScriptCounts {
  hangul: number;
  latin: number;
  other: number;
}

function isHangul(code: number): boolean {
  return (
    (code >= 0xac00 && code <= 0xd7a3) ||
    (code >= 0x1100 && code <= 0x11ff) ||
    (code >= 0x3130 && code <= 0x318f) ||
    (code >= 0xa960 && code <= 0xa97f) ||
    (code >= 0xd7b0 && code <= 0xd7ff)
  );
}

function isLatinLetter(code: number): boolean {
  return (
    (code >= 0x41 && code <= 0x5a) ||
    (code >= 0x61 && code <= 0x7a) ||
    (code >= 0xc0 && code <= 0x24f && code !== 0xd7 && code !== 0xf7) ||
    (code >= 0x1e00 && code <= 0x1eff)
  );
}

/** Characters that make a word a formula or code rather than prose (all ASCII: a table by code). */
const formulaMarks = new Uint8Array(128);
for (const mark of '=<>+*/^_\\{}[]|#$%&@~') formulaMarks[mark.charCodeAt(0)] = 1;
const otherLetter = /\p{L}/u;
const backtick = 0x60;

/** What a word holds so far, as bits: no object per word. */
const hasHangul = 1;
const hasLatin = 2;
const hasOther = 4;
const hasDigit = 8;
const hasFormula = 16;

/** What an ASCII character is to a word (`hasLatin`, `hasDigit`, `hasFormula`, or one of the two below), by code. */
const asciiKinds = new Uint8Array(128);
/** An ASCII space (`\s`): ends a word. */
const asciiSpace = 32;
/** The backtick: opens or closes code. */
const asciiBacktick = 64;
for (let code = 0; code < 128; code += 1) {
  if (code === backtick) asciiKinds[code] = asciiBacktick;
  else if (isSpace(code)) asciiKinds[code] = asciiSpace;
  else if (isLatinLetter(code)) asciiKinds[code] = hasLatin;
  else if (code >= 0x30 && code <= 0x39) asciiKinds[code] = hasDigit;
  else if (formulaMarks[code] === 1) asciiKinds[code] = hasFormula;
}

function countWord(word: number, counts: ScriptCounts): void {
  if ((word & hasHangul) !== 0) counts.hangul += 1;
  else if ((word & hasFormula) !== 0 || (word & (hasLatin | hasDigit)) === (hasLatin | hasDigit)) return;
  else if ((word & hasLatin) !== 0) counts.latin += 1;
  else if ((word & hasOther) !== 0) counts.other += 1;
}

/** Adds the words of `text` to `counts`. One pass over its code points, nothing allocated per character or word. */
function countScriptWords(text: string, counts: ScriptCounts): ScriptCounts {
  let word = 0;
  let inCode = false;
  for (let at = 0; at < text.length;) {
    const unit = text.charCodeAt(at);
    if (unit < 0x80) {
      // ASCII, most prose: one table load instead of the range tests below (the same decisions).
      at += 1;
      const kind = asciiKinds[unit] ?? 0;
      if (kind === asciiBacktick) {
        countWord(word, counts);
        word = 0;
        inCode = !inCode;
      } else if (inCode) {
        continue;
      } else if (kind === asciiSpace) {
        countWord(word, counts);
        word = 0;
      } else word |= kind;
      continue;
    }
    const code = text.codePointAt(at) ?? 0;
    at += code > 0xffff ? 2 : 1;
    if (code === backtick) {
      countWord(word, counts);
      word = 0;
      inCode = !inCode;
    } else if (inCode) {
      continue;
    } else if (isSpace(code)) {
      countWord(word, counts);
      word = 0;
    } else if (isHangul(code)) word |= hasHangul;
    else if (isLatinLetter(code)) word |= hasLatin;
    else if (code >= 0x30 && code <= 0x39) word |= hasDigit;
    else if (code < 0x80) word |= formulaMarks[code] === 1 ? hasFormula : 0;
    else if (otherLetter.test(String.fromCodePoint(code))) word |= hasOther;
  }
  if (!inCode) countWord(word, counts);
  return counts;
}

/** Every prose text of the material, in order: what a student reads as sentences (terms, titles and answers may be names). */
function forEachProse(
  value: NotesResult | McqResult | FillResult,
  visit: (text: string) => void,
): void {
  if ('keyConcepts' in value) {
    for (const concept of value.keyConcepts) visit(concept.definition);
    for (const section of value.sections) {
      visit(section.summary);
      for (const bullet of section.bullets) visit(bullet);
    }
    for (const entry of value.glossary) visit(entry.definition);
    return;
  }
  for (const question of value.questions) {
    if ('options' in question) {
      visit(question.question);
      visit(question.options.A);
      visit(question.options.B);
      visit(question.options.C);
      visit(question.options.D);
      visit(question.explanation);
    } else {
      visit(question.sentence);
      visit(question.hint);
    }
  }
}

const languageNames: Readonly<Record<StudyLang, string>> = {
  ko: 'Korean (Hangul)',
  en: 'English (Latin script)',
};

/** `{ok:true}` when the prose is predominantly in `lang`'s script; else the reason, for the re-ask. */
export function checkLanguage<T extends NotesResult | McqResult | FillResult>(
  value: T,
  lang: StudyLang,
): Validation<T> {
  const counts: ScriptCounts = { hangul: 0, latin: 0, other: 0 };
  forEachProse(value, (text) => countScriptWords(text, counts));
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
const detectSampleChars = 20_000;

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
export function resolveLang(
  requested: StudyLang | undefined,
  text: string,
): { readonly lang: StudyLang; readonly langSource: LangSource } {
  return requested === undefined
    ? { lang: detectLang(text), langSource: 'detected' }
    : { lang: requested, langSource: 'request' };
}
