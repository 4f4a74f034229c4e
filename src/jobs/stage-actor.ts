import { fromPromise } from 'xstate';
import type { Attempt, FallbackPolicy, Gateway } from '../actors/types.js';
import type { StageActorInput } from '../machines/job.machine.js';
import type { JobItem, JobStage } from '../machines/job-types.js';
import type { ApiKey } from '../machines/types.js';
import { keyRedactor, redactDeep, scrubSecrets } from '../security/redact.js';
import { generateStudyTask } from '../study/index.js';
import type { ResultCache, StudyTaskOutcome } from '../study/index.js';

/**
 * The tracing of one job (src/telemetry, when traces are exported): each stage runs inside `stage`, which
 * hands `run` the gateway its provider calls go through (one that traces each of them as a part).
 */
export interface JobTrace {
  stage<T>(stage: JobStage, gateway: Gateway, run: (gateway: Gateway) => Promise<T>): Promise<T>;
}

/** Makes a job's trace when the job is created or resumed (in its request's context). */
export interface JobTracer {
  job(jobId: string): JobTrace;
}

export interface StageActorDependencies {
  readonly gateway: Gateway;
  readonly policy: FallbackPolicy;
  /** Shared with the rest of the app: the same document, task and options are paid for once. */
  readonly cache?: ResultCache;
  /** Most document tokens in one prompt; above it a stage works in parts. */
  readonly budgetTokens?: number;
  /** Most parts a stage may split the text into (MAX_TEXT_PARTS). */
  readonly maxParts?: number;
  /** The origin of the request that created the job (`GenerateInput.origin`). */
  readonly origin?: string;
  /** The job's tracing; absent: untraced. */
  readonly trace?: JobTrace;
}

function scrubAttempt(attempt: Attempt, keys: readonly ApiKey[]): Attempt {
  return attempt.message === undefined
    ? attempt
    : { ...attempt, message: scrubSecrets(attempt.message, keys) };
}

function scrubOutcome(outcome: StudyTaskOutcome, keys: readonly ApiKey[]): StudyTaskOutcome {
  const attempts = outcome.attempts.map((attempt) => scrubAttempt(attempt, keys));
  if (outcome.status === 'failed')
    return { ...outcome, message: scrubSecrets(outcome.message, keys), attempts };
  // A model can echo the key it was called with: the result is scrubbed too, so no key leaves in a job.
  if (outcome.status === 'succeeded') return { ...outcome, value: redactDeep(outcome.value, keyRedactor(keys)), attempts };
  return { ...outcome, attempts };
}

/**
 * A signal that aborts a microtask after any of `signals` does. Both fire while XState executes an
 * action (the cancel, the stop of the invoked actor); deferring lets the gateway's actors handle the
 * abort in their own turn instead of inside another actor's action.
 */
function deferredAbort(signals: readonly AbortSignal[]): AbortSignal {
  const controller = new AbortController();
  const abort = (): void => queueMicrotask(() => controller.abort());
  for (const signal of signals) {
    if (signal.aborted) abort();
    else signal.addEventListener('abort', abort, { once: true });
  }
  return controller.signal;
}

/**
 * The job machine's `generateStage`: one stage through `generateStudyTask`. It aborts when the job
 * cancels (the job's signal) or when the actor is stopped (XState's own signal), hands the keys on as
 * `Secret`s, and scrubs them out of every message it hands back.
 */
export function createStageActor(dependencies: StageActorDependencies) {
  return fromPromise<StudyTaskOutcome, StageActorInput>(async ({ input, signal }) => {
    const abort = deferredAbort([signal, input.signal]);
    const keys = input.chain.map((link) => link.apiKey);
    const redact = keyRedactor(keys);
    const stage = (gateway: Gateway): Promise<StudyTaskOutcome> => generateStudyTask(gateway, {
      task: input.stage,
      text: input.text,
      ...(input.pageMap === undefined ? {} : { pageMap: input.pageMap }),
      lang: input.lang,
      ...(input.count === undefined ? {} : { count: input.count }),
      ...(input.notes === undefined ? {} : { notes: input.notes }),
      chain: input.chain,
      policy: dependencies.policy,
      signal: abort,
      cacheKey: input.cacheKey,
      ...(dependencies.cache === undefined ? {} : { cache: dependencies.cache }),
      ...(dependencies.budgetTokens === undefined ? {} : { budgetTokens: dependencies.budgetTokens }),
      ...(dependencies.maxParts === undefined ? {} : { maxParts: dependencies.maxParts }),
      finishedParts: input.finishedParts,
      ...(input.budget === undefined ? {} : { budget: input.budget }),
      // Each finished step goes to the job (and so to its record) as it finishes, its keys scrubbed.
      onPart: (part) => {
        if (abort.aborted) return;
        input.report({
          type: 'stage.part',
          part: {
            ...part,
            value: redactDeep(part.value, keyRedactor(keys)),
            attempts: part.attempts.map((attempt) => scrubAttempt(attempt, keys)),
          },
        });
      },
      ...(dependencies.origin === undefined ? {} : { origin: dependencies.origin }),
      // A cancelled job has left `running`: reports after the abort would go to a finished actor.
      onAttempt: (attempt) => {
        if (!abort.aborted) input.report({ type: 'stage.attempt', attempt: scrubAttempt(attempt, keys) });
      },
      // The stage's result as it is written (scrubbed like the result itself).
      onItem: (item) => {
        if (!abort.aborted) input.report({ type: 'stage.item', item: { task: input.stage, kind: item.kind, value: redactDeep(item.value, redact) } as JobItem });
      },
      onReset: (reset) => {
        if (!abort.aborted) input.report({ type: 'stage.reset', reset: { task: input.stage, ...reset } });
      },
      onProgress: (progress) => {
        if (!abort.aborted && progress.stage === input.stage) {
          input.report({
            type: 'stage.progress',
            stage: input.stage,
            part: progress.part,
            parts: progress.parts,
          });
        }
      },
    });
    const { trace } = dependencies;
    const outcome = await (trace === undefined ? stage(dependencies.gateway) : trace.stage(input.stage, dependencies.gateway, stage));
    return scrubOutcome(outcome, keys);
  });
}
