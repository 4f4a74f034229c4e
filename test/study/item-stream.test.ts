import { describe, expect, it } from 'vitest';
import type { ChainLink } from '../../src/actors/types.js';
import { generateStudyTask, type NotesResult } from '../../src/study/index.js';
import type { StudyReset } from '../../src/study/item-stream.js';
import type { StudyItem } from '../../src/study/stream-items.js';
import { Secret } from '../../src/security/secret.js';
import { createFakeGateway, markerResponder } from './fake-gateway.js';
import { longDocument } from './long-text.js';

const chain: readonly ChainLink[] = [{ provider: 'claude', apiKey: new Secret('test-claude-key-0001') }];

type Event = { type: 'item'; item: StudyItem; settled: boolean } | { type: 'reset'; reset: StudyReset } | { type: 'attempt'; task: string | undefined };

/** Runs a task and records its items and resets, and whether each item came before the task settled. */
async function recordRun(options: Parameters<typeof generateStudyTask>[1], gatewayOptions: { deltaChars?: number } = { deltaChars: 7 }, respond = markerResponder) {
  const events: Event[] = [];
  let settled = false;
  const gateway = createFakeGateway(respond, gatewayOptions);
  const outcome = await generateStudyTask(gateway, {
    ...options,
    onItem: (item) => events.push({ type: 'item', item, settled }),
    onReset: (reset) => events.push({ type: 'reset', reset }),
    onAttempt: (attempt) => events.push({ type: 'attempt', task: attempt.task }),
  });
  settled = true;
  return { outcome, events };
}

/** The items after the last reset: what the client holds when the task is done. */
function held(events: readonly Event[]): StudyItem[] {
  const lastReset = events.map((event) => event.type).lastIndexOf('reset');
  return events.slice(lastReset + 1).flatMap((event) => (event.type === 'item' ? [event.item] : []));
}

/** The final result's elements written out: notes lists in their order, or the questions. */
function elementsOf(value: unknown): StudyItem[] {
  if (typeof value === 'object' && value !== null && 'keyConcepts' in value) {
    const notes = value as NotesResult;
    return [
      ...notes.keyConcepts.map((concept) => ({ kind: 'keyConcept', value: concept }) as StudyItem),
      ...notes.sections.map((section) => ({ kind: 'section', value: section }) as StudyItem),
      ...notes.glossary.map((entry) => ({ kind: 'glossaryEntry', value: entry }) as StudyItem),
    ];
  }
  return (value as { questions: unknown[] }).questions.map((question) => ({ kind: 'question', value: question }) as StudyItem);
}

describe('generateStudyTask streams the elements of its result', () => {
  it('notes: items arrive from the streamed output, before the task ends, and are exactly the result', async () => {
    const { outcome, events } = await recordRun({ task: 'notes', text: 'A process is a program in execution. Threads share memory.', lang: 'en', chain });
    expect(outcome.status).toBe('succeeded');
    if (outcome.status !== 'succeeded') return;
    // Every item came while the one attempt was still streaming, before it was recorded.
    expect(events.map((event) => event.type)).toEqual([...elementsOf(outcome.value).map(() => 'item'), 'attempt']);
    expect(held(events)).toEqual(elementsOf(outcome.value));
  });

  it('mcq: only the questions are items (the grounding notes are not the result)', async () => {
    const { outcome, events } = await recordRun({ task: 'mcq', text: 'A process is a program in execution. Threads share memory.', lang: 'en', count: 3, chain });
    expect(outcome.status).toBe('succeeded');
    if (outcome.status !== 'succeeded') return;
    expect(events.every((event) => event.type === 'attempt' || (event.type === 'item' && event.item.kind === 'question'))).toBe(true);
    expect(held(events)).toEqual(elementsOf(outcome.value));
  });

  it('an answer that fails the whole-answer checks after items were sent resets them; the re-ask streams again', async () => {
    // First answer: valid notes elements, then a key concept id repeated (the whole answer fails its check).
    const bad = JSON.stringify({ keyConcepts: [{ id: 'c1', term: 'Process', definition: 'A program running', importance: 'high' }, { id: 'c1', term: 'Thread', definition: 'A unit of work', importance: 'low' }], sections: [], glossary: [] });
    const { outcome, events } = await recordRun({ task: 'notes', text: 'A process is a program in execution.', lang: 'en', chain }, { deltaChars: 5 }, (request, call) => (call === 1 ? bad : markerResponder(request, call)));
    expect(outcome.status).toBe('succeeded');
    if (outcome.status !== 'succeeded') return;
    const types = events.map((event) => event.type).filter((type) => type !== 'attempt');
    expect(types[0]).toBe('item');
    expect(types.filter((type) => type === 'reset')).toHaveLength(1);
    expect(events.find((event) => event.type === 'reset')).toEqual({ type: 'reset', reset: { provider: 'claude', reason: 'claude failed (invalid_output); the next answer starts over' } });
    expect(held(events)).toEqual(elementsOf(outcome.value));
  });

  it('a provider that does not stream: the items come when the step succeeds, still before the task ends', async () => {
    const { outcome, events } = await recordRun({ task: 'notes', text: 'A process is a program in execution.', lang: 'en', chain }, {});
    if (outcome.status !== 'succeeded') throw new Error('expected success');
    expect(events.map((event) => event.type)).toEqual(['attempt', ...elementsOf(outcome.value).map(() => 'item')]);
    expect(events.every((event) => event.type !== 'item' || !event.settled)).toBe(true);
    expect(held(events)).toEqual(elementsOf(outcome.value));
  });

  it('questions of a long document: items in part order, renumbered, exactly the combined result', async () => {
    const { outcome, events } = await recordRun({ task: 'fill', text: longDocument(20), lang: 'en', count: 9, chain, budgetTokens: 2500 });
    if (outcome.status !== 'succeeded') throw new Error('expected success');
    expect(events.filter((event) => event.type === 'reset')).toEqual([]);
    expect(held(events).map((item) => (item.value as { id: string }).id)).toEqual(['q1', 'q2', 'q3', 'q4', 'q5', 'q6', 'q7', 'q8', 'q9']);
    expect(held(events)).toEqual(elementsOf(outcome.value));
  });

  it('notes of a long document: only the final merge is streamed', async () => {
    const { outcome, events } = await recordRun({ task: 'notes', text: longDocument(20), lang: 'en', chain, budgetTokens: 2500 });
    if (outcome.status !== 'succeeded') throw new Error('expected success');
    expect(events.filter((event) => event.type === 'reset')).toEqual([]);
    expect(held(events)).toEqual(elementsOf(outcome.value));
  });
});
