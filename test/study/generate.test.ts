import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { ChainLink } from '../../src/actors/types.js';
import { allocateCount } from '../../src/study/generate.js';
import { generateStudyTask, type NotesResult, type StudyProgress } from '../../src/study/index.js';
import { estimateTokens } from '../../src/study/split.js';
import { createFakeGateway, markerResponder, readMarker } from './fake-gateway.js';
import { longDocument } from './long-text.js';
import { Secret } from '../../src/security/secret.js';

const chain: readonly ChainLink[] = [{ provider: 'claude', apiKey: new Secret('test-claude-key-0001') }];
const notes: NotesResult = {
  keyConcepts: [
    { id: 'c1', term: 'Process', definition: 'A program in execution', importance: 'high' },
    { id: 'c2', term: 'Thread', definition: 'A unit of execution', importance: 'medium' },
  ],
  sections: [],
  glossary: [],
};

describe('generateStudyTask', () => {
  it('runs notes first for mcq without notes, and tags every attempt with its task', async () => {
    const gateway = createFakeGateway(markerResponder);
    const seen: string[] = [];
    const outcome = await generateStudyTask(gateway, { task: 'mcq', text: 'A process is a program in execution.', lang: 'en', count: 3, chain, onAttempt: (attempt) => seen.push(attempt.task ?? '?') });
    expect(outcome.status).toBe('succeeded');
    if (outcome.status !== 'succeeded') return;
    expect(gateway.requests.map((request) => request.task)).toEqual(['notes', 'mcq']);
    expect(outcome.attempts.map((attempt) => attempt.task)).toEqual(['notes', 'mcq']);
    expect(seen).toEqual(['notes', 'mcq']);
    expect('questions' in outcome.value && outcome.value.questions).toHaveLength(3);
    expect(outcome.usage).toEqual({ inputTokens: 200, outputTokens: 100 });
  });

  it('grounds mcq on the given notes without a notes call, and puts the marker in the prompt', async () => {
    const gateway = createFakeGateway(markerResponder);
    const outcome = await generateStudyTask(gateway, { task: 'fill', text: 'Threads share memory.', lang: 'ko', count: 2, notes, chain });
    expect(outcome.status).toBe('succeeded');
    expect(gateway.requests).toHaveLength(1);
    const request = gateway.requests[0];
    expect(request === undefined ? undefined : readMarker(request)).toEqual({ task: 'fill', lang: 'ko', count: 2, conceptIds: ['c1', 'c2'] });
  });

  it('re-asks once on invalid output and fails with every attempt when the re-ask is invalid too', async () => {
    const gateway = createFakeGateway((request) => (request.task === 'notes' ? markerResponder(request, 1) : '{"questions":[]}'));
    const outcome = await generateStudyTask(gateway, { task: 'mcq', text: 'Some text.', lang: 'en', count: 2, chain });
    expect(outcome.status).toBe('failed');
    if (outcome.status !== 'failed') return;
    expect(outcome).toMatchObject({ httpStatus: 502, code: 'INVALID_PROVIDER_OUTPUT' });
    expect(outcome.attempts.map((attempt) => [attempt.task, attempt.outcome])).toEqual([
      ['notes', 'succeeded'],
      ['mcq', 'failed'],
      ['mcq', 'failed'],
    ]);
    expect(outcome.attempts[1]?.message).toMatch(/only 0 of 2/);
  });

  it('reports null usage when no step reported usage', async () => {
    const gateway = createFakeGateway(markerResponder, { usage: { inputTokens: null, outputTokens: null } });
    const outcome = await generateStudyTask(gateway, { task: 'notes', text: 'Short.', lang: 'en', chain });
    expect(outcome.status === 'succeeded' && outcome.usage).toEqual({ inputTokens: null, outputTokens: null });
  });

  it('splits a 60-page text over the budget, merges the part notes, and reports progress per part', async () => {
    const text = longDocument(60);
    const budgetTokens = 6000;
    expect(estimateTokens(text)).toBeGreaterThan(budgetTokens * 3);
    const gateway = createFakeGateway(markerResponder);
    const progress: StudyProgress[] = [];
    const outcome = await generateStudyTask(gateway, { task: 'notes', text, lang: 'en', chain, budgetTokens, onProgress: (step) => progress.push(step) });
    expect(outcome.status).toBe('succeeded');
    const partRequests = gateway.requests.filter((request) => request.messages[0]?.content.includes('<document>'));
    const mergeRequests = gateway.requests.filter((request) => request.messages[0]?.content.includes('<part index='));
    expect(partRequests.length).toBeGreaterThan(3);
    expect(mergeRequests).toHaveLength(1);
    // No prompt carries the whole document, and every document part is within the budget.
    for (const request of gateway.requests) {
      const content = request.messages.map((message) => message.content).join('\n');
      expect(content.length).toBeLessThan(text.length / 2);
      const documentPart = /<document>\n([\s\S]*)\n<\/document>/.exec(content)?.[1];
      if (documentPart !== undefined) expect(estimateTokens(documentPart)).toBeLessThanOrEqual(budgetTokens);
    }
    const parts = partRequests.length + 1;
    expect(progress).toEqual(Array.from({ length: parts }, (_, index) => ({ stage: 'notes', part: index + 1, parts })));
  });

  it('spreads questions across the parts of a long document, grounded on the merged notes', async () => {
    const gateway = createFakeGateway(markerResponder);
    const progress: StudyProgress[] = [];
    const outcome = await generateStudyTask(gateway, { task: 'mcq', text: longDocument(20), lang: 'en', count: 9, chain, budgetTokens: 2500, onProgress: (step) => progress.push(step) });
    expect(outcome.status).toBe('succeeded');
    if (outcome.status !== 'succeeded' || !('questions' in outcome.value)) return;
    const questionRequests = gateway.requests.filter((request) => request.task === 'mcq');
    expect(questionRequests.length).toBeGreaterThan(1);
    const asked = questionRequests.map((request) => readMarker(request).count ?? 0);
    expect(asked.reduce((sum, count) => sum + count, 0)).toBe(9);
    const merged = gateway.requests.find((request) => request.messages[0]?.content.includes('<part index='));
    expect(merged).toBeDefined();
    for (const request of questionRequests) expect(readMarker(request).conceptIds).toEqual(['c1', 'c2', 'c3']);
    expect(outcome.value.questions.map((question) => question.id)).toEqual(['q1', 'q2', 'q3', 'q4', 'q5', 'q6', 'q7', 'q8', 'q9']);
    const mcqProgress = progress.filter((step) => step.stage === 'mcq');
    expect(mcqProgress.map((step) => step.part)).toEqual(questionRequests.map((_, index) => index + 1));
  });

  it('keeps at most `concurrency` part calls in flight', async () => {
    let inFlight = 0;
    let peak = 0;
    const gateway = createFakeGateway(async (request, call) => {
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      await Promise.resolve();
      await Promise.resolve();
      inFlight -= 1;
      return markerResponder(request, call);
    });
    const outcome = await generateStudyTask(gateway, { task: 'notes', text: longDocument(10), lang: 'en', chain, budgetTokens: 800, concurrency: 3 });
    expect(outcome.status).toBe('succeeded');
    expect(peak).toBe(3);
  });

  it('fails with the failing part, aborts the parts still in flight, and keeps all attempts', async () => {
    const gateway = createFakeGateway(async (request, call) => {
      if (request.messages[0]?.content.includes('part 2 of')) return { text: '{"keyConcepts":[', truncated: true };
      await new Promise((resolve) => setImmediate(resolve));
      return markerResponder(request, call);
    });
    const outcome = await generateStudyTask(gateway, { task: 'notes', text: longDocument(10), lang: 'en', chain, budgetTokens: 800 });
    expect(outcome.status).toBe('failed');
    if (outcome.status !== 'failed') return;
    expect(outcome.code).toBe('INVALID_PROVIDER_OUTPUT');
    expect(outcome.attempts.some((attempt) => attempt.errorClass === 'invalid_output')).toBe(true);
    expect(gateway.requests.some((request) => request.messages[0]?.content.includes('<part index='))).toBe(false);
  });

  it('ends aborted when the caller aborts', async () => {
    const controller = new AbortController();
    const gateway = createFakeGateway((request, call) => {
      controller.abort();
      return markerResponder(request, call);
    });
    const outcome = await generateStudyTask(gateway, { task: 'mcq', text: 'text', lang: 'en', chain, signal: controller.signal });
    expect(outcome.status).toBe('aborted');
    expect(gateway.requests).toHaveLength(1);
  });
});

describe('generateStudyTask and the caller\'s signal', () => {
  it('carries the caller aborting mid-way into the parts in flight, and stops starting new ones', async () => {
    const controller = new AbortController();
    const seen: boolean[] = [];
    const gateway = createFakeGateway(async (request, call) => {
      if (call === 3) controller.abort();
      await new Promise((resolve) => setImmediate(resolve));
      return markerResponder(request, call);
    });
    const generate = gateway.generate.bind(gateway);
    gateway.generate = async (input) => {
      const outcome = await generate(input);
      seen.push(input.signal?.aborted ?? false);
      return outcome;
    };
    const outcome = await generateStudyTask(gateway, { task: 'notes', text: longDocument(10), lang: 'en', chain, budgetTokens: 800, concurrency: 2, signal: controller.signal });
    expect(outcome.status).toBe('aborted');
    // Parts 1 and 2 ran before the abort; part 3 (which aborted) and part 4, in flight with it, saw their signal aborted.
    expect(seen.slice(2).every(Boolean)).toBe(true);
    expect(gateway.requests.length).toBeLessThanOrEqual(4);
  });

  it('leaves no listener on the caller\'s signal once a run is over, one part or many', async () => {
    const controller = new AbortController();
    const gateway = createFakeGateway(markerResponder);
    expect((await generateStudyTask(gateway, { task: 'notes', text: 'text', lang: 'en', chain, signal: controller.signal })).status).toBe('succeeded');
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    expect((await generateStudyTask(gateway, { task: 'notes', text: longDocument(10), lang: 'en', chain, budgetTokens: 800, signal: controller.signal })).status).toBe('succeeded');
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});

describe('allocateCount', () => {
  it.each([
    [10, [1, 1], [5, 5]],
    [10, [3, 1], [8, 2]],
    [5, [1, 1, 1], [2, 2, 1]],
    [2, [1, 1, 1, 1], [1, 1, 0, 0]],
  ])('splits %i over %j as %j', (count, weights, expected) => {
    expect(allocateCount(count, weights)).toEqual(expected);
  });
});
