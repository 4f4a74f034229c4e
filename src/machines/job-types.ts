/**
 * The words the job machine speaks: its stages and positions, what a finished stage reports, the
 * contract error, the events of its SSE stream, and the study material it holds. The machines are the
 * bottom layer, so these are plain types here; `src/jobs` re-exports them, and `src/study` checks at
 * compile time that its zod-inferred results and its task outcome are these very types
 * (`Identical` below: `tsc` fails the moment either side drifts).
 */
import type {
  AbortedRunOutcome,
  Attempt,
  FailedRunOutcome,
  ProviderId,
  RequestLang,
  TokenUsage,
} from './types.js';

/**
 * `interrupted`: the instance that ran the job stopped (crash, kill, shutdown past its grace) before the job
 * ended; its finished stages and parts are kept and `POST /v1/jobs/:id/resume` continues it.
 */
export const jobStatuses = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted'] as const;
export type JobStatus = (typeof jobStatuses)[number];

export const jobStages = ['notes', 'mcq', 'fill'] as const;
/** The pipeline's steps, in order. */
export type JobStage = (typeof jobStages)[number];

/** Where a job is: waiting for a slot, in one of its stages, or past the last one. */
export type JobPosition = 'queued' | JobStage | 'done';

/** The statuses a job actor ends in. `interrupted` is one (its actor is gone), though a resume can continue the job. */
export type FinalJobStatus = Extract<JobStatus, 'succeeded' | 'failed' | 'cancelled' | 'interrupted'>;

/** Whether a job with this status has ended (its actor is done). */
export function isFinalStatus(status: JobStatus): status is FinalJobStatus {
  return status === 'succeeded' || status === 'failed' || status === 'cancelled' || status === 'interrupted';
}

/**
 * One provider step of a stage that finished (a part's notes, a merge, a part's questions), kept in the
 * job's record so that a resumed job never asks a provider for it again. `key` is the sha256 of the
 * step's request (prompt, task, language, part): the same document and options rebuild the same key.
 */
export interface FinishedPart {
  readonly key: string;
  readonly stage: JobStage;
  readonly value: unknown;
  readonly provider: ProviderId;
  readonly model: string;
  readonly fallback: boolean;
  readonly usage: TokenUsage;
  /** This step's attempts (already in the job's `meta.attempts`). */
  readonly attempts: readonly Attempt[];
}

/** The language study material is written in (docs/api.md `options.lang`). */
export type StudyLang = RequestLang;

/**
 * Where each page of a text begins: page `firstPage + i` starts at UTF-16 offset `starts[i]` of the text
 * (a page without text starts where the next one does). The study layer turns it into the `pages` of
 * each item (docs/study-material.md "Page references").
 */
export interface TextPageMap {
  readonly firstPage: number;
  readonly starts: readonly number[];
}

/** docs/study-material.md notes, as `notesResultSchema` (src/study/schemas.ts) gives them after normalization. */
export interface NotesResult {
  keyConcepts: { id: string; term: string; definition: string; importance: 'high' | 'medium' | 'low'; pages?: number[] }[];
  sections: { title: string; summary: string; bullets: string[]; pages?: number[] }[];
  glossary: { term: string; definition: string; pages?: number[] }[];
}

/** docs/study-material.md multiple-choice questions (`mcqResultSchema`). */
export interface McqResult {
  questions: {
    id: string;
    question: string;
    options: { A: string; B: string; C: string; D: string };
    answer: 'A' | 'B' | 'C' | 'D';
    explanation: string;
    conceptId: string;
    level: number;
    questionType: 'concept' | 'application';
    pages?: number[];
  }[];
}

/** docs/study-material.md fill-in-the-blank questions (`fillResultSchema`). */
export interface FillResult {
  questions: {
    id: string;
    sentence: string;
    answer: string;
    acceptableAnswers: string[];
    hint: string;
    conceptId: string;
    level: number;
    questionType: 'concept' | 'application';
    pages?: number[];
  }[];
}

/** What one stage's study task ends with (`StudyTaskOutcome` of src/study is this type). */
export type StudyOutcome =
  | {
      readonly status: 'succeeded';
      readonly value: NotesResult | McqResult | FillResult;
      readonly provider: ProviderId;
      readonly model: string;
      readonly fallback: boolean;
      readonly attempts: readonly Attempt[];
      readonly usage: TokenUsage;
      /** Served from the results cache: no provider call, usage zero. */
      readonly cached?: boolean;
    }
  | FailedRunOutcome
  | AbortedRunOutcome;

/** What one finished stage reports, like `POST /v1/generate`'s `meta`. */
export interface StageMeta {
  readonly provider: ProviderId;
  readonly model: string;
  readonly fallback: boolean;
  readonly attempts: readonly Attempt[];
  readonly usage: TokenUsage;
  /** Served from the results cache: no provider call. */
  readonly cached: boolean;
}

/** The contract error body's inner object (docs/api.md "When every provider fails"). */
export interface JobError {
  readonly code: string;
  readonly message: string;
  readonly attempts: readonly Attempt[];
  readonly retryAfterSeconds?: number;
}

export interface ProgressEvent {
  readonly progress: number;
  readonly stage: JobPosition;
  readonly part?: number;
  readonly parts?: number;
}

/** One element of a stage's result as soon as it is complete and valid (docs/api.md "Streaming", `item`). */
export type JobItem =
  | { readonly task: JobStage; readonly kind: 'keyConcept'; readonly value: NotesResult['keyConcepts'][number] }
  | { readonly task: JobStage; readonly kind: 'section'; readonly value: NotesResult['sections'][number] }
  | { readonly task: JobStage; readonly kind: 'glossaryEntry'; readonly value: NotesResult['glossary'][number] }
  | { readonly task: JobStage; readonly kind: 'question'; readonly value: McqResult['questions'][number] | FillResult['questions'][number] };

/** The items of a stage sent so far are void (`reset`). */
export interface JobItemsReset {
  readonly task: JobStage;
  readonly provider: ProviderId;
  readonly reason: string;
}

/** One server-sent event of `GET /v1/jobs/:id/events`. */
export type JobStreamEvent =
  | { readonly type: 'progress'; readonly data: ProgressEvent }
  | { readonly type: 'attempt'; readonly data: Attempt }
  | { readonly type: 'item'; readonly data: JobItem }
  | { readonly type: 'reset'; readonly data: JobItemsReset }
  | { readonly type: 'done'; readonly data: { readonly status: FinalJobStatus } };

/**
 * `true` only when `A` and `B` are the same type (not merely assignable either way): the compile-time
 * check that a type declared in another layer has not drifted from this one.
 */
export type Identical<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** Compiles only when `T` is `true`: `Expect<Identical<A, B>>` fails `tsc` when `A` and `B` differ. */
export type Expect<T extends true> = T;
