import type { Validation } from '../actors/types.js';
import { optionLetters, type FillQuestion, type FillResult, type McqQuestion, type McqResult, type NotesResult } from './schemas.js';
import { jaccard, nearDuplicateThreshold, similarityTokens } from './similarity.js';

/**
 * The checks a schema cannot express. Bad questions are dropped with a reason; the answer fails
 * (`invalid_output`, re-asked with the reasons) only when too few good questions remain.
 * Messages are short and name the question: they go back to the model in the re-ask.
 */

export interface QuestionCheckOptions {
  /** Questions asked for; the result holds at most this many. */
  readonly count: number;
  /** Ids of the notes' key concepts: every question must name one. */
  readonly conceptIds: readonly string[];
  readonly similarityThreshold?: number;
}

/** Fewest good questions that still make an answer worth keeping. */
export function minimumQuestions(count: number): number {
  return Math.max(1, Math.ceil(count / 2));
}

const maxReportedErrors = 8;
const caseFold = (text: string): string => text.normalize('NFKC').trim().toLocaleLowerCase();

export function checkNotes(notes: NotesResult): Validation<NotesResult> {
  const errors: string[] = [];
  const seen = new Set<string>();
  for (const concept of notes.keyConcepts) {
    if (seen.has(concept.id)) errors.push(`keyConcepts: id "${concept.id}" is used twice; ids must be unique`);
    seen.add(concept.id);
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: notes };
}

function mcqProblem(question: McqQuestion): string | undefined {
  const texts = optionLetters.map((letter) => caseFold(question.options[letter]));
  const repeated = texts.find((text, index) => texts.indexOf(text) !== index);
  if (repeated !== undefined) return `${question.id}: options must be 4 distinct texts ("${repeated}" repeats)`;
  if (!optionLetters.includes(question.answer)) return `${question.id}: answer must be one of A, B, C, D`;
  return undefined;
}

function fillProblem(question: FillQuestion): string | undefined {
  const blanks = question.sentence.split('___').length - 1;
  if (blanks !== 1) return `${question.id}: sentence must contain exactly one "___" (found ${blanks})`;
  if (question.answer.trim() === '') return `${question.id}: answer is empty`;
  return undefined;
}

function checkQuestions<Q extends McqQuestion | FillQuestion>(
  questions: readonly Q[],
  options: QuestionCheckOptions,
  problemOf: (question: Q) => string | undefined,
  textOf: (question: Q) => string,
): Validation<Q[]> {
  const known = new Set(options.conceptIds);
  const threshold = options.similarityThreshold ?? nearDuplicateThreshold;
  const reasons: string[] = [];
  const kept: { question: Q; tokens: Set<string> }[] = [];
  const usedIds = new Set<string>();
  for (const question of questions) {
    const problem = problemOf(question);
    if (problem !== undefined) {
      reasons.push(problem);
      continue;
    }
    if (!known.has(question.conceptId)) {
      reasons.push(`${question.id}: conceptId "${question.conceptId}" is not a notes concept (use one of ${[...known].slice(0, 12).join(', ')})`);
      continue;
    }
    const tokens = similarityTokens(textOf(question));
    const twin = kept.find((other) => jaccard(tokens, other.tokens) >= threshold);
    if (twin !== undefined) {
      reasons.push(`${question.id}: near-duplicate of ${twin.question.id}`);
      continue;
    }
    // Repeated ids would make answers ambiguous for the client; rename rather than drop.
    const id = usedIds.has(question.id) ? `${question.id}-${kept.length + 1}` : question.id;
    usedIds.add(id);
    kept.push({ question: id === question.id ? question : { ...question, id }, tokens });
  }
  const needed = minimumQuestions(options.count);
  if (kept.length < needed) {
    return {
      ok: false,
      errors: [
        `only ${kept.length} of ${options.count} requested questions passed the checks (need at least ${needed})`,
        ...reasons.slice(0, maxReportedErrors),
      ],
    };
  }
  return { ok: true, value: kept.slice(0, options.count).map((entry) => entry.question) };
}

export function checkMcq(result: McqResult, options: QuestionCheckOptions): Validation<McqResult> {
  const checked = checkQuestions(result.questions, options, mcqProblem, (question) => question.question);
  return checked.ok ? { ok: true, value: { questions: checked.value } } : checked;
}

export function checkFill(result: FillResult, options: QuestionCheckOptions): Validation<FillResult> {
  const checked = checkQuestions(result.questions, options, fillProblem, (question) => question.sentence);
  return checked.ok ? { ok: true, value: { questions: checked.value } } : checked;
}
