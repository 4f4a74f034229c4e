/**
 * The job machine on its own: `generateStage` is replaced by a stage the test finishes by hand, so
 * progress, attempts, cancel and the dropping of keys can be driven event by event.
 */
import { describe, expect, it } from 'vitest';
import { createActor, fromPromise } from 'xstate';
import type { Attempt } from '../../src/actors/types.js';
import type { JobStreamEvent } from '../../src/jobs/index.js';
import { jobMachine, stageProgress, type StageActorInput } from '../../src/machines/job.machine.js';
import { Secret } from '../../src/security/secret.js';
import type { StudyTaskOutcome } from '../../src/study/index.js';

const key = 'test-claude-key-0001-machine';

const notes = {
  keyConcepts: [
    { id: 'c1', term: 'photosynthesis', definition: 'Light to sugar.', importance: 'high' as const },
  ],
  sections: [{ title: 'Part 1', summary: 'Light.', bullets: ['Light.'] }],
  glossary: [],
};

function succeeded(value: unknown): StudyTaskOutcome {
  return {
    status: 'succeeded',
    value: value as never,
    provider: 'claude',
    model: 'claude-model',
    fallback: false,
    attempts: [],
    usage: { inputTokens: 1, outputTokens: 1 },
  };
}

const attempt: Attempt = {
  provider: 'claude',
  model: 'claude-model',
  outcome: 'succeeded',
  countedByBreaker: false,
  retry: 0,
  durationMs: 3,
  task: 'notes',
};

/** A job whose stages wait for the test: `stages` holds each started stage's input and its resolver. */
function startJob() {
  const stages: { input: StageActorInput; finish: (outcome: StudyTaskOutcome) => void }[] = [];
  const machine = jobMachine.provide({
    actors: {
      generateStage: fromPromise<StudyTaskOutcome, StageActorInput>(
        ({ input }) => new Promise<StudyTaskOutcome>((resolve) => stages.push({ input, finish: resolve })),
      ),
    },
  }) as typeof jobMachine;
  const inspected: string[] = [];
  const actor = createActor(machine, {
    input: {
      jobId: 'job-1',
      text: 'Photosynthesis turns light into sugar.',
      cacheKey: 'sha',
      lang: 'en',
      mcqCount: 2,
      fillCount: 2,
      chain: [{ provider: 'claude', apiKey: new Secret(key) }],
      createdAt: 1,
    },
    inspect: (event) => inspected.push(JSON.stringify(event)),
  });
  const emitted: JobStreamEvent[] = [];
  actor.on('*', (event) => emitted.push(event));
  actor.start();
  return { actor, stages, emitted, inspected };
}

async function settle(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
}

describe('job machine', () => {
  it('waits queued until the registry starts it', () => {
    const { actor, stages } = startJob();
    expect(actor.getSnapshot().value).toBe('queued');
    expect(stages).toHaveLength(0);
    actor.send({ type: 'job.start' });
    expect(actor.getSnapshot().value).toEqual({ running: 'notes' });
    expect(stages).toHaveLength(1);
  });

  it('never moves progress backwards, and ignores reports of another stage', () => {
    const { actor, emitted } = startJob();
    actor.send({ type: 'job.start' });
    actor.send({ type: 'stage.progress', stage: 'notes', part: 2, parts: 4 });
    expect(actor.getSnapshot().context.progress).toBe(stageProgress('notes', 2, 4));
    actor.send({ type: 'stage.progress', stage: 'notes', part: 1, parts: 4 });
    actor.send({ type: 'stage.progress', stage: 'fill', part: 1, parts: 1 });
    expect(actor.getSnapshot().context.progress).toBe(20);
    const values = emitted
      .filter((event) => event.type === 'progress')
      .map((event) => (event.type === 'progress' ? event.data.progress : -1));
    expect(values).toEqual([0, 20]);
  });

  it('runs notes, then mcq and fill grounded on those notes, to 100', async () => {
    const { actor, stages, emitted } = startJob();
    actor.send({ type: 'job.start' });
    actor.send({ type: 'stage.attempt', attempt });
    stages[0]?.finish(succeeded(notes));
    await settle();
    expect(stages[1]?.input).toMatchObject({ stage: 'mcq', count: 2, notes });
    stages[1]?.finish(succeeded({ questions: [] }));
    await settle();
    expect(stages[2]?.input).toMatchObject({ stage: 'fill', count: 2, notes });
    stages[2]?.finish(succeeded({ questions: [] }));
    await settle();
    const snapshot = actor.getSnapshot();
    expect(snapshot.value).toBe('succeeded');
    expect(snapshot.context).toMatchObject({ progress: 100, position: 'done', attempts: [attempt] });
    expect(emitted.at(-1)).toEqual({ type: 'done', data: { status: 'succeeded' } });
    expect(emitted.filter((event) => event.type === 'attempt')).toEqual([{ type: 'attempt', data: attempt }]);
    const values = emitted.flatMap((event) => (event.type === 'progress' ? [event.data.progress] : []));
    expect(values).toEqual([...values].sort((a, b) => a - b));
    expect(values.at(-1)).toBe(100);
  });

  it('ends failed with the contract error of the stage that failed', async () => {
    const { actor, stages } = startJob();
    actor.send({ type: 'job.start' });
    stages[0]?.finish({
      status: 'failed',
      httpStatus: 401,
      code: 'PROVIDER_AUTH_FAILED',
      message: 'refused',
      attempts: [attempt],
      retryAfterSeconds: 6.2,
    });
    await settle();
    const snapshot = actor.getSnapshot();
    expect(snapshot.value).toBe('failed');
    expect(snapshot.context.error).toEqual({
      code: 'PROVIDER_AUTH_FAILED',
      message: 'refused',
      attempts: [attempt],
      retryAfterSeconds: 7,
    });
    expect(snapshot.context.failedStage).toBe('notes');
  });

  it('aborts the stage in flight on cancel and ends cancelled at once', () => {
    const { actor, stages, emitted } = startJob();
    actor.send({ type: 'job.start' });
    const signal = stages[0]?.input.signal;
    expect(signal?.aborted).toBe(false);
    actor.send({ type: 'job.cancel' });
    expect(signal?.aborted).toBe(true);
    expect(actor.getSnapshot().value).toBe('cancelled');
    expect(emitted.at(-1)).toEqual({ type: 'done', data: { status: 'cancelled' } });
  });

  it('cancels a queued job without starting a stage', () => {
    const { actor, stages } = startJob();
    actor.send({ type: 'job.cancel' });
    expect(actor.getSnapshot().value).toBe('cancelled');
    expect(stages).toHaveLength(0);
  });

  it('treats an aborted stage (service stopping) as cancelled', async () => {
    const { actor, stages } = startJob();
    actor.send({ type: 'job.start' });
    stages[0]?.finish({ status: 'aborted', attempts: [] });
    await settle();
    expect(actor.getSnapshot().value).toBe('cancelled');
  });

  it.each(['succeeded', 'failed', 'cancelled'] as const)(
    'drops the keys on ending %s, and never shows them to an inspector',
    async (end) => {
      const { actor, stages, inspected } = startJob();
      actor.send({ type: 'job.start' });
      expect(actor.getSnapshot().context.chain).toHaveLength(1);
      if (end === 'cancelled') actor.send({ type: 'job.cancel' });
      if (end === 'failed')
        stages[0]?.finish({
          status: 'failed',
          httpStatus: 503,
          code: 'PROVIDERS_UNAVAILABLE',
          message: 'down',
          attempts: [],
        });
      if (end === 'succeeded') {
        stages[0]?.finish(succeeded(notes));
        await settle();
        stages[1]?.finish(succeeded({ questions: [] }));
        await settle();
        stages[2]?.finish(succeeded({ questions: [] }));
      }
      await settle();
      const snapshot = actor.getSnapshot();
      expect(snapshot.value).toBe(end);
      expect(snapshot.context.chain).toEqual([]);
      expect(snapshot.context.text).toBe('');
      expect(inspected.length).toBeGreaterThan(3);
      for (const line of [
        ...inspected,
        JSON.stringify(snapshot),
        JSON.stringify(actor.getPersistedSnapshot()),
      ]) {
        expect(line).not.toContain(key);
        expect(line).not.toContain(key.slice(0, 12));
      }
    },
  );
});

describe('job machine: interrupted and resuming', () => {
  const mcq = { questions: [] };
  /** A job created by a resume with `restore`; its stages wait for the test as in `startJob`. */
  function resumeJob(restore: { notes: typeof notes | null; mcq: typeof mcq | null }) {
    const stages: StageActorInput[] = [];
    const machine = jobMachine.provide({
      actors: {
        generateStage: fromPromise<StudyTaskOutcome, StageActorInput>(({ input }) => {
          stages.push(input);
          return new Promise<StudyTaskOutcome>(() => undefined);
        }),
      },
    }) as typeof jobMachine;
    const finishedPart = {
      key: 'step-1',
      stage: restore.notes === null ? ('notes' as const) : restore.mcq === null ? ('mcq' as const) : ('fill' as const),
      value: {},
      provider: 'claude' as const,
      model: 'claude-model',
      fallback: false,
      usage: { inputTokens: 1, outputTokens: 1 },
      attempts: [attempt],
    };
    const actor = createActor(machine, {
      input: {
        jobId: 'job-1',
        text: 'Photosynthesis turns light into sugar.',
        cacheKey: 'sha',
        lang: 'en',
        mcqCount: 2,
        fillCount: 2,
        chain: [{ provider: 'claude', apiKey: new Secret(key) }],
        createdAt: 1,
        restore: {
          progress: 50,
          notes: restore.notes,
          mcq: restore.mcq as never,
          fill: null,
          stages: {},
          attempts: [attempt],
          finishedParts: [finishedPart],
        },
      },
    });
    const emitted: JobStreamEvent[] = [];
    actor.on('*', (event) => emitted.push(event));
    actor.start();
    return { actor, stages, emitted, finishedPart };
  }

  it.each([
    ['nothing finished', { notes: null, mcq: null }, 'notes'],
    ['notes finished', { notes, mcq: null }, 'mcq'],
    ['notes and mcq finished', { notes, mcq }, 'fill'],
  ] as const)('a resumed job with %s waits resuming, then runs only from the first unfinished stage (%s)', async (_, restore, first) => {
    const { actor, stages, finishedPart } = resumeJob(restore);
    expect(actor.getSnapshot().value).toBe('resuming');
    actor.send({ type: 'job.start' });
    await settle();
    expect(actor.getSnapshot().value).toEqual({ running: first });
    expect(stages.map((stage) => stage.stage)).toEqual([first]);
    // The stage gets the finished steps of its own stage: they are answered from the record.
    expect(stages[0]?.finishedParts).toEqual([finishedPart]);
    // Nothing moves backwards: the progress and attempts the record kept stand.
    expect(actor.getSnapshot().context.progress).toBeGreaterThanOrEqual(50);
    expect(actor.getSnapshot().context.attempts).toEqual([attempt]);
  });

  it('job.interrupt leaves running for interrupted: final, JOB_INTERRUPTED, keys dropped, done interrupted', async () => {
    const { actor, emitted } = resumeJob({ notes, mcq: null });
    actor.send({ type: 'job.start' });
    await settle();
    actor.send({ type: 'job.interrupt' });
    const snapshot = actor.getSnapshot();
    expect(snapshot.value).toBe('interrupted');
    expect(snapshot.status).toBe('done');
    expect(snapshot.context.error?.code).toBe('JOB_INTERRUPTED');
    expect(snapshot.context.chain).toEqual([]);
    // The finished work stays for the record.
    expect(snapshot.context.notes).toEqual(notes);
    expect(snapshot.context.finishedParts).toHaveLength(1);
    expect(emitted.at(-1)).toEqual({ type: 'done', data: { status: 'interrupted' } });
  });
});

describe('job machine: what a stage is given and what it reports', () => {
  const pageMap = { firstPage: 3, starts: [0, 20] };
  const budget = { maxUsd: 1, worstCaseOf: async () => 0, allows: () => true, hold: () => undefined, settle: () => undefined, release: () => undefined } as never;
  /** A job with a page map and a budget, its stages waiting for the test, started. */
  function startFullJob(restore?: Record<string, unknown>) {
    const stages: { input: StageActorInput; finish: (outcome: StudyTaskOutcome) => void; fail: (error: Error) => void }[] = [];
    const machine = jobMachine.provide({
      actors: {
        generateStage: fromPromise<StudyTaskOutcome, StageActorInput>(
          ({ input }) => new Promise<StudyTaskOutcome>((resolve, reject) => stages.push({ input, finish: resolve, fail: reject })),
        ),
      },
    }) as typeof jobMachine;
    const actor = createActor(machine, {
      input: {
        jobId: 'job-2',
        text: 'Page three text. Page four text.',
        pageMap,
        cacheKey: 'sha',
        lang: 'en',
        mcqCount: 2,
        fillCount: 3,
        chain: [{ provider: 'claude', apiKey: new Secret(key) }],
        createdAt: 1,
        budget,
        ...(restore === undefined ? {} : { restore: restore as never }),
      },
    });
    const emitted: JobStreamEvent[] = [];
    actor.on('*', (event) => emitted.push(event));
    actor.start();
    return { actor, stages, emitted };
  }

  const part = (stage: 'notes' | 'mcq' | 'fill', name: string) => ({
    key: name,
    stage,
    value: {},
    provider: 'claude' as const,
    model: 'claude-model',
    fallback: false,
    usage: { inputTokens: 1, outputTokens: 1 },
    attempts: [],
  });

  it("hands each stage the job's page map, budget and counts, and only the finished parts of that stage", async () => {
    const restore = {
      progress: 40,
      notes,
      mcq: null,
      fill: null,
      stages: { notes: { provider: 'claude', model: 'claude-model', fallback: false, attempts: [], usage: { inputTokens: 1, outputTokens: 1 }, cached: false } },
      attempts: [],
      finishedParts: [part('notes', 'n-1'), part('mcq', 'm-1'), part('fill', 'f-1')],
    };
    const { actor, stages } = startFullJob(restore);
    // What the record kept is the job's own from the start.
    expect(actor.getSnapshot().context.stages).toEqual(restore.stages);
    expect(actor.getSnapshot().context.finishedParts).toEqual(restore.finishedParts);
    actor.send({ type: 'job.start' });
    await settle();
    const [mcqStage] = stages;
    expect(mcqStage?.input.stage).toBe('mcq');
    expect(mcqStage?.input.pageMap).toEqual(pageMap);
    expect(mcqStage?.input.budget).toBe(budget);
    expect(mcqStage?.input.count).toBe(2);
    expect(mcqStage?.input.notes).toEqual(notes);
    expect(mcqStage?.input.finishedParts.map((finished) => finished.key)).toEqual(['m-1']);
    // Once mcq succeeds its parts leave the record; the other stages' stay.
    mcqStage?.finish(succeeded({ questions: [] }));
    await settle();
    expect(actor.getSnapshot().context.finishedParts.map((finished) => finished.key)).toEqual(['n-1', 'f-1']);
    expect(stages[1]?.input.stage).toBe('fill');
    expect(stages[1]?.input.count).toBe(3);
    expect(stages[1]?.input.finishedParts.map((finished) => finished.key)).toEqual(['f-1']);
  });

  it('a new job has no finished parts, no page map or budget unless given, and keeps the restored fill', async () => {
    const plain = startJob();
    plain.actor.send({ type: 'job.start' });
    await settle();
    expect(plain.stages[0]?.input.finishedParts).toEqual([]);
    expect(plain.stages[0]?.input).not.toHaveProperty('pageMap');
    expect(plain.stages[0]?.input).not.toHaveProperty('budget');
    expect(plain.stages[0]?.input).not.toHaveProperty('count');
    const fill = { questions: [{ id: 'f1' }] };
    const restored = startFullJob({ progress: 90, notes, mcq: { questions: [] }, fill, stages: {}, attempts: [], finishedParts: [] });
    expect(restored.actor.getSnapshot().context.fill).toEqual(fill);
  });

  it('keeps each finished part once, passes items and resets on as events, and keeps no item', async () => {
    const { actor, stages, emitted } = startFullJob();
    actor.send({ type: 'job.start' });
    await settle();
    const report = stages[0]?.input.report;
    report?.({ type: 'stage.part', part: part('notes', 'n-1') });
    report?.({ type: 'stage.part', part: part('notes', 'n-1') });
    report?.({ type: 'stage.part', part: part('notes', 'n-2') });
    expect(actor.getSnapshot().context.finishedParts.map((finished) => finished.key)).toEqual(['n-1', 'n-2']);
    const item = { task: 'notes' as const, kind: 'section' as const, value: { title: 'T', summary: 'S', bullets: [] } };
    report?.({ type: 'stage.item', item });
    report?.({ type: 'stage.reset', reset: { task: 'notes', provider: 'claude', reason: 'fallback' } });
    expect(emitted.filter((event) => event.type === 'item' || event.type === 'reset')).toEqual([
      { type: 'item', data: item },
      { type: 'reset', data: { task: 'notes', provider: 'claude', reason: 'fallback' } },
    ]);
  });

  it('a stage that throws ends the job failed INTERNAL_ERROR at that stage, with its attempts', async () => {
    const { actor, stages } = startFullJob();
    actor.send({ type: 'job.start' });
    await settle();
    stages[0]?.input.report({ type: 'stage.attempt', attempt });
    stages[0]?.fail(new Error('boom'));
    await settle();
    const snapshot = actor.getSnapshot();
    expect(snapshot.value).toBe('failed');
    expect(snapshot.context.failedStage).toBe('notes');
    expect(snapshot.context.error).toEqual({ code: 'INTERNAL_ERROR', message: 'The job failed in a way the service did not expect.', attempts: [attempt] });
  });

  it.each(['job.cancel', 'job.interrupt'] as const)('%s ends a resumed job still waiting for its slot, and a queued one', (type) => {
    const resumed = startFullJob({ progress: 40, notes, mcq: null, fill: null, stages: {}, attempts: [], finishedParts: [] });
    expect(resumed.actor.getSnapshot().value).toBe('resuming');
    resumed.actor.send({ type });
    const expected = type === 'job.cancel' ? 'cancelled' : 'interrupted';
    expect(resumed.actor.getSnapshot().value).toBe(expected);
    expect(resumed.stages).toHaveLength(0);
    const queued = startFullJob();
    queued.actor.send({ type });
    expect(queued.actor.getSnapshot().value).toBe(expected);
  });

  it('an interruption aborts the stage in flight and tells how to resume', async () => {
    const { actor, stages } = startFullJob();
    actor.send({ type: 'job.start' });
    await settle();
    const signal = stages[0]?.input.signal;
    expect(signal?.aborted).toBe(false);
    actor.send({ type: 'job.interrupt' });
    expect(signal?.aborted).toBe(true);
    expect(actor.getSnapshot().context.error?.message).toBe(
      'The instance running this job stopped before the job ended. Its finished stages and parts are kept: POST /v1/jobs/:id/resume with the same key headers continues it.',
    );
  });
});

