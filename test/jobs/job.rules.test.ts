/**
 * The job machine's rules, one sentence per test, each with its expected values written out (the
 * progress scale of docs/jobs.md: notes 0–40, mcq 40–70, fill 70–99, 100 on success), never computed
 * with the machine's own `stageProgress` or `stageSpans`. `generateStage` is a stage the test finishes
 * by hand; the job is driven event by event.
 */
import { describe, expect, it } from 'vitest';
import { createActor, fromPromise } from 'xstate';
import type { Attempt } from '../../src/actors/types.js';
import { isFinalStatus, jobStatuses, type JobStreamEvent } from '../../src/jobs/index.js';
import { jobMachine, stageProgress, type StageActorInput } from '../../src/machines/job.machine.js';
import type { FillResult, McqResult, NotesResult, StudyOutcome } from '../../src/machines/job-types.js';
import { Secret } from '../../src/security/secret.js';

const notes: NotesResult = {
  keyConcepts: [{ id: 'c1', term: 'photosynthesis', definition: 'Light to sugar.', importance: 'high' }],
  sections: [{ title: 'Part 1', summary: 'Light.', bullets: ['Light.'] }],
  glossary: [],
};

const mcq: McqResult = {
  questions: [
    {
      id: 'q1',
      question: 'What does photosynthesis make?',
      options: { A: 'Sugar', B: 'Salt', C: 'Sand', D: 'Steel' },
      answer: 'A',
      explanation: 'Light to sugar.',
      conceptId: 'c1',
      level: 1,
      questionType: 'concept',
    },
  ],
};

const fill: FillResult = {
  questions: [
    {
      id: 'f1',
      sentence: 'Photosynthesis turns light into ___.',
      answer: 'sugar',
      acceptableAnswers: ['glucose'],
      hint: 'sweet',
      conceptId: 'c1',
      level: 2,
      questionType: 'application',
    },
  ],
};

const attempt: Attempt = {
  provider: 'gpt',
  model: 'gpt-model',
  outcome: 'failed',
  errorClass: 'server_error',
  httpStatus: 500,
  countedByBreaker: true,
  retry: 0,
  durationMs: 4,
  task: 'notes',
};

function succeeded(value: NotesResult | McqResult | FillResult, cached?: boolean): StudyOutcome {
  return {
    status: 'succeeded',
    value,
    provider: 'claude',
    model: 'claude-model',
    fallback: true,
    attempts: [attempt],
    usage: { inputTokens: 12, outputTokens: 34 },
    ...(cached === undefined ? {} : { cached }),
  };
}

const input = {
  jobId: 'job-rules',
  text: 'Photosynthesis turns light into sugar.',
  cacheKey: 'sha',
  lang: 'en' as const,
  mcqCount: 3,
  fillCount: 5,
  chain: [{ provider: 'claude' as const, apiKey: new Secret('test-claude-key-0002-rules') }],
  createdAt: 1,
};

/** A job whose stages wait for the test; `stages` holds each started stage's input and its resolver. */
function startJob() {
  const stages: { input: StageActorInput; finish: (outcome: StudyOutcome) => void; crash: () => void }[] = [];
  const machine = jobMachine.provide({
    actors: {
      generateStage: fromPromise<StudyOutcome, StageActorInput>(
        ({ input: stage }) =>
          new Promise<StudyOutcome>((resolve, reject) =>
            stages.push({ input: stage, finish: resolve, crash: () => reject(new Error('stage crashed')) }),
          ),
      ),
    },
  });
  const actor = createActor(machine, { input });
  const emitted: JobStreamEvent[] = [];
  actor.on('*', (event) => emitted.push(event));
  actor.start();
  const progressEvents = () => emitted.flatMap((event) => (event.type === 'progress' ? [event.data] : []));
  return { actor, stages, emitted, progressEvents };
}

async function settle(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
}

describe('job machine rules', () => {
  it('places a stage report on the scale: notes 0–40, mcq 40–70, fill 70–99', () => {
    expect(stageProgress('notes', 1, 4)).toBe(10);
    expect(stageProgress('mcq', 1, 2)).toBe(55);
    expect(stageProgress('fill', 1, 3)).toBe(80);
    expect(stageProgress('fill', 3, 3)).toBe(99);
    expect(stageProgress('notes', 9, 4)).toBe(40);
  });

  it('reads a report of zero parts as the stage done, never as no progress', () => {
    expect(stageProgress('notes', 0, 0)).toBe(40);
    expect(stageProgress('mcq', 1, 0)).toBe(70);
  });

  it('starts queued at progress 0, before any stage', () => {
    const { actor } = startJob();
    expect(actor.getSnapshot().context).toMatchObject({
      position: 'queued',
      progress: 0,
      part: null,
      parts: null,
    });
  });

  it('emits the progress of every step of a successful job, in order, to 100', async () => {
    const { actor, stages, progressEvents } = startJob();
    actor.send({ type: 'job.start' });
    stages[0]?.finish(succeeded(notes));
    await settle();
    stages[1]?.finish(succeeded(mcq));
    await settle();
    stages[2]?.finish(succeeded(fill));
    await settle();
    expect(progressEvents()).toEqual([
      { progress: 0, stage: 'notes' },
      { progress: 40, stage: 'notes' },
      { progress: 40, stage: 'mcq' },
      { progress: 70, stage: 'mcq' },
      { progress: 70, stage: 'fill' },
      { progress: 99, stage: 'fill' },
      { progress: 100, stage: 'done' },
    ]);
  });

  it('keeps each stage result in its own field, and each stage meta with whether it came from the cache', async () => {
    const { actor, stages } = startJob();
    actor.send({ type: 'job.start' });
    stages[0]?.finish(succeeded(notes, true));
    await settle();
    stages[1]?.finish(succeeded(mcq, false));
    await settle();
    stages[2]?.finish(succeeded(fill));
    await settle();
    const meta = {
      provider: 'claude',
      model: 'claude-model',
      fallback: true,
      attempts: [attempt],
      usage: { inputTokens: 12, outputTokens: 34 },
    };
    const { context } = actor.getSnapshot();
    expect(context.notes).toEqual(notes);
    expect(context.mcq).toEqual(mcq);
    expect(context.fill).toEqual(fill);
    expect(context.stages).toEqual({
      notes: { ...meta, cached: true },
      mcq: { ...meta, cached: false },
      fill: { ...meta, cached: false },
    });
  });

  it('asks the notes stage without a count or notes, mcq for mcqCount and fill for fillCount, both on the notes', async () => {
    const { actor, stages } = startJob();
    actor.send({ type: 'job.start' });
    const first = stages[0]?.input;
    expect(first).toMatchObject({ stage: 'notes', text: input.text, cacheKey: 'sha', lang: 'en' });
    expect(first !== undefined && 'count' in first).toBe(false);
    expect(first !== undefined && 'notes' in first).toBe(false);
    stages[0]?.finish(succeeded(notes));
    await settle();
    expect(stages[1]?.input).toMatchObject({ stage: 'mcq', count: 3, notes });
    stages[1]?.finish(succeeded(mcq));
    await settle();
    expect(stages[2]?.input).toMatchObject({ stage: 'fill', count: 5, notes });
  });

  it('names each invoked stage after its stage', async () => {
    const { actor, stages } = startJob();
    actor.send({ type: 'job.start' });
    expect(Object.keys(actor.getSnapshot().children)).toEqual(['notesStage']);
    stages[0]?.finish(succeeded(notes));
    await settle();
    expect(Object.keys(actor.getSnapshot().children)).toEqual(['mcqStage']);
  });

  it('hears the reports its stage sends through the report callback it was given', () => {
    const { actor, stages, emitted } = startJob();
    actor.send({ type: 'job.start' });
    stages[0]?.input.report({ type: 'stage.progress', stage: 'notes', part: 1, parts: 2 });
    stages[0]?.input.report({ type: 'stage.attempt', attempt });
    expect(actor.getSnapshot().context).toMatchObject({
      progress: 20,
      part: 1,
      parts: 2,
      attempts: [attempt],
    });
    expect(emitted.slice(-2)).toEqual([
      { type: 'progress', data: { progress: 20, stage: 'notes', part: 1, parts: 2 } },
      { type: 'attempt', data: attempt },
    ]);
  });

  it('takes a report that keeps progress where it is: its part and parts are news', () => {
    const { actor, progressEvents } = startJob();
    actor.send({ type: 'job.start' });
    actor.send({ type: 'stage.progress', stage: 'notes', part: 0, parts: 4 });
    expect(actor.getSnapshot().context).toMatchObject({ progress: 0, part: 0, parts: 4 });
    expect(progressEvents()).toEqual([
      { progress: 0, stage: 'notes' },
      { progress: 0, stage: 'notes', part: 0, parts: 4 },
    ]);
  });

  it('carries part and parts in a progress event only once a report gave them, and forgets them on the next stage', async () => {
    const { actor, stages, progressEvents } = startJob();
    actor.send({ type: 'job.start' });
    actor.send({ type: 'stage.progress', stage: 'notes', part: 3, parts: 4 });
    stages[0]?.finish(succeeded(notes));
    await settle();
    expect(progressEvents()).toEqual([
      { progress: 0, stage: 'notes' },
      { progress: 30, stage: 'notes', part: 3, parts: 4 },
      { progress: 40, stage: 'notes', part: 3, parts: 4 },
      { progress: 40, stage: 'mcq' },
    ]);
  });

  it('answers a failure without Retry-After with no retryAfterSeconds at all, and emits done failed', async () => {
    const { actor, stages, emitted } = startJob();
    actor.send({ type: 'job.start' });
    stages[0]?.finish(succeeded(notes));
    await settle();
    stages[1]?.finish({
      status: 'failed',
      httpStatus: 502,
      code: 'PROVIDER_INVALID_OUTPUT',
      message: 'bad',
      attempts: [attempt],
    });
    await settle();
    const snapshot = actor.getSnapshot();
    expect(snapshot.value).toBe('failed');
    expect(snapshot.status).toBe('done');
    expect(snapshot.context.error).toStrictEqual({
      code: 'PROVIDER_INVALID_OUTPUT',
      message: 'bad',
      attempts: [attempt],
    });
    expect(snapshot.context.failedStage).toBe('mcq');
    expect(emitted.at(-1)).toEqual({ type: 'done', data: { status: 'failed' } });
  });

  it('ends failed with INTERNAL_ERROR and the attempts so far when a stage crashes', async () => {
    const { actor, stages, emitted } = startJob();
    actor.send({ type: 'job.start' });
    actor.send({ type: 'stage.attempt', attempt });
    stages[0]?.finish(succeeded(notes));
    await settle();
    stages[1]?.crash();
    await settle();
    const snapshot = actor.getSnapshot();
    expect(snapshot.value).toBe('failed');
    expect(snapshot.status).toBe('done');
    expect(snapshot.context.failedStage).toBe('mcq');
    expect(snapshot.context.error).toStrictEqual({
      code: 'INTERNAL_ERROR',
      message: 'The job failed in a way the service did not expect.',
      attempts: [attempt],
    });
    expect(emitted.at(-1)).toEqual({ type: 'done', data: { status: 'failed' } });
  });

  it('crashes at its first stage when nobody provided generateStage', async () => {
    const actor = createActor(jobMachine, { input });
    actor.start();
    actor.send({ type: 'job.start' });
    await settle();
    const snapshot = actor.getSnapshot();
    expect(snapshot.value).toBe('failed');
    expect(snapshot.context.failedStage).toBe('notes');
    expect(snapshot.context.error?.code).toBe('INTERNAL_ERROR');
  });

  it.each(['succeeded', 'failed', 'cancelled'] as const)('stops its actor when it ends %s', async (end) => {
    const { actor, stages } = startJob();
    actor.send({ type: 'job.start' });
    if (end === 'cancelled') actor.send({ type: 'job.cancel' });
    if (end === 'failed') stages[0]?.crash();
    if (end === 'succeeded') {
      stages[0]?.finish(succeeded(notes));
      await settle();
      stages[1]?.finish(succeeded(mcq));
      await settle();
      stages[2]?.finish(succeeded(fill));
    }
    await settle();
    expect(actor.getSnapshot().value).toBe(end);
    expect(actor.getSnapshot().status).toBe('done');
  });

  it('calls succeeded, failed, cancelled and interrupted final, queued and running not', () => {
    expect(jobStatuses.map((status) => [status, isFinalStatus(status)])).toEqual([
      ['queued', false],
      ['running', false],
      ['succeeded', true],
      ['failed', true],
      ['cancelled', true],
      ['interrupted', true],
    ]);
  });
});
