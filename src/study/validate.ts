import type { z } from 'zod';
import type { Validation } from '../actors/types.js';
import { clipText } from '../errors/index.js';
import type { ProviderAnswer, Task } from '../providers/index.js';
import { scrubSecrets } from '../security/redact.js';
import { jsonNestsDeeperThan, maxJsonDepth } from '../security/json-depth.js';
import { extractJson } from './extract-json.js';
import { maxAnswerChars } from './prompts.js';
import { normalizers } from './normalize.js';
import { checkFill, checkMcq, checkNotes, type QuestionCheckOptions } from './quality.js';
import { checkLanguage } from './language.js';
import { studyResultSchemas, type FillResult, type McqResult, type NotesResult, type StudyLang, type StudyResultByTask } from './schemas.js';

/**
 * The `validate` handed to `gateway.generate`: truncation, JSON extraction, normalization, the zod
 * schema, then the quality checks. `{ok:false}` makes the attempt `invalid_output`; its errors go
 * back to the model in the one re-ask.
 */

/** What mcq and fill are checked against, and the language every task's prose must be in. */
export type QualityContext = Partial<QuestionCheckOptions> & { readonly lang?: StudyLang };

const maxSchemaErrors = 8;

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) out += typeof segment === 'number' ? `[${segment}]` : `${out === '' ? '' : '.'}${String(segment)}`;
  return out === '' ? '(root)' : out;
}

function schemaErrors(error: z.ZodError): string[] {
  return error.issues.slice(0, maxSchemaErrors).map((issue) => `${formatPath(issue.path)}: ${issue.message}`);
}

/** Schema and quality checks of an already parsed value (also used to re-validate cached results). */
export function validateStudyValue<T extends Task>(task: T, raw: unknown, context: QualityContext = {}): Validation<StudyResultByTask[T]> {
  const normalized = normalizers[task](raw);
  const parsed = studyResultSchemas[task].safeParse(normalized);
  if (!parsed.success) return { ok: false, errors: schemaErrors(parsed.error) };
  return checkQuality(task, parsed.data as StudyResultByTask[T], context);
}

function checkQuality<T extends Task>(task: T, value: StudyResultByTask[T], context: QualityContext): Validation<StudyResultByTask[T]> {
  if (context.lang !== undefined) {
    const language = checkLanguage(value, context.lang);
    if (!language.ok) return language;
  }
  if (task === 'notes') return checkNotes(value as NotesResult) as Validation<StudyResultByTask[T]>;
  const options: QuestionCheckOptions = {
    count: context.count ?? (value as McqResult | FillResult).questions.length,
    conceptIds: context.conceptIds ?? [],
    ...(context.similarityThreshold === undefined ? {} : { similarityThreshold: context.similarityThreshold }),
  };
  const checked = task === 'mcq' ? checkMcq(value as McqResult, options) : checkFill(value as FillResult, options);
  return checked as Validation<StudyResultByTask[T]>;
}

/** Longest validation error kept, in characters: reasons quote the answer only in short pieces. */
const maxErrorChars = 300;

/** One provider answer → the typed study result or the reasons it is `invalid_output` (short, key-like text scrubbed). */
export function validateStudyAnswer<T extends Task>(task: T, answer: ProviderAnswer, context: QualityContext = {}): Validation<StudyResultByTask[T]> {
  const verdict = judgeStudyAnswer(task, answer, context);
  return verdict.ok ? verdict : { ok: false, errors: verdict.errors.map((error) => scrubSecrets(clipText(error, maxErrorChars))) };
}

function judgeStudyAnswer<T extends Task>(task: T, answer: ProviderAnswer, context: QualityContext): Validation<StudyResultByTask[T]> {
  if (answer.truncated) {
    return { ok: false, errors: ['the answer was cut off at the output token limit; answer more briefly with complete JSON'] };
  }
  // Bounded before anything parses it: 16 answers of 7 MB held the event loop for seconds.
  const ceiling = maxAnswerChars(task, context.count);
  if (answer.text.length > ceiling) {
    return { ok: false, errors: [`the answer has ${answer.text.length} characters, more than the ${ceiling} this task can need; answer with the JSON asked for only`] };
  }
  if (jsonNestsDeeperThan(answer.text)) {
    return { ok: false, errors: [`the answer nests deeper than ${maxJsonDepth} levels; answer with the JSON shape asked for`] };
  }
  const extracted = extractJson(answer.text);
  if (!extracted.ok) return { ok: false, errors: [extracted.error] };
  return validateStudyValue(task, extracted.value, context);
}

/** The validator for one step, ready for `GenerateInput.validate`. */
export function studyValidator<T extends Task>(task: T, context: QualityContext = {}): (answer: ProviderAnswer) => Validation<StudyResultByTask[T]> {
  return (answer) => validateStudyAnswer(task, answer, context);
}
