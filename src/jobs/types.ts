/**
 * What a job looks like from outside its actor: the plain JSON view `GET /v1/jobs/:id` answers and a
 * status store keeps (API.md `/v1/jobs`), and the events its SSE stream carries. Nothing here holds a key.
 */
import type { Attempt } from '../actors/types.js';
import type { ProviderId, TokenUsage } from '../providers/index.js';
import type { FillResult, McqResult, NotesResult } from '../study/index.js';

export const jobStatuses = ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export type JobStatus = (typeof jobStatuses)[number];

export const jobStages = ['notes', 'mcq', 'fill'] as const;
/** The pipeline's steps, in order. */
export type JobStage = (typeof jobStages)[number];

/** Where a job is: waiting for a slot, in one of its stages, or past the last one. */
export type JobPosition = 'queued' | JobStage | 'done';

export type FinalJobStatus = Extract<JobStatus, 'succeeded' | 'failed' | 'cancelled'>;

export interface JobResult {
  readonly notes: NotesResult;
  readonly mcq: McqResult;
  readonly fill: FillResult;
}

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

export interface JobMeta {
  readonly lang: 'ko' | 'en';
  /** `request`: options.lang gave it; `detected`: read from the document. */
  readonly langSource?: 'request' | 'detected';
  readonly mcqCount: number;
  readonly fillCount: number;
  /** Stages finished so far. */
  readonly stages: Partial<Record<JobStage, StageMeta>>;
  /** Every attempt of the job so far, in order. */
  readonly attempts: readonly Attempt[];
  readonly failedStage?: JobStage;
}

/** The contract error body's inner object (API.md "When every provider fails"). */
export interface JobError {
  readonly code: string;
  readonly message: string;
  readonly attempts: readonly Attempt[];
  readonly retryAfterSeconds?: number;
}

/** `GET /v1/jobs/:id`: plain JSON, so a shared store (Redis) can hold it as it is. */
export interface JobView {
  readonly jobId: string;
  readonly status: JobStatus;
  readonly progress: number;
  readonly stage: JobPosition;
  readonly result?: JobResult;
  readonly error?: JobError;
  readonly meta?: JobMeta;
  /** Epoch ms. */
  readonly createdAt: number;
  readonly finishedAt?: number;
}

export interface ProgressEvent {
  readonly progress: number;
  readonly stage: JobPosition;
  readonly part?: number;
  readonly parts?: number;
}

/** One server-sent event of `GET /v1/jobs/:id/events`. */
export type JobStreamEvent =
  | { readonly type: 'progress'; readonly data: ProgressEvent }
  | { readonly type: 'attempt'; readonly data: Attempt }
  | { readonly type: 'done'; readonly data: { readonly status: FinalJobStatus } };

export function isFinalStatus(status: JobStatus): status is FinalJobStatus {
  return status === 'succeeded' || status === 'failed' || status === 'cancelled';
}
