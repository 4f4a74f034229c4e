/**
 * What a job looks like from outside its actor: the plain JSON view `GET /v1/jobs/:id` answers and a
 * status store keeps (docs/api.md `/v1/jobs`), and the events its SSE stream carries. Nothing here holds a key.
 * The words the job machine speaks (stages, positions, stage meta, errors, stream events) are defined
 * with it in src/machines/job-types.ts and re-exported here.
 */
import type { Attempt, ProviderId } from '../machines/types.js';
import type {
  FillResult,
  FinishedPart,
  JobError,
  JobPosition,
  JobStage,
  JobStatus,
  McqResult,
  NotesResult,
  StageMeta,
  StudyLang,
} from '../machines/job-types.js';

export { jobStatuses, jobStages, isFinalStatus } from '../machines/job-types.js';
export type {
  JobStatus,
  
  
  
  
  
  
  ProgressEvent,
  JobStreamEvent,
} from '../machines/job-types.js';

interface JobResult {
  readonly notes: NotesResult;
  readonly mcq: McqResult;
  readonly fill: FillResult;
}

/** What a failed job finished before it stopped (a job stopped by its budget keeps what it paid for). */
type PartialJobResult = Partial<JobResult>;

interface JobMeta {
  readonly lang: StudyLang;
  /** `request`: options.lang gave it; `detected`: read from the document. */
  readonly langSource?: 'request' | 'detected';
  readonly mcqCount: number;
  readonly fillCount: number;
  /** `options.maxCostUsd`: the job's spending limit, when it has one. */
  readonly maxCostUsd?: number;
  /** Stages finished so far. */
  readonly stages: Partial<Record<JobStage, StageMeta>>;
  /** Every attempt of the job so far, in order. */
  readonly attempts: readonly Attempt[];
  readonly failedStage?: JobStage;
}

/** `GET /v1/jobs/:id`: plain JSON, so a shared store (Redis) can hold it as it is. */
export interface JobView {
  readonly jobId: string;
  readonly status: JobStatus;
  readonly progress: number;
  readonly stage: JobPosition;
  /** When succeeded, every stage's result; when failed, the stages it finished (absent when none). */
  readonly result?: JobResult | PartialJobResult;
  readonly error?: JobError;
  /**
   * USD spent so far: the sum of every attempt's `costUsd` over all stages and parts (a resumed job's
   * finished parts counted once); null while no attempt could be priced.
   */
  readonly costUsd?: number | null;
  readonly meta?: JobMeta;
  /** Epoch ms. */
  readonly createdAt: number;
  /** Epoch ms: when the registry saw the job's actor reach its final state. */
  readonly finishedAt?: number;
  /** `true` on an `interrupted` job: `POST /v1/jobs/:id/resume` with the same key headers continues it. */
  readonly resumable?: true;
}

/**
 * What a resume needs beyond the view, kept in the job's record while the job may still be resumed
 * (queued, running, interrupted) and dropped once it ended for good. No key: the keys are compared by
 * salted fingerprints (HMAC-SHA256 under the job's own random salt), and the document is read again from
 * the document store by its id.
 */
export interface JobResumeData {
  readonly documentId: string;
  /** The pages the job works on (all when absent). */
  readonly pages?: PageRange;
  /** `jobCacheKey` of the document's sha256 and `pages`: a resume refuses a document that is not the one the job started on. */
  readonly cacheKey: string;
  /** The chain's providers, in the job's order. */
  readonly providers: readonly ProviderId[];
  readonly keySalt: string;
  /** Per provider of the chain: HMAC-SHA256(keySalt, key), hex. */
  readonly keyFingerprints: Readonly<Partial<Record<ProviderId, string>>>;
  readonly notes: NotesResult | null;
  readonly mcq: McqResult | null;
  readonly fill: FillResult | null;
  /** Finished steps of the stage in progress. */
  readonly finishedParts: readonly FinishedPart[];
}

/** A page range of the job's document, 1-based and inclusive. */
export interface PageRange {
  readonly from: number;
  readonly to: number;
}

/**
 * A job's key to the results cache and to its resume: the document's sha256, and the pages asked for
 * (the same document's other pages are other material). The whole document keeps the bare sha256.
 */
export function jobCacheKey(sha256: string, pages: PageRange | undefined): string {
  return pages === undefined ? sha256 : `${sha256}#pages=${pages.from}-${pages.to}`;
}

/** What a status store holds: the view, and while the job may be resumed, what a resume needs. */
export interface JobRecord extends JobView {
  readonly resume?: JobResumeData;
}
