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
function minimumQuestions(count: number): number {
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

/** Why a multiple-choice question is dropped (options not distinct, answer not A–D), or undefined. */
export function mcqProblem(question: McqQuestion): string | undefined {
  const texts = optionLetters.map((letter) => caseFold(question.options[letter]));
  const repeated = texts.find((text, index) => texts.indexOf(text) !== index);
  if (repeated !== undefined) return `${question.id}: options must be 4 distinct texts ("${repeated}" repeats)`;
  if (!optionLetters.includes(question.answer)) return `${question.id}: answer must be one of A, B, C, D`;
  return undefined;
}

/** Why a fill-in-the-blank question is dropped (not exactly one blank, empty answer), or undefined. */
export function fillProblem(question: FillQuestion): string | undefined {
  const blanks = question.sentence.split('___').length - 1;
  if (blanks !== 1) return `${question.id}: sentence must contain exactly one "___" (found ${blanks})`;
  if (question.answer.trim() === '') return `${question.id}: answer is empty`;
  return undefined;
}

/** The text two questions are compared by for near-duplicates. */
export const mcqText = (question: McqQuestion): string => question.question;
export const fillText = (question: FillQuestion): string => question.sentence;

/** What `QuestionKeeper.offer` decided about one question. */
export type QuestionVerdict<Q> = { readonly kept: true; readonly question: Q } | { readonly kept: false; readonly reason: string };

/**
 * The per-question checks, one question at a time in answer order: the whole answer's check runs every
 * question through one keeper, and the streaming extractor (stream-items.ts) runs each question through
 * its own keeper the moment it is complete, so an item it sends is the very question the answer keeps.
 */
export class QuestionKeeper<Q extends McqQuestion | FillQuestion> {
  private readonly known: ReadonlySet<string>;
  private readonly threshold: number;
  private readonly kept: { question: Q; tokens: Set<string> }[] = [];
  private readonly usedIds = new Set<string>();

  constructor(
    options: QuestionCheckOptions,
    private readonly problemOf: (question: Q) => string | undefined,
    private readonly textOf: (question: Q) => string,
  ) {
    this.known = new Set(options.conceptIds);
    this.threshold = options.similarityThreshold ?? nearDuplicateThreshold;
  }

  /** Questions kept so far, in order. */
  get questions(): Q[] {
    return this.kept.map((entry) => entry.question);
  }

  /** Keeps `question` (its id renamed when repeated) or says why it is dropped. */
  offer(question: Q): QuestionVerdict<Q> {
    const problem = this.problemOf(question);
    if (problem !== undefined) return { kept: false, reason: problem };
    if (!this.known.has(question.conceptId)) {
      return { kept: false, reason: `${question.id}: conceptId "${question.conceptId}" is not a notes concept (use one of ${[...this.known].slice(0, 12).join(', ')})` };
    }
    const tokens = similarityTokens(this.textOf(question));
    const twin = this.kept.find((other) => jaccard(tokens, other.tokens) >= this.threshold);
    if (twin !== undefined) return { kept: false, reason: `${question.id}: near-duplicate of ${twin.question.id}` };
    // Repeated ids would make answers ambiguous for the client; rename rather than drop.
    const id = this.usedIds.has(question.id) ? `${question.id}-${this.kept.length + 1}` : question.id;
    this.usedIds.add(id);
    const kept = id === question.id ? question : { ...question, id };
    this.kept.push({ question: kept, tokens });
    return { kept: true, question: kept };
  }
}

function checkQuestions<Q extends McqQuestion | FillQuestion>(
  questions: readonly Q[],
  options: QuestionCheckOptions,
  problemOf: (question: Q) => string | undefined,
  textOf: (question: Q) => string,
): Validation<Q[]> {
  const keeper = new QuestionKeeper(options, problemOf, textOf);
  const reasons: string[] = [];
  for (const question of questions) {
    const verdict = keeper.offer(question);
    if (!verdict.kept) reasons.push(verdict.reason);
  }
  const kept = keeper.questions;
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
  return { ok: true, value: kept.slice(0, options.count) };
}

export function checkMcq(result: McqResult, options: QuestionCheckOptions): Validation<McqResult> {
  const checked = checkQuestions(result.questions, options, mcqProblem, mcqText);
  return checked.ok ? { ok: true, value: { questions: checked.value } } : checked;
}

export function checkFill(result: FillResult, options: QuestionCheckOptions): Validation<FillResult> {
  const checked = checkQuestions(result.questions, options, fillProblem, fillText);
  return checked.ok ? { ok: true, value: { questions: checked.value } } : checked;
}
