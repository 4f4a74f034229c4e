/**
 * The zod schemas of docs/api.md shared by several routes: the error body, an Attempt, a provider's status.
 * Response schemas list every field the client gets: a field missing here is stripped from the answer.
 * A schema with `.meta({ id })` is a component of the OpenAPI document (src/http/openapi.ts), referred to
 * by every route that uses it. (Never give an id to a schema of src/study: those are also turned into the
 * JSON schemas handed to providers, which an id would change.)
 */
import { z } from 'zod';
import { errorClasses } from '../errors/index.js';
import { providerIds, tasks } from '../providers/index.js';
import { fillResultSchema, mcqResultSchema, notesResultSchema } from '../study/index.js';

/**
 * Response schemas of bodies a route builds only from values already validated against the same zod
 * schemas (the study layer parses the model's answer once, stripping unknown keys; the rest is typed
 * bookkeeping): the model's answer is validated once, not once more on the way out. Such a body is written
 * with
 * `JSON.stringify` instead of being encoded through the schema a second time; the schema still
 * documents the response (OpenAPI), and test/http/generate-body.test.ts checks that a real body comes out
 * of the schema unchanged, so nothing the schema would strip is ever sent.
 */
const validatedResponseSchemas = new WeakSet<object>();

/** Marks `schema` as the shape of bodies built from validated values (see above). */
export function alreadyValidated<T extends object>(schema: T): T {
  validatedResponseSchemas.add(schema);
  return schema;
}

export function isAlreadyValidated(schema: unknown): boolean {
  return typeof schema === 'object' && schema !== null && validatedResponseSchemas.has(schema);
}

export const providerIdSchema = z.enum(providerIds).meta({ id: 'ProviderId', description: 'A provider id.' });
export const taskSchema = z.enum(tasks);

// The study results as components: copies of src/study's schemas (which must keep no id, see above).
export const notesComponentSchema = notesResultSchema.meta({ id: 'NotesResult', description: 'The notes of a text.' });
export const mcqComponentSchema = mcqResultSchema.meta({ id: 'McqResult', description: 'Multiple-choice questions.' });
export const fillComponentSchema = fillResultSchema.meta({ id: 'FillResult', description: 'Fill-in-the-blank questions.' });

/** `kind` and `value` of a streamed `item`: one element of a result as soon as it is complete. */
export const streamItemFields = {
  kind: z.enum(['keyConcept', 'section', 'glossaryEntry', 'question']),
  value: z
    .union([
      notesResultSchema.shape.keyConcepts.element,
      notesResultSchema.shape.sections.element,
      notesResultSchema.shape.glossary.element,
      mcqResultSchema.shape.questions.element,
      fillResultSchema.shape.questions.element,
    ])
    .describe('A keyConcept, section or glossaryEntry of the notes, or a question, as `kind` says.'),
};

/** The `providers` of a generation or a job: a priority order of distinct ids. */
export const providerOrderSchema = z
  .array(providerIdSchema)
  .min(1)
  .max(3)
  .refine((ids) => new Set(ids).size === ids.length, 'Provider ids must be unique.')
  .optional()
  .describe('Priority order; the configured default order without it. Providers without a key header are left out.');

/** `options.lang` of a generation or a job. */
export const outputLanguageSchema = z.enum(['ko', 'en']).optional().describe('Output language; detected from the text when absent.');

/** `{"error":{"code","message",…}}`: the body of every error response. */
export const errorBodySchema = z
  .object({
    error: z.looseObject({
      code: z.string().describe('A stable UPPER_SNAKE code from docs/errors.md.'),
      message: z.string(),
    }),
  })
  .meta({ id: 'Error', description: 'The body of every error response: `{"error":{"code","message",…}}`.' });

export const attemptSchema = z
  .object({
    provider: providerIdSchema,
    model: z.string(),
    outcome: z.enum(['succeeded', 'failed', 'skipped']),
    errorClass: z.enum(errorClasses).optional(),
    httpStatus: z.number().int().optional(),
    reason: z.enum(['circuit_open', 'key_quarantined', 'key_cooling']).optional(),
    countedByBreaker: z.boolean(),
    retry: z.number().int().min(0),
    durationMs: z.number().min(0),
    task: taskSchema.optional(),
    message: z.string().optional(),
    streamed: z
      .object({ chunks: z.number().int().min(0), firstTokenMs: z.number().min(0) })
      .optional()
      .describe('Present when the call streamed: pieces received, and ms from the call to the first.'),
    continuation: z
      .literal(true)
      .optional()
      .describe('Present when the call continued an answer a call before it had begun and failed in the middle of.'),
    costUsd: z
      .number()
      .min(0)
      .optional()
      .describe("What the call cost in USD: its reported usage at the price of the model that answered. Absent without usage or price."),
  })
  .meta({ id: 'Attempt', description: 'One upstream generation call, or one provider skipped.' });

/** The token counts of a generation or a job stage; `null` when the provider reports none. */
export const usageSchema = z
  .object({ inputTokens: z.number().nullable(), outputTokens: z.number().nullable() })
  .meta({ id: 'Usage', description: 'Tokens the provider reported; null when it reports none.' });

/** `options.maxCostUsd` of jobs and generate: a positive, finite number of USD. */
export const maxCostUsdSchema = z
  .number()
  .min(0)
  .max(1_000_000)
  // Above zero; written as a refinement because the OpenAPI document's JSON schema dialect wants a number
  // in `exclusiveMinimum`, which zod's `positive()` does not give.
  .refine((usd) => usd > 0, { message: 'maxCostUsd must be a positive number of USD' })
  .optional()
  .describe('A spending limit in USD for this request or job: a provider call whose worst case would pass it is not made (422 BUDGET_EXCEEDED).');

/** The error body of a generation every provider failed (docs/api.md "When every provider fails"). */
export const generationErrorBodySchema = z
  .object({
    error: z.looseObject({
      code: z.string(),
      message: z.string(),
      attempts: z.array(attemptSchema).optional(),
      retryAfterSeconds: z.number().int().min(0).optional(),
    }),
  })
  .meta({ id: 'GenerationError', description: 'Error, with every attempt when the providers failed.' });

/** A breaker's state. */
export const breakerStateSchema = z.enum(['closed', 'open', 'halfOpen']);

export const providerStatusSchema = z
  .object({
  id: providerIdSchema,
  model: z.string(),
  breaker: z.object({
    state: breakerStateSchema,
    consecutiveFailures: z.number().int().min(0),
    openedAt: z.string().nullable(),
    retryAt: z.string().nullable(),
    threshold: z.number().int(),
    recoveryMs: z.number().int(),
    minDistinctKeys: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('BREAKER_MIN_DISTINCT_KEYS: distinct keys a failure streak needs before the breaker opens.'),
    distinctKeys: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("Distinct keys among the current streak's counted failures, counted up to minDistinctKeys (never which keys)."),
    forced: z.boolean().optional(),
  }),
  stats: z.object({
    calls: z.number().int(),
    successes: z.number().int(),
    failures: z.number().int(),
    ignored: z.number().int(),
    rejected: z.number().int(),
    opens: z.number().int(),
  }),
  keys: z
    .object({ quarantined: z.number().int().min(0), cooling: z.number().int().min(0) })
    .describe("How many callers' keys this provider refuses now (per-key health): counts only, never which keys."),
  })
  .meta({ id: 'ProviderStatus', description: "A provider's breaker, call counts and key health." });

