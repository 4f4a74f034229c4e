import { assign, emit, fromPromise, setup } from 'xstate';
import type {
  FillResult,
  FinishedPart,
  JobError,
  JobPosition,
  JobStage,
  JobItem,
  JobItemsReset,
  JobStreamEvent,
  McqResult,
  NotesResult,
  StageMeta,
  StudyLang,
  StudyOutcome,
  TextPageMap,
} from './job-types.js';
import type { ApiKey, Attempt, CallBudget, ProviderId } from './types.js';

/** One provider of the job's chain, in the user's order. The key stays a `Secret` in the actor's memory. */
interface JobKey {
  readonly provider: ProviderId;
  readonly apiKey: ApiKey;
}

interface JobInput {
  readonly jobId: string;
  /** The document's text (the pages asked for). */
  readonly text: string;
  /** Where each page of `text` begins: the stages' results carry `pages`. */
  readonly pageMap?: TextPageMap;
  /** The document's identity for the results cache (its sha256, and the pages asked for). */
  readonly cacheKey: string;
  readonly lang: StudyLang;
  /** Whether `lang` was asked for or detected from the document. */
  readonly langSource?: 'request' | 'detected';
  readonly mcqCount: number;
  readonly fillCount: number;
  readonly chain: readonly JobKey[];
  /** Epoch ms. */
  readonly createdAt: number;
  /** A resumed job: what its record kept of the run that was interrupted. */
  readonly restore?: JobRestore;
  /**
   * The job's spending limit (`options.maxCostUsd`), shared by every stage and part: the fallback run of
   * each call refuses a call whose worst case would pass it, and the stage fails `BUDGET_EXCEEDED`.
   */
  readonly budget?: CallBudget;
}

/** What an interrupted job's record keeps, for its resume: finished stages, finished parts, attempts. */
export interface JobRestore {
  readonly progress: number;
  readonly notes: NotesResult | null;
  readonly mcq: McqResult | null;
  readonly fill: FillResult | null;
  readonly stages: Partial<Record<JobStage, StageMeta>>;
  readonly attempts: readonly Attempt[];
  /** Finished steps of the stage that was in progress. */
  readonly finishedParts: readonly FinishedPart[];
}

interface JobContext extends JobInput {
  /** Aborts the stage in flight (its provider calls end as `call.cancelled`, counted nowhere). */
  readonly abortController: AbortController;
  /** 0–100; never decreases. */
  readonly progress: number;
  readonly position: JobPosition;
  readonly part: number | null;
  readonly parts: number | null;
  readonly notes: NotesResult | null;
  readonly mcq: McqResult | null;
  readonly fill: FillResult | null;
  readonly stages: Partial<Record<JobStage, StageMeta>>;
  readonly attempts: readonly Attempt[];
  readonly error: JobError | null;
  readonly failedStage: JobStage | null;
  /** Finished steps of the stage in progress (the job's record keeps them; a resume skips them). */
  readonly finishedParts: readonly FinishedPart[];
}

/** What a stage actor reports to its job while it works. */
type JobStageReport =
  | { type: 'stage.progress'; stage: JobStage; part: number; parts: number }
  | { type: 'stage.attempt'; attempt: Attempt }
  | { type: 'stage.part'; part: FinishedPart }
  | { type: 'stage.item'; item: JobItem }
  | { type: 'stage.reset'; reset: JobItemsReset };

/**
 * `job.interrupt`: the job must stop here without ending for good (this instance shuts down past its grace,
 * or lost the job's lease): it is left `interrupted`, resumable elsewhere.
 */
type JobEvent = { type: 'job.start' } | { type: 'job.cancel' } | { type: 'job.interrupt' } | JobStageReport;

/** The job's emitted events are its SSE events, as they are. */
type JobEmitted = JobStreamEvent;

/** Input of `generateStage`: one stage of the pipeline through the study module. */
export interface StageActorInput {
  readonly stage: JobStage;
  readonly text: string;
  readonly pageMap?: TextPageMap;
  readonly cacheKey: string;
  readonly lang: StudyLang;
  /** Questions asked for (mcq, fill). */
  readonly count?: number;
  /** The job's notes: grounding for mcq and fill, so they never regenerate notes. */
  readonly notes?: NotesResult;
  readonly chain: readonly JobKey[];
  /** Steps of this stage already finished (a resumed job): answered from here, never asked again. */
  readonly finishedParts: readonly FinishedPart[];
  /** The job's abort signal (cancel). */
  readonly signal: AbortSignal;
  /** Sends progress and attempts to the job as they happen. */
  readonly report: (event: JobStageReport) => void;
  /** The job's spending limit, when it has one. */
  readonly budget?: CallBudget;
}

/** Where each stage sits on the 0–100 progress scale. */
const stageSpans: Readonly<Record<JobStage, { readonly start: number; readonly weight: number }>> = {
  notes: { start: 0, weight: 40 },
  mcq: { start: 40, weight: 30 },
  fill: { start: 70, weight: 30 },
};

/** Progress after `part` of `parts` of a stage; 100 is kept for the job's success. */
export function stageProgress(stage: JobStage, part: number, parts: number): number {
  const span = stageSpans[stage];
  const fraction = parts <= 0 ? 1 : Math.min(1, Math.max(0, part / parts));
  return Math.min(99, Math.floor(span.start + span.weight * fraction));
}

function stageMeta(outcome: Extract<StudyOutcome, { status: 'succeeded' }>): StageMeta {
  return {
    provider: outcome.provider,
    model: outcome.model,
    fallback: outcome.fallback,
    attempts: outcome.attempts,
    usage: outcome.usage,
    cached: outcome.cached === true,
  };
}

function stageInput(
  context: JobContext,
  stage: JobStage,
  report: (event: JobStageReport) => void,
): StageActorInput {
  const count = stage === 'mcq' ? context.mcqCount : stage === 'fill' ? context.fillCount : undefined;
  return {
    stage,
    text: context.text,
    ...(context.pageMap === undefined ? {} : { pageMap: context.pageMap }),
    cacheKey: context.cacheKey,
    lang: context.lang,
    ...(count === undefined ? {} : { count }),
    // The notes stage starts before any notes exist; mcq and fill always find the job's notes here.
    ...(context.notes === null ? {} : { notes: context.notes }),
    chain: context.chain,
    finishedParts: context.finishedParts.filter((part) => part.stage === stage),
    signal: context.abortController.signal,
    report,
    ...(context.budget === undefined ? {} : { budget: context.budget }),
  };
}

/**
 * One background job: notes → mcq → fill, each stage an invoked `generateStage` (the study module
 * through the gateway), mcq and fill grounded on the job's notes. Progress only moves forward;
 * every attempt is emitted as it happens; `job.cancel` aborts the calls in flight. The keys are
 * assigned away on entering a final state. `generateStage` is provided by the job registry. The machine
 * reads no clock: the registry notes when the job ended (its view's `finishedAt`).
 */
const jobSetup = setup({
  types: {
    input: {} as JobInput,
    context: {} as JobContext,
    events: {} as JobEvent,
    emitted: {} as JobEmitted,
  },
  actors: {
    generateStage: fromPromise<StudyOutcome, StageActorInput>(async () => {
      throw new Error('generateStage is provided by the job registry (jobMachine.provide)');
    }),
  },
  guards: {
    /** A progress report of the stage in progress that does not move the job backwards. */
    isProgressAhead: ({ context, event }) =>
      event.type === 'stage.progress' &&
      event.stage === context.position &&
      stageProgress(event.stage, event.part, event.parts) >= context.progress,
    isStageSucceeded: (_, params: { outcome: StudyOutcome }) => params.outcome.status === 'succeeded',
    /** The stage stopped because the job was cancelled or the service is stopping. */
    isStageAborted: (_, params: { outcome: StudyOutcome }) => params.outcome.status === 'aborted',
    /** The job was created by a resume (its record's stages and parts came with it). */
    isResumed: ({ context }) => context.restore !== undefined,
    /** The stage's result is already in (a resumed job): it is not run again. */
    hasStageResult: ({ context }, params: { stage: JobStage }) => context[params.stage] !== null,
  },
  actions: {
    enterStage: assign(({ context }, params: { stage: JobStage }) => ({
      position: params.stage,
      part: null,
      parts: null,
      progress: Math.max(context.progress, stageSpans[params.stage].start),
    })),
    recordProgress: assign(({ context, event }) => {
      if (event.type !== 'stage.progress') return {};
      return {
        progress: Math.max(context.progress, stageProgress(event.stage, event.part, event.parts)),
        part: event.part,
        parts: event.parts,
      };
    }),
    emitProgress: emit(({ context }): JobEmitted => ({
      type: 'progress',
      data: {
        progress: context.progress,
        stage: context.position,
        ...(context.part === null || context.parts === null
          ? {}
          : { part: context.part, parts: context.parts }),
      },
    })),
    /** A finished step is kept (the registry stores it with the job's record as it comes). */
    recordPart: assign(({ context, event }) =>
      event.type === 'stage.part' && !context.finishedParts.some((part) => part.key === event.part.key)
        ? { finishedParts: [...context.finishedParts, event.part] }
        : {},
    ),
    recordAttempt: assign(({ context, event }) =>
      event.type === 'stage.attempt' ? { attempts: [...context.attempts, event.attempt] } : {},
    ),
    emitAttempt: emit(({ event }): JobEmitted => {
      if (event.type !== 'stage.attempt') throw new Error(`emitAttempt on ${event.type}`);
      return { type: 'attempt', data: event.attempt };
    }),
    // Items are passed on, not kept: the stage's result is stored whole when it succeeds.
    emitItem: emit(({ event }): JobEmitted => {
      if (event.type !== 'stage.item') throw new Error(`emitItem on ${event.type}`);
      return { type: 'item', data: event.item };
    }),
    emitItemsReset: emit(({ event }): JobEmitted => {
      if (event.type !== 'stage.reset') throw new Error(`emitItemsReset on ${event.type}`);
      return { type: 'reset', data: event.reset };
    }),
    storeStageResult: assign(({ context }, params: { stage: JobStage; outcome: StudyOutcome }) => {
      const { outcome, stage } = params;
      if (outcome.status !== 'succeeded') return {};
      const end = stageSpans[stage].start + stageSpans[stage].weight;
      const stages = { ...context.stages, [stage]: stageMeta(outcome) };
      const progress = Math.max(context.progress, Math.min(99, end));
      // The stage's result now stands for its steps: the record no longer needs them.
      const finishedParts = context.finishedParts.filter((part) => part.stage !== stage);
      if (stage === 'notes') return { notes: outcome.value as NotesResult, stages, progress, finishedParts };
      if (stage === 'mcq') return { mcq: outcome.value as McqResult, stages, progress, finishedParts };
      return { fill: outcome.value as FillResult, stages, progress, finishedParts };
    }),
    storeFailure: assign((_, params: { stage: JobStage; outcome: StudyOutcome }) => {
      const { outcome } = params;
      if (outcome.status !== 'failed') return { failedStage: params.stage };
      return {
        failedStage: params.stage,
        error: {
          code: outcome.code,
          message: outcome.message,
          attempts: outcome.attempts,
          ...(outcome.retryAfterSeconds === undefined
            ? {}
            : { retryAfterSeconds: Math.ceil(outcome.retryAfterSeconds) }),
        },
      };
    }),
    storeCrash: assign(({ context }) => ({
      failedStage: context.position === 'queued' || context.position === 'done' ? null : context.position,
      error: {
        code: 'INTERNAL_ERROR',
        message: 'The job failed in a way the service did not expect.',
        attempts: context.attempts,
      },
    })),
    storeInterruption: assign(({ context }) => ({
      error: {
        code: 'JOB_INTERRUPTED',
        message:
          'The instance running this job stopped before the job ended. Its finished stages and parts are kept: ' +
          'POST /v1/jobs/:id/resume with the same key headers continues it.',
        attempts: context.attempts,
      },
    })),
    abortInFlight: ({ context }) => {
      context.abortController.abort();
    },
    completeProgress: assign({ progress: 100, position: 'done' as const, part: null, parts: null }),
    /** Keys and the document text leave the actor's memory the moment the job ends. */
    dropSecrets: assign({ chain: [], text: '' }),
    emitDone: emit((_, params: { status: 'succeeded' | 'failed' | 'cancelled' | 'interrupted' }): JobEmitted => ({
      type: 'done',
      data: { status: params.status },
    })),
  },
});

/**
 * One stage of the job: an invoked `generateStage` run whose outcome moves the job on (`next`), ends it
 * cancelled (the run was aborted) or failed. The three stages differ only in their task and successor.
 */
function stageState(
  stage: 'notes' | 'mcq' | 'fill',
  next: '#job.running.mcq' | '#job.running.fill' | '#job.succeeded',
) {
  return jobSetup.createStateConfig({
    entry: [{ type: 'enterStage', params: { stage } }, 'emitProgress'],
    invoke: {
      id: `${stage}Stage`,
      src: 'generateStage',
      input: ({ context, self }) => stageInput(context, stage, (event) => self.send(event)),
      onDone: [
        {
          guard: { type: 'isStageSucceeded', params: ({ event }) => ({ outcome: event.output }) },
          target: next,
          actions: [
            { type: 'storeStageResult', params: ({ event }) => ({ stage, outcome: event.output }) },
            'emitProgress',
          ],
        },
        {
          guard: { type: 'isStageAborted', params: ({ event }) => ({ outcome: event.output }) },
          target: '#job.cancelled',
        },
        {
          target: '#job.failed',
          actions: { type: 'storeFailure', params: ({ event }) => ({ stage, outcome: event.output }) },
        },
      ],
      onError: { target: '#job.failed', actions: 'storeCrash' },
    },
  });
}

export const jobMachine = jobSetup.createMachine({
  id: 'job',
  context: ({ input }) => ({
    ...input,
    abortController: new AbortController(),
    progress: input.restore?.progress ?? 0,
    position: 'queued',
    part: null,
    parts: null,
    notes: input.restore?.notes ?? null,
    mcq: input.restore?.mcq ?? null,
    fill: input.restore?.fill ?? null,
    stages: input.restore?.stages ?? {},
    attempts: input.restore?.attempts ?? [],
    error: null,
    failedStage: null,
    finishedParts: input.restore?.finishedParts ?? [],
  }),
  initial: 'created',
  states: {
    /** A new job waits queued; one created by a resume waits `resuming` with what its record kept. */
    created: {
      always: [{ guard: 'isResumed', target: 'resuming' }, { target: 'queued' }],
    },
    /** Waiting for a free slot; the registry sends `job.start` when one frees. */
    queued: {
      on: {
        'job.start': { target: 'running' },
        'job.cancel': { target: 'cancelled' },
        'job.interrupt': { target: 'interrupted' },
      },
    },
    /**
     * A resumed job waiting for a free slot (its view reads `queued`). On `job.start` it goes on at the
     * first stage without a result: a finished stage is never run again.
     */
    resuming: {
      on: {
        'job.start': [
          { guard: { type: 'hasStageResult', params: { stage: 'mcq' } }, target: 'running.fill' },
          { guard: { type: 'hasStageResult', params: { stage: 'notes' } }, target: 'running.mcq' },
          { target: 'running.notes' },
        ],
        'job.cancel': { target: 'cancelled' },
        'job.interrupt': { target: 'interrupted' },
      },
    },
    /** Working through the stages; progress, attempts and finished steps flow in from the stage actor. */
    running: {
      initial: 'notes',
      on: {
        'job.cancel': { target: 'cancelled' },
        'job.interrupt': { target: 'interrupted' },
        'stage.progress': { guard: 'isProgressAhead', actions: ['recordProgress', 'emitProgress'] },
        'stage.attempt': { actions: ['recordAttempt', 'emitAttempt'] },
        'stage.part': { actions: 'recordPart' },
        'stage.item': { actions: 'emitItem' },
        'stage.reset': { actions: 'emitItemsReset' },
      },
      states: {
        /** Notes for the whole document (map-reduce over parts when it is long). */
        notes: stageState('notes', '#job.running.mcq'),
        /** Multiple-choice questions grounded on the job's notes. */
        mcq: stageState('mcq', '#job.running.fill'),
        /** Fill-in-the-blank questions grounded on the job's notes. */
        fill: stageState('fill', '#job.succeeded'),
      },
    },
    /** Notes, MCQ and fill are all in; progress is 100. */
    succeeded: {
      type: 'final',
      entry: [
        'completeProgress',
        'dropSecrets',
        'emitProgress',
        { type: 'emitDone', params: { status: 'succeeded' } },
      ],
    },
    /** A stage failed on every provider (its error is the contract error body), or the job crashed. */
    failed: {
      type: 'final',
      entry: ['dropSecrets', { type: 'emitDone', params: { status: 'failed' } }],
    },
    /** Cancelled by the user; calls in flight are aborted and counted nowhere. */
    cancelled: {
      type: 'final',
      entry: ['abortInFlight', 'dropSecrets', { type: 'emitDone', params: { status: 'cancelled' } }],
    },
    /**
     * Stopped here without ending for good (shutdown past its grace, or the job's lease lost): calls in
     * flight are aborted and counted nowhere; finished stages and parts stay in the context (and the
     * record), so a resume — a new actor with them as `restore` — continues from the first unfinished part.
     */
    interrupted: {
      type: 'final',
      entry: [
        'abortInFlight',
        'storeInterruption',
        'dropSecrets',
        { type: 'emitDone', params: { status: 'interrupted' } },
      ],
    },
  },
});
