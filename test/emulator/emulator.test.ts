import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { questionsProblems, notesProblems } from './study-shapes.js';

const englishText =
  'Photosynthesis converts light energy into chemical energy. Chlorophyll absorbs light in the chloroplasts. ' +
  'The Calvin cycle fixes carbon dioxide into glucose. Glucose stores energy for the plant.';
const koreanText =
  '광합성은 빛 에너지를 화학 에너지로 바꾼다. 엽록소는 엽록체에서 빛을 흡수한다. 캘빈 회로는 이산화탄소를 포도당으로 고정한다. 포도당은 식물의 에너지를 저장한다.';

function marker(task: string, lang: string, count?: number, conceptIds?: string[]): string {
  return `study-helper-task: ${JSON.stringify({ task, lang, ...(count ? { count, conceptIds } : {}) })}`;
}

async function claude(emulator: Emulator, system: string, text: string, key = 'test-claude-key-0001'): Promise<Response> {
  return fetch(`${emulator.anthropicBaseUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'claude-emu', max_tokens: 1000, system, messages: [{ role: 'user', content: text }] }),
  });
}

async function gpt(emulator: Emulator, system: string, text: string, key = 'test-gpt-key-0001'): Promise<Response> {
  return fetch(`${emulator.openaiBaseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'gpt-emu', messages: [{ role: 'system', content: system }, { role: 'user', content: text }] }),
  });
}

async function claudeJson(emulator: Emulator, system: string, text: string): Promise<unknown> {
  const body = (await (await claude(emulator, system, text)).json()) as { content: { text: string }[] };
  return JSON.parse(body.content[0]?.text ?? '') as unknown;
}

describe('emulator', () => {
  let emulator: Emulator;
  beforeAll(async () => {
    emulator = await startEmulator({ slowMs: 20 });
  });
  afterAll(async () => {
    await emulator.close();
  });
  beforeEach(() => {
    emulator.resetFaults();
    emulator.resetStats();
  });

  describe.each([
    ['en', englishText],
    ['ko', koreanText],
  ] as const)('study JSON in %s', (lang, text) => {
    it('notes have the docs/study-material.md shape and are deterministic', async () => {
      const first = await claudeJson(emulator, marker('notes', lang), text);
      expect(notesProblems(first)).toEqual([]);
      expect(await claudeJson(emulator, marker('notes', lang), text)).toEqual(first);
      if (lang === 'ko') expect(JSON.stringify(first)).toMatch(/\p{Script=Hangul}/u);
    });

    it.each([1, 4, 50])('mcq with count %i: that many valid, distinct questions on the given concepts', async (count) => {
      const answer = await claudeJson(emulator, marker('mcq', lang, count, ['c1', 'c2', 'c3']), text);
      expect(questionsProblems(answer, 'mcq', count, ['c1', 'c2', 'c3'])).toEqual([]);
    });

    it.each([1, 5, 50])('fill with count %i: one ___ per sentence, distinct', async (count) => {
      const answer = await claudeJson(emulator, marker('fill', lang, count, ['c1', 'c2']), text);
      expect(questionsProblems(answer, 'fill', count, ['c1', 'c2'])).toEqual([]);
    });
  });

  it('answers the same study JSON through every provider', async () => {
    const system = marker('mcq', 'en', 3, ['c1', 'c2']);
    const viaClaude = await claudeJson(emulator, system, englishText);
    const viaGpt = (await (await gpt(emulator, system, englishText)).json()) as { choices: { message: { content: string } }[] };
    expect(JSON.parse(viaGpt.choices[0]?.message.content ?? '')).toEqual(viaClaude);
  });

  it('a fault set for N calls fails exactly N calls, then the provider recovers', async () => {
    const set = await fetch(`${emulator.url}/_emulator/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ provider: 'claude', fault: 'overloaded', count: 2 }),
    });
    expect(set.status).toBe(200);
    const statuses = [];
    for (let i = 0; i < 3; i += 1) statuses.push((await claude(emulator, marker('notes', 'en'), englishText)).status);
    expect(statuses).toEqual([529, 529, 200]);
    expect((await gpt(emulator, marker('notes', 'en'), englishText)).status).toBe(200);
  });

  it('a fault without count lasts until reset', async () => {
    emulator.setFault({ provider: 'gpt', fault: 'http503' });
    for (let i = 0; i < 3; i += 1) expect((await gpt(emulator, marker('notes', 'en'), englishText)).status).toBe(503);
    expect((await fetch(`${emulator.url}/_emulator/faults`, { method: 'DELETE' })).status).toBe(200);
    expect((await gpt(emulator, marker('notes', 'en'), englishText)).status).toBe(200);
  });

  it('sends the exact error bodies, request ids and retry-after', async () => {
    const response = await claude(emulator, marker('notes', 'en'), englishText, 'emu-ratelimit-0001');
    expect(response.status).toBe(429);
    expect(response.headers.get('retry-after')).toBe('7');
    expect(response.headers.get('request-id')).toMatch(/^req_/);
    expect(await response.json()).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' }, request_id: expect.any(String) });
    const quota = await gpt(emulator, marker('notes', 'en'), englishText, 'emu-quota-0001');
    expect(quota.status).toBe(429);
    expect(await quota.json()).toMatchObject({ error: { code: 'insufficient_quota', param: null } });
  });

  it('content faults: fenced, stringNumbers, invalidOutput', async () => {
    const system = marker('mcq', 'en', 2, ['c1']);
    emulator.setFault({ provider: 'claude', fault: 'fenced', count: 1 });
    const fenced = ((await (await claude(emulator, system, englishText)).json()) as { content: { text: string }[] }).content[0]?.text ?? '';
    expect(fenced).toMatch(/```json\n\{/);
    emulator.setFault({ provider: 'claude', fault: 'stringNumbers', count: 1 });
    const strings = await claudeJson(emulator, system, englishText);
    expect((strings as { questions: { level: unknown }[] }).questions[0]?.level).toBe('1');
    emulator.setFault({ provider: 'claude', fault: 'invalidOutput', count: 1 });
    const invalid = await claudeJson(emulator, system, englishText);
    expect(questionsProblems(invalid, 'mcq', 2, ['c1'])).not.toEqual([]);
  });

  it('slow answers after its delay', async () => {
    emulator.setFault({ provider: 'gpt', fault: 'slow', count: 1, ms: 30 });
    const started = performance.now();
    expect((await gpt(emulator, marker('notes', 'en'), englishText)).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
  });

  it('counts calls per provider and per key fingerprint, never holding the raw key', async () => {
    await claude(emulator, marker('notes', 'en'), englishText, 'test-claude-key-0001');
    await claude(emulator, marker('notes', 'en'), englishText, 'test-claude-key-0001');
    await claude(emulator, marker('notes', 'en'), englishText, 'emu-bad-claude-0002');
    const response = await fetch(`${emulator.url}/_emulator/stats`);
    const text = await response.text();
    expect(text).not.toContain('test-claude-key');
    expect(text).not.toContain('emu-bad');
    const stats = JSON.parse(text) as ReturnType<Emulator['stats']>;
    expect(stats.claude.calls).toBe(3);
    expect(stats.claude.byKey[emulator.fingerprint('test-claude-key-0001')]).toBe(2);
    expect(stats.gpt.calls).toBe(0);
  });

  it('rejects an unknown fault at the control endpoint', async () => {
    const response = await fetch(`${emulator.url}/_emulator/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ provider: 'claude', fault: 'meteor' }),
    });
    expect(response.status).toBe(400);
  });

  it('issues JWT-looking TimelyGPT tokens', async () => {
    const response = await fetch(`${emulator.timelygptBaseUrl}/sdk-auth/authenticate`, { headers: { 'X-Timely-API': 'test-timely-key-0001' } });
    const body = (await response.json()) as { success: boolean; data: { access_token: string } };
    expect(body.success).toBe(true);
    expect(body.data.access_token.split('.')).toHaveLength(3);
    expect(body.data.access_token.startsWith('eyJ')).toBe(true);
  });
});
