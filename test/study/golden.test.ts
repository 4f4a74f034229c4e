import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Task } from '../../src/providers/index.js';
import { validateStudyAnswer } from '../../src/study/index.js';

/**
 * Golden files: realistic model outputs (Korean and English; fenced, wrapped in prose, truncated,
 * duplicated, wrong types, legacy field names, answers given as text) and what normalization,
 * the schema and the quality checks make of each.
 */

interface GoldenCase {
  readonly file: string;
  readonly task: Task;
  readonly truncated?: boolean;
  readonly context?: { readonly count: number; readonly conceptIds: readonly string[] };
}

const directory = new URL('../fixtures/model-outputs/', import.meta.url);
const read = (name: string): string => readFileSync(new URL(name, directory), 'utf8');
const cases = JSON.parse(read('cases.json')) as GoldenCase[];

describe('model outputs (golden files)', () => {
  it.each(cases)('$file', (golden) => {
    const expected: unknown = JSON.parse(read(golden.file.replace(/\.txt$/, '.expected.json')));
    const result = validateStudyAnswer(
      golden.task,
      { text: read(golden.file), model: 'fixture', usage: { inputTokens: null, outputTokens: null }, truncated: golden.truncated ?? false },
      golden.context,
    );
    expect(result).toEqual(expected);
  });

  it('covers both languages and both outcomes', () => {
    const outcomes = cases.map((golden) => (JSON.parse(read(golden.file.replace(/\.txt$/, '.expected.json'))) as { ok: boolean }).ok);
    expect(outcomes).toContain(true);
    expect(outcomes).toContain(false);
    expect(cases.some((golden) => golden.file.includes('-ko-'))).toBe(true);
    expect(cases.some((golden) => golden.file.includes('-en-'))).toBe(true);
  });

  it('treats a truncated answer as invalid even when its JSON happens to be complete', () => {
    const result = validateStudyAnswer('notes', { text: read('notes-en-fenced.txt'), model: 'fixture', usage: { inputTokens: 1, outputTokens: 1 }, truncated: true });
    expect(result.ok).toBe(false);
  });
});
