/**
 * Big valid answers: a provider answering megabytes of otherwise valid material held the event
 * loop for seconds (16 answers of 7 MB) and was served. An answer longer than its task can need is
 * `invalid_output` before it is parsed: the output token limit × 16 characters a token, 4096 × 16 for
 * notes and min(16000, 800 + count × 400) × 16 for MCQ (the numbers written out here, not read from the code).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateStudyAnswer } from '../../src/study/index.js';
import { postJson, request, startHarness, studyText, type Harness } from '../http/blackbox-support.js';

const directory = new URL('../fixtures/model-outputs/', import.meta.url);
const validNotes = readFileSync(new URL('notes-en-fenced.txt', directory), 'utf8');
const answer = (text: string) => ({ text, model: 'fixture', usage: { inputTokens: 1, outputTokens: 1 }, truncated: false });

/** The same notes, padded with whitespace to `length` characters: still valid JSON, still the same material. */
function padded(length: number): string {
  return validNotes + ' '.repeat(Math.max(0, length - validNotes.length));
}

describe('answer size ceiling', () => {
  it('accepts valid notes up to 4096 × 16 characters', () => {
    expect(validateStudyAnswer('notes', answer(validNotes)).ok).toBe(true);
    expect(validateStudyAnswer('notes', answer(padded(4096 * 16))).ok).toBe(true);
  });

  it('refuses the same notes one character past it, and 7 MB of them, as invalid output', () => {
    for (const length of [4096 * 16 + 1, 7 * 1024 * 1024]) {
      const verdict = validateStudyAnswer('notes', answer(padded(length)));
      expect(verdict.ok).toBe(false);
      if (!verdict.ok) expect(verdict.errors[0]).toContain(`more than the ${4096 * 16}`);
    }
  });

  it('gives question tasks room that grows with the count asked for', () => {
    const text = ' '.repeat((800 + 10 * 400) * 16 + 1);
    const verdict = validateStudyAnswer('mcq', answer(text), { count: 10, conceptIds: ['c1'] });
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.errors[0]).toContain(`more than the ${(800 + 10 * 400) * 16}`);
  });

  it('refuses an answer nested deeper than 32 levels before parsing it, and stays linear on one full of braces', () => {
    const deep = validateStudyAnswer('notes', answer(`${'['.repeat(33)}${']'.repeat(33)}`));
    expect(deep.ok).toBe(false);
    if (!deep.ok) expect(deep.errors[0]).toContain('deeper than 32');
    // 60 000 `{"a":[}` pieces: every `{` opens a candidate object that never parses; trying each would be quadratic.
    const braces = `Here: ${'{"a":[}'.repeat(8_000)}`;
    const started = process.hrtime.bigint();
    expect(validateStudyAnswer('notes', answer(braces)).ok).toBe(false);
    // A generous bound (the quadratic scan took seconds): this is a complexity check, not a timing goal.
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(2000);
  });
});

/**
 * The same ceiling travels with each call (GenerationRequest.maxAnswerChars) down to the adapter, which
 * stops reading there: through the real service and the emulator answering 1 MB of notes to every call,
 * each attempt is `invalid_output`, not counted by the breaker, having handed on at most 4096 × 16
 * characters in at most 4096 + 64 pieces (notes' output tokens, plus 64; the emulator streams 4 characters
 * a piece), and the breaker stays closed with no failure, however many such answers come (one key may
 * open it here: quorum off).
 */
describe('an oversize answer over HTTP', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await startHarness({ BREAKER_MIN_DISTINCT_KEYS: '1', PROVIDER_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await harness.close();
  });

  it('ends 502 INVALID_PROVIDER_OUTPUT, each attempt read no further than the ceiling, the breaker untouched', async () => {
    const notes = JSON.parse(validNotes.slice(validNotes.indexOf('{'), validNotes.lastIndexOf('}') + 1)) as { sections: { summary: string }[] };
    for (const section of notes.sections) section.summary += ' Chlorophyll absorbs light.'.repeat(40_000);
    harness.fault({
      provider: 'claude',
      fault: 'respond',
      status: 200,
      body: { id: 'msg_big', type: 'message', role: 'assistant', model: 'claude-emu', content: [{ type: 'text', text: JSON.stringify(notes) }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 10, output_tokens: 4000 } },
    });
    for (let index = 0; index < 4; index += 1) {
      const result = await postJson(`${harness.url}/v1/generate`, { task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en' } }, { 'x-claude-key': 'test-claude-key-0001' });
      expect(result.status, result.text).toBe(502);
      expect(result.body.error.code).toBe('INVALID_PROVIDER_OUTPUT');
      const attempts = result.body.error.attempts as { errorClass: string; countedByBreaker: boolean; streamed?: { chunks: number } }[];
      // The one re-ask (docs/errors.md: invalid_output is retried once), told why, fails the same way.
      expect(attempts).toHaveLength(2);
      expect(result.body.error.message).toContain('the answer passed');
      for (const attempt of attempts) {
        expect(attempt).toMatchObject({ errorClass: 'invalid_output', countedByBreaker: false });
        expect(attempt.streamed?.chunks).toBeLessThanOrEqual(Math.min((4096 * 16) / 4, 4096 + 64));
      }
    }
    const providers = await request(`${harness.url}/v1/providers`);
    const claude = (providers.body.providers as { id: string; breaker: { state: string; consecutiveFailures: number }; stats: { failures: number } }[]).find((p) => p.id === 'claude');
    expect(claude?.breaker).toMatchObject({ state: 'closed', consecutiveFailures: 0 });
    expect(claude?.stats.failures).toBe(0);
    await expect.poll(() => harness.emulator.stats().claude.streamsCut).toBe(harness.emulator.stats().claude.calls);
  });
});
