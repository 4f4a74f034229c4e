/**
 * Korean means Korean, and a failure says why — through the HTTP API, the real SDKs and the emulator.
 * The emulator's `wrongLanguage` fault answers valid material in the language not asked for.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { postJson, request, startHarness, studyText, textPdf } from './blackbox-support.js';
import type { Harness, HttpResult } from './blackbox-support.js';

let harness: Harness;

beforeAll(async () => {
  harness = await startHarness();
});

afterAll(async () => {
  await harness.close();
});

beforeEach(async () => {
  await harness.reset();
});

// Keys that share no piece with a provider name (the scrubber redacts any piece of a key from messages).
const allKeys = { 'x-claude-key': 'lang-test-Qz8Lm3Rt7Wv2', 'x-gpt-key': 'lang-test-Hb4Nc9Xs1Kd6', 'x-timelygpt-key': 'lang-test-Pw5Jf2Vy8Mg3' };
const koreanText = '광합성은 빛 에너지를 포도당에 저장된 화학 에너지로 바꾼다. 엽록소는 주로 파란빛과 붉은빛을 흡수한다. 명반응은 물을 분해하여 산소를 내놓는다.';

interface AttemptBody {
  provider: string;
  outcome: string;
  errorClass?: string;
  retry: number;
  message?: string;
  task?: string;
}

function generate(body: unknown, headers: Record<string, string> = allKeys): Promise<HttpResult> {
  return postJson(`${harness.url}/v1/generate`, body, headers);
}

/** Own oracle: the share of whitespace-separated words of `texts` that hold a Hangul syllable. */
function hangulWordShare(texts: readonly string[]): number {
  const words = texts.flatMap((text) => text.split(/\s+/)).filter((word) => /[A-Za-z\uac00-\ud7a3]/.test(word));
  return words.filter((word) => /[\uac00-\ud7a3]/.test(word)).length / Math.max(1, words.length);
}

function notesProse(result: { sections: { summary: string; bullets: string[] }[]; keyConcepts: { definition: string }[] }): string[] {
  return [...result.keyConcepts.map((c) => c.definition), ...result.sections.flatMap((s) => [s.summary, ...s.bullets])];
}

describe('language check through POST /v1/generate', () => {
  it('ko asked on an English document: the answer is Korean', async () => {
    const result = await generate({ task: 'notes', text: studyText, options: { lang: 'ko' } });
    expect(result.status, result.text).toBe(200);
    expect(hangulWordShare(notesProse(result.body.result))).toBeGreaterThanOrEqual(0.6);
    expect(result.body.meta.attempts).toHaveLength(1);
  });

  it('ko asked, the first model answers in English: one re-ask saying why, then the next provider', async () => {
    harness.emulator.resetStats();
    harness.fault({ provider: 'claude', fault: 'wrongLanguage' });
    const result = await generate({ task: 'notes', text: studyText, options: { lang: 'ko' } });
    expect(result.status, result.text).toBe(200);
    const attempts = result.body.meta.attempts as AttemptBody[];
    expect(attempts.map((a) => [a.provider, a.outcome, a.errorClass ?? null, a.retry])).toEqual([
      ['claude', 'failed', 'invalid_output', 0],
      ['claude', 'failed', 'invalid_output', 1],
      ['gpt', 'succeeded', null, 0],
    ]);
    for (const attempt of attempts.slice(0, 2)) {
      expect(attempt.message).toMatch(/^The output failed validation: language: .*Korean/);
    }
    expect(result.body.meta).toMatchObject({ provider: 'gpt', fallback: true });
    expect(hangulWordShare(notesProse(result.body.result))).toBeGreaterThanOrEqual(0.6);
    expect(harness.emulator.stats().claude.calls).toBe(2);
  });

  it('mcq in ko: the wrong-language questions are refused too', async () => {
    const notes = (await generate({ task: 'notes', text: koreanText, options: { lang: 'ko' } })).body.result;
    harness.fault({ provider: 'claude', fault: 'wrongLanguage' });
    const result = await generate({ task: 'mcq', text: koreanText, options: { lang: 'ko', count: 3, notes } });
    expect(result.status, result.text).toBe(200);
    const attempts = result.body.meta.attempts as AttemptBody[];
    expect(attempts.map((a) => [a.provider, a.errorClass ?? null])).toEqual([
      ['claude', 'invalid_output'],
      ['claude', 'invalid_output'],
      ['gpt', null],
    ]);
    const stems = (result.body.result.questions as { question: string }[]).map((q) => q.question);
    expect(hangulWordShare(stems)).toBeGreaterThanOrEqual(0.6);
  });

  it('en asked on a Korean document, every model answers in Korean: 502 with the reasons', async () => {
    for (const provider of ['claude', 'gpt', 'timelygpt'] as const) harness.fault({ provider, fault: 'wrongLanguage' });
    const result = await generate({ task: 'notes', text: koreanText, options: { lang: 'en' } });
    expect(result.status, result.text).toBe(502);
    expect(result.body.error.code).toBe('INVALID_PROVIDER_OUTPUT');
    const message = result.body.error.message as string;
    for (const provider of ['claude', 'gpt', 'timelygpt']) expect(message).toContain(`${provider}: language: `);
    expect(message).toContain('English');
    const attempts = result.body.error.attempts as AttemptBody[];
    expect(attempts).toHaveLength(6);
    for (const attempt of attempts) expect(attempt.message).toMatch(/^The output failed validation: language: /);
  });
});

describe('validation reasons in attempts and the 502', () => {
  it('schema errors reach the attempt message and the 502 message, bounded', async () => {
    for (const provider of ['claude', 'gpt', 'timelygpt'] as const) harness.fault({ provider, fault: 'invalidOutput' });
    const result = await generate({ task: 'notes', text: studyText, options: { lang: 'en' } });
    expect(result.status, result.text).toBe(502);
    const attempts = result.body.error.attempts as AttemptBody[];
    for (const attempt of attempts) {
      // The emulator's invalid notes lack required fields: the schema names the first of them.
      expect(attempt.message).toMatch(/^The output failed validation: keyConcepts\[0\]\.definition: /);
      expect(attempt.message?.length).toBeLessThanOrEqual('The output failed validation: '.length + 480);
    }
    const message = result.body.error.message as string;
    expect(message).toMatch(/^The model answered, but its output failed validation\. claude: keyConcepts\[0\]\.definition: /);
    expect(message).toContain(' | gpt: ');
    expect(message.length).toBeLessThanOrEqual(100 + 960);
  });

  it('a model that echoes the key into its answer: the reasons never carry it', async () => {
    const key = `sk-ant-api03-${randomBytes(30).toString('base64url')}`;
    const repeated = `Answer ${key} again`;
    const questions = {
      questions: [
        { id: 'q1', question: 'Which one?', options: { A: repeated, B: repeated, C: 'c', D: 'd' }, answer: 'A', explanation: '', conceptId: 'c1', level: 1, questionType: 'concept' },
      ],
    };
    const envelope = {
      id: 'msg_echo',
      type: 'message',
      role: 'assistant',
      model: 'emu-claude',
      content: [{ type: 'text', text: JSON.stringify(questions) }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 10 },
    };
    harness.fault({ provider: 'claude', fault: 'respond', status: 200, body: envelope, headers: { 'content-type': 'application/json' } });
    const notes = { keyConcepts: [{ id: 'c1', term: 'photosynthesis', definition: 'Light becomes chemical energy.', importance: 'high' }], sections: [], glossary: [] };
    const result = await generate({ task: 'mcq', text: studyText, providers: ['claude'], options: { lang: 'en', count: 1, notes } }, { 'x-claude-key': key });
    expect(result.status, result.text).toBe(502);
    expect(result.body.error.attempts[0].message).toMatch(/options must be 4 distinct texts/);
    expect(result.text).not.toContain(key);
    expect(result.text.toLowerCase()).not.toContain(key.toLowerCase().slice(13, 33));
  });
});

describe('options.lang omitted: detected from the document, reported in meta', () => {
  it('a Korean text without lang → meta.lang ko, langSource detected; the material is Korean', async () => {
    const result = await generate({ task: 'notes', text: koreanText });
    expect(result.status, result.text).toBe(200);
    expect(result.body.meta).toMatchObject({ lang: 'ko', langSource: 'detected' });
    expect(hangulWordShare(notesProse(result.body.result))).toBeGreaterThanOrEqual(0.6);
  });

  it('an English text without lang → en, detected; with lang → request', async () => {
    expect((await generate({ task: 'notes', text: studyText })).body.meta).toMatchObject({ lang: 'en', langSource: 'detected' });
    expect((await generate({ task: 'notes', text: studyText, options: { lang: 'ko' } })).body.meta).toMatchObject({ lang: 'ko', langSource: 'request' });
  });

  it('a job without lang reports the detected language in its meta', async () => {
    const form = new FormData();
    const pdf = await textPdf(['Photosynthesis converts light energy into chemical energy.', 'Chlorophyll absorbs blue and red light.']);
    form.append('file', new Blob([new Uint8Array(pdf)], { type: 'application/pdf' }), 'detect.pdf');
    const upload = await request(`${harness.url}/v1/documents`, { method: 'POST', body: form });
    expect(upload.status, upload.text).toBe(201);
    const detected = await postJson(`${harness.url}/v1/jobs`, { documentId: upload.body.documentId, options: { mcqCount: 1, fillCount: 1 } }, allKeys);
    expect(detected.status, detected.text).toBe(202);
    const view = await request(`${harness.url}/v1/jobs/${detected.body.jobId}`);
    expect(view.body.meta).toMatchObject({ lang: 'en', langSource: 'detected' });
    const asked = await postJson(`${harness.url}/v1/jobs`, { documentId: upload.body.documentId, options: { lang: 'ko', mcqCount: 1, fillCount: 1 } }, allKeys);
    expect((await request(`${harness.url}/v1/jobs/${asked.body.jobId}`)).body.meta).toMatchObject({ lang: 'ko', langSource: 'request' });
    for (const id of [detected.body.jobId, asked.body.jobId]) await request(`${harness.url}/v1/jobs/${id}`, { method: 'DELETE' });
  });
});
