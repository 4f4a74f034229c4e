import { z } from 'zod';
import type {
  Expect,
  FillResult as JobFillResult,
  Identical,
  McqResult as JobMcqResult,
  NotesResult as JobNotesResult,
  StudyLang as JobStudyLang,
} from '../machines/job-types.js';
import type { Task } from '../providers/index.js';

/**
 * The study material of docs/study-material.md as zod 4 schemas. These are the shapes after normalization
 * (normalize.ts); the JSON schemas handed to providers are derived from them with `z.toJSONSchema`.
 */

/** The languages study material is written in (docs/api.md `options.lang`). */
export type StudyLang = 'ko' | 'en';

export const optionLetters = ['A', 'B', 'C', 'D'] as const;
export type OptionLetter = (typeof optionLetters)[number];

const text = z.string().trim().min(1);

/**
 * The pages of the document an element's source text came from (docs/study-material.md "Page
 * references"): added by the service from the part that produced it, never asked of a model (the JSON
 * schema a provider gets leaves it out) and absent for text input.
 */
const pagesField = {
  pages: z.array(z.int().min(1)).max(10_000).optional().describe('The document pages its source text came from (documents only).'),
};

export const keyConceptSchema = z.object({
  id: text,
  term: text,
  definition: text,
  importance: z.enum(['high', 'medium', 'low']),
  ...pagesField,
});

export const notesSectionSchema = z.object({ title: text, summary: z.string(), bullets: z.array(z.string()), ...pagesField });

export const glossaryEntrySchema = z.object({ term: text, definition: z.string(), ...pagesField });

export const notesResultSchema = z.object({
  keyConcepts: z.array(keyConceptSchema).min(1),
  sections: z.array(notesSectionSchema),
  glossary: z.array(glossaryEntrySchema),
});

const questionLevelSchema = z.int().min(1).max(5);
const questionTypeSchema = z.enum(['concept', 'application']);

export const mcqQuestionSchema = z.object({
  id: text,
  question: text,
  options: z.object({ A: text, B: text, C: text, D: text }),
  answer: z.enum(optionLetters),
  explanation: z.string(),
  conceptId: text,
  level: questionLevelSchema,
  questionType: questionTypeSchema,
  ...pagesField,
});

export const mcqResultSchema = z.object({ questions: z.array(mcqQuestionSchema) });

export const fillQuestionSchema = z.object({
  id: text,
  /** Holds exactly one `___` (checked in quality.ts, so the message can say how many it found). */
  sentence: text,
  answer: text,
  acceptableAnswers: z.array(z.string()),
  hint: z.string(),
  conceptId: text,
  level: questionLevelSchema,
  questionType: questionTypeSchema,
  ...pagesField,
});

export const fillResultSchema = z.object({ questions: z.array(fillQuestionSchema) });

export type KeyConcept = z.infer<typeof keyConceptSchema>;
export type NotesResult = z.infer<typeof notesResultSchema>;
export type McqQuestion = z.infer<typeof mcqQuestionSchema>;
export type McqResult = z.infer<typeof mcqResultSchema>;
export type FillQuestion = z.infer<typeof fillQuestionSchema>;
export type FillResult = z.infer<typeof fillResultSchema>;
export type StudyResult = NotesResult | McqResult | FillResult;

/**
 * The job machine (src/machines, below this layer) holds these results as plain types of its own:
 * this fails `tsc` the moment a schema and the machine's type stop being the same type.
 */
/** @public A compile-time check, exported so that `tsc` keeps it. */
export type JobMachineHoldsTheseResults = [
  Expect<Identical<NotesResult, JobNotesResult>>,
  Expect<Identical<McqResult, JobMcqResult>>,
  Expect<Identical<FillResult, JobFillResult>>,
  Expect<Identical<StudyLang, JobStudyLang>>,
];

/** The result type of each task. */
export interface StudyResultByTask {
  notes: NotesResult;
  mcq: McqResult;
  fill: FillResult;
}

export const studyResultSchemas = {
  notes: notesResultSchema,
  mcq: mcqResultSchema,
  fill: fillResultSchema,
} as const;

const jsonSchemaCache = new Map<Task, Readonly<Record<string, unknown>>>();

/** The JSON schema a provider is asked to follow for `task` (GenerationRequest.jsonSchema). */
export function studyJsonSchema(task: Task): Readonly<Record<string, unknown>> {
  let schema = jsonSchemaCache.get(task);
  if (schema === undefined) {
    schema = withoutPages(z.toJSONSchema(studyResultSchemas[task])) as Record<string, unknown>;
    jsonSchemaCache.set(task, schema);
  }
  return schema;
}

/** A JSON schema without the `pages` properties: the service adds them; a model is never asked for them. */
function withoutPages(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withoutPages);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'properties' && typeof value === 'object' && value !== null) {
      const { pages: _pages, ...properties } = value as Record<string, unknown>;
      out[key] = withoutPages(properties);
    } else out[key] = withoutPages(value);
  }
  return out;
}
