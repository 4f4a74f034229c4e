import { inspect } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { createGptAdapter } from '../../src/providers/index.js';
import { callOptions, PerCallKeyOpenAI } from '../../src/providers/openai-client.js';
import { Secret } from '../../src/security/secret.js';
import { rejectionOf } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';

/**
 * The GPT adapter's shared client (src/providers/openai-client.ts): each call's own key reaches the
 * upstream, the client keeps none, and a call without its key is never sent with the placeholder.
 * (Its signal handling is covered over real sockets in raw-failures.test.ts: deadline and caller abort.)
 */
describe('the shared OpenAI client with a key per call', () => {
  let emulator: Emulator;
  beforeAll(async () => {
    emulator = await startEmulator();
  });
  afterAll(async () => {
    await emulator.close();
  });
  beforeEach(() => {
    emulator.resetStats();
  });

  const body = {
    model: 'gpt-emu-1',
    messages: [
      { role: 'system' as const, content: studyRequest().system },
      { role: 'user' as const, content: 'Photosynthesis converts light energy into chemical energy.' },
    ],
  };

  it('sends each concurrent call with its own key, through one client', async () => {
    const adapter = createGptAdapter({ baseUrl: emulator.openaiBaseUrl, model: 'gpt-emu-1' });
    const keys = ['test-gpt-key-0001', 'test-gpt-key-0002', 'test-gpt-key-0003'];
    await Promise.all(
      [0, 1, 2, 0, 1, 2, 0].map((index) =>
        adapter.generate(studyRequest(), new Secret(keys[index] ?? ''), openSignal()),
      ),
    );
    const byKey = emulator.stats().gpt.byKey;
    expect(byKey).toEqual({
      [emulator.fingerprint('test-gpt-key-0001')]: 3,
      [emulator.fingerprint('test-gpt-key-0002')]: 2,
      [emulator.fingerprint('test-gpt-key-0003')]: 2,
    });
  });

  it('holds no key once its calls are done', async () => {
    const client = new PerCallKeyOpenAI({
      apiKey: 'sent-per-request',
      baseURL: emulator.openaiBaseUrl,
      maxRetries: 0,
    });
    const key = 'test-gpt-key-held-0001';
    await client.chat.completions.create(body, callOptions(new Secret(key), openSignal()));
    expect(emulator.stats().gpt.byKey[emulator.fingerprint(key)]).toBe(1);
    expect(inspect(client, { depth: 8, showHidden: true })).not.toContain('key-held');
  });

  it('refuses a call without its key before anything is sent', async () => {
    const client = new PerCallKeyOpenAI({
      apiKey: 'sent-per-request',
      baseURL: emulator.openaiBaseUrl,
      maxRetries: 0,
    });
    const error = await rejectionOf(client.chat.completions.create(body, { signal: openSignal() }));
    expect(error).toBeInstanceOf(TypeError);
    expect(emulator.stats().gpt.calls).toBe(0);
  });

  it('shows the key of a call in flight only as its fingerprint (the SDK may log its options)', () => {
    const options = callOptions(new Secret('test-gpt-key-shown-0001'), openSignal());
    expect(inspect({ ...options }, { depth: 4 })).not.toContain('key-shown');
  });
});
