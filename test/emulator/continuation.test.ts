/**
 * Continuation requests (docs/emulator.md "Streams"): messages ending with the answer so far (an assistant
 * message) and a user message holding `study-helper-continue:` are answered with the rest of the answer the
 * messages before them get — that answer after the prefix — on each provider's route; a prefix the answer
 * does not begin with gets the whole answer again. The rule is checked against the emulator's own whole
 * answer to the same request, asked first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import type { GenerationRequest } from '../../src/providers/index.js';
import { buildNotesRequest, continuationRequest } from '../../src/study/index.js';

const request = buildNotesRequest({ text: 'Photosynthesis converts light energy into chemical energy. Chlorophyll absorbs light in the chloroplasts.', lang: 'en' });

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.close();
});

type Ask = (request: GenerationRequest) => Promise<string>;

const claude: Ask = async (asked) => {
  const response = await fetch(`${emulator.anthropicBaseUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'test-claude-key-0001', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'claude-emu', max_tokens: asked.maxOutputTokens, system: asked.system, messages: asked.messages }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { content: { text: string }[] }).content[0]?.text ?? '';
};

const gpt: Ask = async (asked) => {
  const response = await fetch(`${emulator.openaiBaseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer test-gpt-key-0001' },
    body: JSON.stringify({ model: 'gpt-emu', messages: [{ role: 'system', content: asked.system }, ...asked.messages] }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content ?? '';
};

const timelygpt: Ask = async (asked) => {
  const auth = await fetch(`${emulator.timelygptBaseUrl}/sdk-auth/authenticate`, { headers: { 'X-Timely-API': 'test-timely-key-0001' } });
  const token = ((await auth.json()) as { data: { access_token: string } }).data.access_token;
  const response = await fetch(`${emulator.timelygptBaseUrl}/llm-completion`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ model: 'timely-emu', instructions: asked.system, messages: asked.messages }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { message: string }).message;
};

describe('the emulator continues an answer from the prefix a continuation request carries', () => {
  it.each([
    ['claude', claude],
    ['gpt', gpt],
    ['timelygpt', timelygpt],
  ] as const)('%s: the rest after the prefix, at any cut; the whole answer again after a foreign prefix', async (_name, ask) => {
    const whole = await ask(request);
    expect(whole.length).toBeGreaterThan(100);
    for (const cut of [1, Math.floor(whole.length / 3), whole.length - 1]) {
      const prefix = whole.slice(0, cut);
      expect(prefix + (await ask(continuationRequest(request, prefix)))).toBe(whole);
    }
    expect(await ask(continuationRequest(request, '{"notes":"another model'))).toBe(whole);
  });
});
