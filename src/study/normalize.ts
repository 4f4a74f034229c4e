import type { Task } from '../providers/index.js';
import { optionLetters, type OptionLetter } from './schemas.js';

/**
 * Repairs what models commonly get wrong before zod sees the value: legacy field names (the
 * original service's `key_concepts`, `correct_answer`, `concept_id`, `sentence_with_blank`, …),
 * numbers sent as strings, missing arrays, options sent as a list, answers given as option text.
 * It never invents content: anything it cannot repair is left for the schema to report.
 */

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The first field present (not undefined/null) among `names`. */
function pick(object: Json, ...names: string[]): unknown {
  for (const name of names) {
    const value = object[name];
    if (value !== undefined && value !== null) return value;
  }
  return undefined;
}

function asText(value: unknown): unknown {
  if (typeof value === 'string') return value.trim();
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return value;
}

/**
 * An element's `pages` kept through normalization (a cached result is re-validated with them; the study
 * run replaces or removes whatever a model wrote there: page-tags.ts).
 */
function keptPages(object: Json): { pages?: unknown } {
  return object.pages === undefined ? {} : { pages: object.pages };
}

function asTextOr(value: unknown, fallback: string): unknown {
  return value === undefined ? fallback : asText(value);
}

function asArray(value: unknown): unknown {
  if (value === undefined || value === null) return [];
  return value;
}

function asTextArray(value: unknown): unknown {
  if (value === undefined || value === null) return [];
  if (typeof value === 'string') return value.trim() === '' ? [] : [value.trim()];
  if (!Array.isArray(value)) return value;
  return value.map(asText).filter((item) => item !== '');
}

const levelWords: Readonly<Record<string, number>> = {
  easy: 2, medium: 3, hard: 4, 쉬움: 2, 하: 2, 보통: 3, 중: 3, 중간: 3, 어려움: 4, 상: 4,
};

function asLevel(value: unknown): unknown {
  if (typeof value === 'string') {
    const word = value.trim().toLowerCase();
    if (/^-?\d+(\.0+)?$/.test(word)) return Number(word);
    return levelWords[word] ?? value;
  }
  return value;
}

const importanceWords: Readonly<Record<string, string>> = {
  high: 'high', medium: 'medium', low: 'low', 높음: 'high', 상: 'high', 중간: 'medium', 보통: 'medium', 중: 'medium', 낮음: 'low', 하: 'low',
};

function asImportance(value: unknown): unknown {
  // The original service defaulted a missing importance to medium; so do we.
  if (value === undefined) return 'medium';
  if (typeof value === 'string') return importanceWords[value.trim().toLowerCase()] ?? value;
  return value;
}

const questionTypeWords: Readonly<Record<string, string>> = {
  concept: 'concept', conceptual: 'concept', definition: 'concept', 개념: 'concept',
  application: 'application', applied: 'application', apply: 'application', 응용: 'application', 적용: 'application',
};

function asQuestionType(value: unknown): unknown {
  if (typeof value === 'string') return questionTypeWords[value.trim().toLowerCase()] ?? value;
  return value;
}

/** `{"notes": {...}}` or `{"result": {...}}` around the expected object. */
function unwrap(root: unknown, expectedKeys: readonly string[]): unknown {
  if (!isRecord(root) || expectedKeys.some((key) => key in root)) return root;
  const values = Object.values(root);
  if (values.length === 1 && isRecord(values[0]) && expectedKeys.some((key) => key in (values[0] as Json))) return values[0];
  return root;
}

/** One key concept as the notes' normalizer repairs it; `index` (0-based) names a missing id `c{index+1}`. */
export function normalizeKeyConcept(concept: unknown, index: number): unknown {
  if (!isRecord(concept)) return concept;
  return {
    id: asTextOr(pick(concept, 'id', 'conceptId', 'concept_id'), `c${index + 1}`),
    term: asText(pick(concept, 'term', 'name', 'concept', 'title')),
    definition: asText(pick(concept, 'definition', 'description', 'brief_def', 'explanation')),
    importance: asImportance(pick(concept, 'importance', 'priority')),
    ...keptPages(concept),
  };
}

/** One notes section as the notes' normalizer repairs it. */
export function normalizeSection(section: unknown): unknown {
  if (!isRecord(section)) return section;
  return {
    title: asText(pick(section, 'title', 'heading', 'name')),
    summary: asTextOr(pick(section, 'summary', 'content', 'description'), ''),
    bullets: asTextArray(pick(section, 'bullets', 'points', 'key_points', 'keyPoints')),
    ...keptPages(section),
  };
}

/** One glossary entry as the notes' normalizer repairs it. */
export function normalizeGlossaryEntry(entry: unknown): unknown {
  if (!isRecord(entry)) return entry;
  return {
    term: asText(pick(entry, 'term', 'word', 'name')),
    definition: asTextOr(pick(entry, 'definition', 'brief_def', 'meaning', 'description'), ''),
    ...keptPages(entry),
  };
}

/**
 * Field names under which each list of the notes may come, in the order `pick` prefers them; the
 * streaming extractor (stream-items.ts) finds the lists by the same names.
 */
export const notesListNames = {
  keyConcepts: ['keyConcepts', 'key_concepts', 'concepts'],
  sections: ['sections'],
  glossary: ['glossary', 'terms'],
} as const;

/** Field names under which the list of questions may come (mcq and fill), in the order `pick` prefers them. */
export const questionListNames = ['questions', 'items', 'mcq', 'fill', 'quiz'] as const;

export function normalizeNotes(raw: unknown): unknown {
  const root = unwrap(raw, [...notesListNames.keyConcepts, ...notesListNames.sections, ...notesListNames.glossary]);
  if (!isRecord(root)) return root;
  const concepts = asArray(pick(root, ...notesListNames.keyConcepts));
  const sections = asArray(pick(root, ...notesListNames.sections));
  const glossary = asArray(pick(root, ...notesListNames.glossary));
  return {
    keyConcepts: Array.isArray(concepts) ? concepts.map(normalizeKeyConcept) : concepts,
    sections: Array.isArray(sections) ? sections.map(normalizeSection) : sections,
    glossary: Array.isArray(glossary) ? glossary.map(normalizeGlossaryEntry) : glossary,
  };
}

/** "A. Paging", "(B) Paging", "c) Paging" → "Paging" (the label is ours to add). */
function stripOptionLabel(option: string, letter?: string): string {
  const match = /^\(?([A-Da-d])\s*[).:．]\s*(.+)$/s.exec(option.trim());
  if (match?.[1] !== undefined && match[2] !== undefined && (letter === undefined || match[1].toUpperCase() === letter)) return match[2].trim();
  return option.trim();
}

function normalizeOptions(value: unknown): unknown {
  if (Array.isArray(value)) {
    if (value.length !== optionLetters.length) return value;
    const options: Json = {};
    value.forEach((item, index) => {
      const letter = optionLetters[index] as OptionLetter;
      const text = isRecord(item) ? asText(pick(item, 'text', 'value', 'content', 'option')) : asText(item);
      options[letter] = typeof text === 'string' ? stripOptionLabel(text) : text;
    });
    return options;
  }
  if (!isRecord(value)) return value;
  const options: Json = {};
  for (const [key, item] of Object.entries(value)) {
    const letter = key.trim().toUpperCase();
    const text = asText(item);
    options[letter] = typeof text === 'string' ? stripOptionLabel(text, letter) : text;
  }
  return options;
}

const caseFold = (text: string): string => text.normalize('NFKC').trim().toLocaleLowerCase();

/** "b", "(B)", "B. Paging", or the option's text itself → "B". */
function normalizeAnswerLetter(value: unknown, options: unknown): unknown {
  if (typeof value !== 'string') return value;
  const trimmed = value.trim();
  const letter = /^\(?([A-Da-d])\)?(?:\s*[).:．]\s*.*)?$/s.exec(trimmed)?.[1];
  if (letter !== undefined) return letter.toUpperCase();
  if (isRecord(options)) {
    const wanted = caseFold(stripOptionLabel(trimmed));
    for (const candidate of optionLetters) {
      const option = options[candidate];
      if (typeof option === 'string' && caseFold(option) === wanted) return candidate;
    }
  }
  return trimmed;
}

/** Blanks drawn as `____`, `＿＿＿` or `[blank]` become the one form the schema asks for: `___`. */
function normalizeBlanks(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  return value.trim().replace(/[_＿]{3,}|\[\s*blank\s*\]|\(\s*blank\s*\)/giu, '___');
}

function questionList(raw: unknown): { root: unknown; questions: unknown } {
  const root = Array.isArray(raw) ? { questions: raw } : unwrap(raw, questionListNames);
  if (!isRecord(root)) return { root, questions: undefined };
  return { root, questions: asArray(pick(root, ...questionListNames)) };
}

/** One multiple-choice question as the mcq normalizer repairs it; `index` (0-based) names a missing id `q{index+1}`. */
export function normalizeMcqQuestion(question: unknown, index: number): unknown {
  if (!isRecord(question)) return question;
  const options = normalizeOptions(pick(question, 'options', 'choices'));
  return {
    id: asTextOr(pick(question, 'id', 'questionId', 'question_id'), `q${index + 1}`),
    question: asText(pick(question, 'question', 'stem', 'prompt')),
    options,
    answer: normalizeAnswerLetter(asText(pick(question, 'answer', 'correctAnswer', 'correct_answer', 'correct')), options),
    explanation: asTextOr(pick(question, 'explanation', 'rationale', 'reason'), ''),
    conceptId: asText(pick(question, 'conceptId', 'concept_id', 'concept')),
    level: asLevel(pick(question, 'level', 'difficulty')),
    questionType: asQuestionType(pick(question, 'questionType', 'question_type', 'type')),
    ...keptPages(question),
  };
}

/** One fill-in-the-blank question as the fill normalizer repairs it; `index` (0-based) names a missing id. */
export function normalizeFillQuestion(question: unknown, index: number): unknown {
  if (!isRecord(question)) return question;
  const answer = asText(pick(question, 'answer', 'correctAnswer', 'correct_answer'));
  const acceptable = asTextArray(pick(question, 'acceptableAnswers', 'acceptable_answers', 'acceptable_variants', 'alternatives', 'variants'));
  return {
    id: asTextOr(pick(question, 'id', 'questionId', 'question_id'), `q${index + 1}`),
    sentence: normalizeBlanks(asText(pick(question, 'sentence', 'sentenceWithBlank', 'sentence_with_blank', 'question', 'text'))),
    answer,
    acceptableAnswers: withAnswerFirst(answer, acceptable),
    hint: asTextOr(pick(question, 'hint'), ''),
    conceptId: asText(pick(question, 'conceptId', 'concept_id', 'concept')),
    level: asLevel(pick(question, 'level', 'difficulty')),
    questionType: asQuestionType(pick(question, 'questionType', 'question_type', 'type')),
    ...keptPages(question),
  };
}

export function normalizeMcq(raw: unknown): unknown {
  const { root, questions } = questionList(raw);
  if (!isRecord(root)) return root;
  if (!Array.isArray(questions)) return { questions };
  return { questions: questions.map(normalizeMcqQuestion) };
}

export function normalizeFill(raw: unknown): unknown {
  const { root, questions } = questionList(raw);
  if (!isRecord(root)) return root;
  if (!Array.isArray(questions)) return { questions };
  return { questions: questions.map(normalizeFillQuestion) };
}

/** The answer itself is always acceptable; variants are kept once each, in order. */
function withAnswerFirst(answer: unknown, acceptable: unknown): unknown {
  if (!Array.isArray(acceptable)) return acceptable;
  const all = typeof answer === 'string' && answer !== '' ? [answer, ...acceptable] : acceptable;
  const seen = new Set<string>();
  return all.filter((item) => {
    if (typeof item !== 'string') return true;
    const key = caseFold(item);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

export const normalizers: Readonly<Record<Task, (raw: unknown) => unknown>> = {
  notes: normalizeNotes,
  mcq: normalizeMcq,
  fill: normalizeFill,
};
