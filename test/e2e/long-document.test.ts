import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/actors/types.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { generateStudyTask, type FillResult, type McqResult, type StudyProgress } from '../../src/study/index.js';
import { longDocument } from '../study/long-text.js';
import { keys, startGateway } from './rig.js';
import { Secret } from '../../src/security/secret.js';

/**
 * A document over the part budget goes through the whole study pipeline (notes per part, merge,
 * questions per part, the combined near-duplicate check) with the real adapters and the emulator:
 * the questions of different parts must survive being combined (they used to fail
 * INVALID_PROVIDER_OUTPUT because every part's first question was the same).
 */
describe('a long document in parts, end to end', () => {
  let emulator: Emulator;
  let gateway: Gateway;

  beforeAll(async () => {
    emulator = await startEmulator();
    gateway = startGateway(emulator);
  });
  afterAll(async () => {
    await gateway.stop();
    await emulator.close();
  });

  it.each([
    ['mcq', 'en', 'claude'],
    ['fill', 'ko', 'gpt'],
    ['mcq', 'ko', 'timelygpt'],
  ] as const)('%s in %s through %s: every question of every part is kept', async (task, lang, provider) => {
    const progress: StudyProgress[] = [];
    const count = 12;
    const outcome = await generateStudyTask(gateway, {
      task,
      text: longDocument(6, lang),
      lang,
      count,
      chain: [{ provider, apiKey: new Secret(keys[provider]) }],
      budgetTokens: 500,
      onProgress: (item) => progress.push(item),
    });
    if (outcome.status !== 'succeeded') throw new Error(`expected success, got ${JSON.stringify(outcome)}`);
    expect(outcome.provider).toBe(provider);
    const questions = (outcome.value as McqResult | FillResult).questions;
    expect(questions).toHaveLength(count);
    expect(new Set(questions.map((question) => question.id)).size).toBe(count);
    // It really was done in parts, for the notes and for the questions.
    expect(Math.max(...progress.filter((item) => item.stage === 'notes').map((item) => item.parts))).toBeGreaterThan(2);
    expect(Math.max(...progress.filter((item) => item.stage === task).map((item) => item.parts))).toBeGreaterThan(2);
    expect(outcome.attempts.filter((attempt) => attempt.outcome !== 'succeeded')).toEqual([]);
  });
});
