/**
 * Deterministic, valid study material (docs/study-material.md) for the emulator's successful answers.
 * Same marker and same user text → the same JSON, so tests and benchmarks can rely on it.
 */
import { readPromptText, type PartialNotes, type PartPosition, type PromptText } from './prompt-text.js';
import type { TaskMarker } from './task-marker.js';

type Lang = 'ko' | 'en';
type JsonRecord = Record<string, unknown>;

interface Concept {
  readonly id: string;
  readonly term: string;
  readonly definition: string;
}

const englishStopwords = new Set(
  'the and for with that this from are was were have has had not but you your they their them its into over under about than then also been being which what when where while will would could should can may might must our out more most some such only each other these those there here very just like make made many much any all'.split(
    ' ',
  ),
);
const koreanParticles = ['에서', '으로', '에게', '은', '는', '이', '가', '을', '를', '의', '에', '와', '과', '로', '도', '만'];

const fallbackTerms: Readonly<Record<Lang, readonly string[]>> = {
  en: ['overview', 'method', 'result', 'evidence'],
  ko: ['개요', '방법', '결과', '근거'],
};

const fillerWords: Readonly<Record<Lang, readonly string[]>> = {
  en: 'river lantern granite orbit meadow copper harbor violet summit canvas falcon willow ember glacier prism quarry saddle tundra velvet anchor basalt cedar delta fjord grove hazel island jasper kelp lagoon marble nectar oasis pebble quartz reef sierra thistle umber vapor walnut yarrow zephyr amber bramble cobalt dune estuary fern garnet heath indigo juniper kestrel lichen mesa nutmeg opal'.split(
    ' ',
  ),
  ko: '강물 등불 화강암 궤도 초원 구리 항구 보라 정상 화폭 매 버들 불씨 빙하 프리즘 채석장 안장 툰드라 비단 닻 현무암 삼나무 삼각주 협곡 숲길 개암 섬 벽옥 해초 석호 대리석 꿀 오아시스 조약돌 석영 암초 산맥 엉겅퀴 황토 수증기 호두 톱풀 산들바람 호박 가시덤불 코발트 모래언덕 하구 고사리 석류석 황야 쪽빛 노간주 황조롱이 이끼 대지 육두구 단백석 바위'.split(
    ' ',
  ),
};

/**
 * Longest word taken as a term: a model names a concept in a few words, it never quotes a 30 000-letter
 * run back as one (and its answer is bounded by max_tokens); without this a text without spaces came
 * back inside every title, term and definition, answers of 140-210 KB to one notes call.
 */
const maxTermChars = 40;

/** Words of a text, Korean particles stripped, stopwords and overlong runs dropped; order of first appearance. */
function termsOf(text: string): string[] {
  const counts = new Map<string, number>();
  const firstSeen = new Map<string, number>();
  const words = text.match(/\p{L}[\p{L}\p{N}-]*/gu) ?? [];
  words.forEach((word, index) => {
    if (word.length > maxTermChars) return;
    let term = word.toLowerCase();
    if (/\p{Script=Hangul}/u.test(term)) {
      const particle = koreanParticles.find((p) => term.length > p.length + 1 && term.endsWith(p));
      if (particle) term = term.slice(0, -particle.length);
      if (term.length < 2) return;
    } else if (term.length < 4 || englishStopwords.has(term)) {
      return;
    }
    counts.set(term, (counts.get(term) ?? 0) + 1);
    if (!firstSeen.has(term)) firstSeen.set(term, index);
  });
  return [...counts.keys()].sort(
    (a, b) => (counts.get(b) ?? 0) - (counts.get(a) ?? 0) || (firstSeen.get(a) ?? 0) - (firstSeen.get(b) ?? 0),
  );
}

function sentencesOf(text: string): string[] {
  return text
    .split(/(?<=[.!?。])\s+|\n+/u)
    .map((sentence) => sentence.trim().replace(/\s+/g, ' '))
    .filter((sentence) => sentence.length > 0 && !sentence.startsWith('study-helper-task:'));
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`;
}

/**
 * Whether a sentence of the document can be quoted in an answer in `lang`: at least 4 in 5 of its
 * words are in that language's script (stricter than the service's check, so that the emulator's
 * normal answers always pass it). A document in the other language gets template sentences instead,
 * as a model would translate.
 */
function inLanguage(sentence: string, lang: Lang): boolean {
  let hangul = 0;
  let latin = 0;
  for (const word of sentence.split(/\s+/)) {
    if (/\p{Script=Hangul}/u.test(word)) hangul += 1;
    else if (/[A-Za-z]/.test(word)) latin += 1;
  }
  const matching = lang === 'ko' ? hangul : latin;
  return matching * 5 >= (hangul + latin) * 4;
}

/** The notes' concepts, derived from the document text alone (3 to 6 of them). */
function conceptsOf(text: string, lang: Lang): Concept[] {
  const sentences = sentencesOf(text).filter((sentence) => inLanguage(sentence, lang));
  const terms = termsOf(text).slice(0, 6);
  for (const fallback of fallbackTerms[lang]) {
    if (terms.length >= 3) break;
    if (!terms.includes(fallback)) terms.push(fallback);
  }
  return terms.map((term, index) => {
    const sentence = sentences.find((s) => s.toLowerCase().includes(term));
    const definition = sentence
      ? clip(sentence, 200)
      : lang === 'ko'
        ? `${term}: 자료의 핵심 개념 가운데 하나입니다.`
        : `${term}: one of the key ideas of the material.`;
    return { id: `c${index + 1}`, term, definition };
  });
}

/** Notes of one document text (the text inside `<document>`, never the prompt around it). */
function notesAnswer(text: string, lang: Lang): JsonRecord {
  const concepts = conceptsOf(text, lang);
  const all = sentencesOf(text);
  const quotable = all.filter((sentence) => inLanguage(sentence, lang));
  // A document in the other language: one template sentence per concept instead of its sentences.
  const sentences =
    quotable.length > 0 || all.length === 0
      ? quotable
      : concepts.map((concept) => (lang === 'ko' ? `${concept.term}에 대해 자료가 설명하는 내용입니다.` : `What the material says about ${concept.term}.`));
  const sectionCount = Math.max(1, Math.min(3, Math.ceil(sentences.length / 3)));
  const perSection = Math.max(1, Math.ceil(sentences.length / sectionCount));
  const sections = Array.from({ length: sectionCount }, (_, index) => {
    const part = sentences.slice(index * perSection, (index + 1) * perSection);
    const concept = concepts[index % concepts.length];
    const term = concept?.term ?? fallbackTerms[lang][0] ?? 'overview';
    const bullets = part.slice(0, 3).map((s) => clip(s, 160));
    return {
      title: lang === 'ko' ? `${index + 1}부: ${term}` : `Part ${index + 1}: ${term}`,
      summary: clip(part[0] ?? (lang === 'ko' ? `${term}에 대한 설명입니다.` : `What the material says about ${term}.`), 240),
      bullets: bullets.length > 0 ? bullets : [lang === 'ko' ? `${term}의 요점` : `A key point the material makes about ${term}`],
    };
  });
  return {
    keyConcepts: concepts.map((concept, index) => ({
      id: concept.id,
      term: concept.term,
      definition: concept.definition,
      importance: index < 2 ? 'high' : index < 4 ? 'medium' : 'low',
    })),
    sections,
    glossary: concepts.map((concept) => ({ term: concept.term, definition: clip(concept.definition, 120) })),
  };
}

const maxMergedConcepts = 8;

/** The reduce step: per-part notes merged, concepts deduplicated by term and renumbered. */
function mergedNotesAnswer(partials: readonly PartialNotes[], lang: Lang): JsonRecord {
  const concepts: { term: string; definition: string }[] = [];
  const seen = new Set<string>();
  for (const concept of partials.flatMap((notes) => notes.keyConcepts)) {
    const key = concept.term.normalize('NFKC').toLocaleLowerCase();
    if (seen.has(key) || concepts.length >= maxMergedConcepts) continue;
    seen.add(key);
    concepts.push(concept);
  }
  if (concepts.length === 0) return notesAnswer(partials.flatMap((notes) => notes.sections.map((section) => section.summary)).join('\n'), lang);
  const glossarySeen = new Set<string>();
  const glossary = partials
    .flatMap((notes) => notes.glossary)
    .filter((entry) => {
      const key = entry.term.normalize('NFKC').toLocaleLowerCase();
      if (glossarySeen.has(key)) return false;
      glossarySeen.add(key);
      return true;
    });
  const sections = partials.flatMap((notes) => notes.sections).map((section) => ({
    title: section.title,
    summary: section.summary,
    bullets: section.bullets.length > 0 ? [...section.bullets] : [section.summary],
  }));
  return {
    keyConcepts: concepts.map((concept, index) => ({
      id: `c${index + 1}`,
      term: concept.term,
      definition: concept.definition,
      importance: index < 2 ? 'high' : index < 4 ? 'medium' : 'low',
    })),
    sections: sections.length > 0 ? sections : [{ title: concepts[0]?.term ?? 'notes', summary: concepts[0]?.definition ?? '', bullets: concepts.map((concept) => concept.term) }],
    glossary: glossary.length > 0 ? glossary : concepts.map((concept) => ({ term: concept.term, definition: clip(concept.definition, 120) })),
  };
}

/**
 * Terms for the asked concept ids: the prompt's concept list, else notes JSON in the user text,
 * else concepts derived from the document text.
 */
function termsForConcepts(prompt: PromptText, userText: string, lang: Lang, conceptIds: readonly string[]): Map<string, string> {
  const byId = new Map<string, string>([...prompt.concepts].map(([id, concept]) => [id, concept.term]));
  const start = userText.indexOf('{');
  const end = userText.lastIndexOf('}');
  if (byId.size === 0 && start >= 0 && end > start) {
    try {
      const parsed: unknown = JSON.parse(userText.slice(start, end + 1));
      const concepts = (parsed as { keyConcepts?: unknown }).keyConcepts;
      if (Array.isArray(concepts)) {
        for (const concept of concepts as { id?: unknown; term?: unknown }[]) {
          if (typeof concept.id === 'string' && typeof concept.term === 'string') byId.set(concept.id, concept.term);
        }
      }
    } catch {
      // Not notes JSON: fall through to the derivation from the text.
    }
  }
  const derived = conceptsOf(prompt.document, lang);
  const ids = conceptIds.length > 0 ? conceptIds : derived.map((c) => c.id);
  return new Map(ids.map((id) => [id, byId.get(id) ?? derived.find((c) => c.id === id)?.term ?? id]));
}

/**
 * How question `index` of one part of a long document differs from every question of the other
 * parts (the study module checks near-duplicates over all parts combined): the template and the
 * concept are offset by the part number, four filler words are picked so that two different
 * (part, index) pairs rarely share more than one, and a short quote comes from the part's own text.
 */
interface PartVariation {
  readonly part: PartPosition;
  readonly sentences: readonly string[];
}

/** Prime size of each of the four disjoint word pools a part's questions draw from. */
const poolSize = 17;
/** Pairwise distinct mod 17: (index, part) → four words, two different pairs share at most one. */
const poolStrides = [1, 4, 9, 13] as const;
const extraWords: Readonly<Record<Lang, readonly string[]>> = {
  en: 'poplar rowan spruce sorrel tansy vetch wren larch myrtle osprey'.split(' '),
  ko: '느티나무 갈대 억새 물총새 두루미 은행잎 단풍 진달래 개나리'.split(' '),
};

function variationOf(prompt: PromptText): PartVariation | undefined {
  if (prompt.part === undefined || prompt.part.total <= 1) return undefined;
  return { part: prompt.part, sentences: sentencesOf(prompt.document).filter((sentence) => /\p{L}/u.test(sentence)) };
}

/** The part's sentences a question in `lang` may quote. */
function quotableSentences(variation: PartVariation, lang: Lang): readonly string[] {
  return variation.sentences.filter((sentence) => inLanguage(sentence, lang));
}

/** Index `index` shifted by the part: the first questions of different parts start elsewhere. */
function shifted(variation: PartVariation | undefined, index: number, step: number): number {
  return variation === undefined ? index : index + (variation.part.index - 1) * step;
}

/**
 * Four words for question `index` of part `part`, one from each of four disjoint pools of a prime
 * size, at `(index + part * stride) mod 17` with pairwise different strides: for two different
 * (index, part) pairs (less than 17 apart in each) at most one position, and so at most one word, agrees.
 */
function partWords(lang: Lang, part: number, index: number): string[] {
  const words = [...fillerWords[lang], ...extraWords[lang]];
  return poolStrides.map((stride, pool) => words[pool * poolSize + ((index + part * stride) % poolSize)] ?? '');
}

/** The first words of one of the part's sentences (no blanks, so fill sentences keep exactly one). */
function partQuote(variation: PartVariation, index: number, lang: Lang): string {
  const sentences = quotableSentences(variation, lang);
  const sentence = sentences[index % Math.max(1, sentences.length)] ?? '';
  const words = sentence.replace(/_+/g, ' ').split(/\s+/).filter((word) => word.length > 0);
  const quote = words.slice(0, lang === 'ko' ? 4 : 6).join(' ');
  return quote.length > 0 ? `“${quote}…”` : '';
}

function partSuffix(variation: PartVariation | undefined, lang: Lang, index: number, words: readonly string[]): string {
  if (variation === undefined) return '';
  const listed = words.join(lang === 'ko' ? '·' : ', ');
  const quote = partQuote(variation, index, lang);
  return quote === '' ? ` (${listed})` : ` (${listed}: ${quote})`;
}

const mcqTemplates: Readonly<Record<Lang, readonly ((term: string) => string)[]>> = {
  en: [
    (t) => `Which statement best describes ${t}?`,
    (t) => `What is the main role of ${t} in this material?`,
    (t) => `How would you apply ${t} to a new situation?`,
    (t) => `Which example illustrates ${t} most clearly?`,
    (t) => `Why does the text emphasise ${t}?`,
    (t) => `What would change if ${t} were removed?`,
    (t) => `Which of these is a consequence of ${t}?`,
    (t) => `What distinguishes ${t} from related ideas?`,
    (t) => `When is ${t} most useful?`,
    (t) => `Which claim about ${t} does the material support?`,
    (t) => `What problem does ${t} help to solve?`,
    (t) => `Which step comes first when using ${t}?`,
  ],
  ko: [
    (t) => `다음 중 ${t}을(를) 가장 잘 설명한 것은?`,
    (t) => `이 자료에서 ${t}의 주된 역할은 무엇인가?`,
    (t) => `${t}을(를) 새로운 상황에 적용하는 방법으로 옳은 것은?`,
    (t) => `${t}의 예로 가장 적절한 것은?`,
    (t) => `자료가 ${t}을(를) 강조하는 이유는 무엇인가?`,
    (t) => `${t}이(가) 없다면 무엇이 달라지는가?`,
    (t) => `${t}의 결과로 볼 수 있는 것은?`,
    (t) => `${t}을(를) 관련 개념과 구별하는 특징은?`,
    (t) => `${t}이(가) 가장 유용한 때는 언제인가?`,
    (t) => `자료가 뒷받침하는 ${t}에 대한 주장은?`,
    (t) => `${t}이(가) 해결하는 문제는 무엇인가?`,
    (t) => `${t}을(를) 사용할 때 첫 단계는 무엇인가?`,
  ],
};

/** Two filler words unique to question `index`, so repeated templates never make near-duplicates. */
function discriminator(lang: Lang, index: number): string {
  const words = fillerWords[lang];
  const first = words[index % words.length] ?? '';
  const second = words[(index + 31) % words.length] ?? '';
  const third = words[(index + 17) % words.length] ?? '';
  return lang === 'ko' ? ` (${first}·${second}·${third} 관점)` : ` (${first}, ${second} and ${third} view)`;
}

const letters = ['A', 'B', 'C', 'D'] as const;

/** What a question answer is built from: the prompt's variation and the terms of the concepts it asks about. */
function questionGround(userText: string, marker: TaskMarker): { variation: ReturnType<typeof variationOf>; terms: Map<string, string>; ids: string[] } {
  const prompt = readPromptText(userText);
  const terms = termsForConcepts(prompt, userText, marker.lang, marker.conceptIds);
  return { variation: variationOf(prompt), terms, ids: [...terms.keys()] };
}

function mcqAnswer(userText: string, marker: TaskMarker): JsonRecord {
  const { lang, count } = marker;
  const { variation, terms, ids } = questionGround(userText, marker);
  const templates = mcqTemplates[lang];
  const questions = Array.from({ length: count }, (_, index) => {
    const conceptId = ids[shifted(variation, index, 1) % ids.length] ?? 'c1';
    const term = terms.get(conceptId) ?? conceptId;
    const other = ids.map((id) => terms.get(id) ?? id).find((t) => t !== term);
    const templateIndex = shifted(variation, index, 5);
    const template = templates[templateIndex % templates.length] ?? templates[0];
    const question =
      (template ? template(term) : term) +
      (variation === undefined
        ? index >= templates.length
          ? discriminator(lang, index)
          : ''
        : partSuffix(variation, lang, index, partWords(lang, variation.part.index, index)));
    const correct =
      lang === 'ko' ? `${term}의 핵심 내용을 자료대로 정확히 설명한다.` : `It states the core of ${term} as the material does.`;
    const distractors =
      lang === 'ko'
        ? [`${term}과(와)는 관계가 없는 설명이다.`, other ? `${other}에만 해당하는 설명이다.` : '다른 개념에만 해당하는 설명이다.', '자료의 내용과 정반대되는 설명이다.']
        : [`It is unrelated to ${term}.`, other ? `It only applies to ${other}.` : 'It only applies to another topic.', 'It contradicts what the material says.'];
    const answerIndex = shifted(variation, index, 1) % 4;
    const ordered = [...distractors];
    ordered.splice(answerIndex, 0, correct);
    const options = Object.fromEntries(letters.map((letter, i) => [letter, ordered[i] ?? '']));
    return {
      id: `q${index + 1}`,
      question,
      options,
      answer: letters[answerIndex] ?? 'A',
      explanation: lang === 'ko' ? `자료는 ${term}을(를) 이렇게 설명한다.` : `The material presents ${term} this way.`,
      conceptId,
      level: (index % 5) + 1,
      questionType: index % 2 === 0 ? 'concept' : 'application',
    };
  });
  return { questions };
}

const fillTemplates: Readonly<Record<Lang, readonly ((first: string, second: string) => string)[]>> = {
  en: [
    (a, b) => `In the material, ___ is explained alongside ${a} and ${b}.`,
    (a, b) => `___ connects the ideas of ${a} and ${b}.`,
    (a, b) => `Readers meet ___ when the text turns to ${a} and ${b}.`,
    (a, b) => `The passage on ${a} and ${b} relies on ___.`,
  ],
  ko: [
    (a, b) => `자료에서 ___은(는) ${a}, ${b}와(과) 함께 설명된다.`,
    (a, b) => `___은(는) ${a}와(과) ${b}의 개념을 잇는다.`,
    (a, b) => `글이 ${a}, ${b}을(를) 다룰 때 ___이(가) 등장한다.`,
    (a, b) => `${a}와(과) ${b}에 관한 부분은 ___에 기대고 있다.`,
  ],
};

function fillAnswer(userText: string, marker: TaskMarker): JsonRecord {
  const { lang, count } = marker;
  const { variation, terms, ids } = questionGround(userText, marker);
  const words = fillerWords[lang];
  const questions = Array.from({ length: count }, (_, index) => {
    const conceptId = ids[shifted(variation, index, 1) % ids.length] ?? 'c1';
    const term = terms.get(conceptId) ?? conceptId;
    // One part: two filler words by index. Parts of a long document: the part's four pool words.
    const [first = '', second = '', ...rest] =
      variation === undefined
        ? [words[index % words.length] ?? '', words[(index + 23) % words.length] ?? '']
        : partWords(lang, variation.part.index, index);
    const templates = fillTemplates[lang];
    const template = templates[shifted(variation, index, 1) % templates.length] ?? templates[0];
    const sentence = (template ? template(first, second) : `___ ${first} ${second}`) + partSuffix(variation, lang, index, rest);
    return {
      id: `f${index + 1}`,
      sentence,
      answer: term,
      acceptableAnswers: [...new Set([term, term.toLowerCase()])],
      hint: lang === 'ko' ? `"${term.slice(0, 1)}"(으)로 시작합니다.` : `Starts with "${term.slice(0, 1)}".`,
      conceptId,
      level: (index % 5) + 1,
      questionType: index % 2 === 0 ? 'concept' : 'application',
    };
  });
  return { questions };
}

/**
 * The study JSON for a marker (notes in English when there is none). Notes come from the document
 * inside the prompt only, or from the per-part notes of a merge request.
 */
export function studyAnswer(marker: TaskMarker | undefined, userText: string): JsonRecord {
  switch (marker?.task) {
    case 'mcq':
      return mcqAnswer(userText, marker);
    case 'fill':
      return fillAnswer(userText, marker);
    default: {
      const lang = marker?.lang ?? 'en';
      const prompt = readPromptText(userText);
      return prompt.partials.length > 0 ? mergedNotesAnswer(prompt.partials, lang) : notesAnswer(prompt.document, lang);
    }
  }
}

/** Deep copy with every number turned into a string (the `stringNumbers` fault). */
export function numbersAsStrings(value: unknown): unknown {
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return value.map(numbersAsStrings);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, numbersAsStrings(inner)]));
  }
  return value;
}

/** A valid envelope whose content misses required fields (the `invalidOutput` fault). */
export function invalidStudyAnswer(marker: TaskMarker | undefined): JsonRecord {
  if (!marker || marker.task === 'notes') return { keyConcepts: [{ term: 'incomplete' }] };
  return { questions: [{ id: 'q1', question: 'incomplete' }] };
}
