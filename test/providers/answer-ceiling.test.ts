/**
 * Each call's own answer ceiling (against big valid answers): through the real SDKs against the
 * emulator, an answer longer than the request's `maxAnswerChars` is not read to its end. The rule, as
 * docs/providers.md states it: the adapter hands on no more text than the ceiling, the call fails
 * `invalid_output` (never a class the breaker counts: docs/errors.md column B), and the connection is
 * closed (the emulator counts a stream its client cut). The whole answers here are 1 MB; the ceiling 8 000.
 * A stream in more text pieces than the call's output tokens + 64 is cut off the same way (each piece
 * costs the service an event through the call's actor).
 */
import { describe, expect, it } from 'vitest';
import { Secret } from '../../src/security/secret.js';
import { postFault, rejectionOf, useRig } from './fixtures.js';
import { openSignal, studyRequest } from './helpers.js';

const ceiling = 8000;
const bigText = JSON.stringify({ notes: 'Chlorophyll absorbs light in the chloroplast. '.repeat(22_000) });

const suite = useRig((emulator) => {
  emulator.resetFaults();
  emulator.resetStats();
});

const wholeAnswers = {
  claude: {
    id: 'msg_big',
    type: 'message',
    role: 'assistant',
    model: 'claude-emu-1',
    content: [{ type: 'text', text: bigText }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 250_000 },
  },
  gpt: {
    id: 'chatcmpl-big',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-emu-1',
    choices: [{ index: 0, message: { role: 'assistant', content: bigText }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: 250_000, total_tokens: 250_010 },
  },
} as const;

describe.each(['claude', 'gpt'] as const)('%s: an answer past the call\'s ceiling', (provider) => {
  it('is read no further than the ceiling, fails invalid_output, and its connection is closed', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'respond', status: 200, body: wholeAnswers[provider] });
    let received = 0;
    const error = await rejectionOf(
      suite.rig.adapters[provider].generate(
        studyRequest('notes', { maxAnswerChars: ceiling }),
        new Secret(`test-${provider}-key-0001`),
        openSignal(),
        { onDelta: (text) => (received += text.length) },
      ),
    );
    const failure = suite.rig.adapters[provider].classify(error);
    expect(failure.errorClass).toBe('invalid_output');
    expect(failure.message).toContain(`${ceiling} characters`);
    // The emulator streams 4 characters a piece: every piece up to the ceiling was handed on, none past it.
    expect(received).toBeLessThanOrEqual(ceiling);
    expect(received).toBeGreaterThan(ceiling - 4);
    await expect.poll(() => suite.rig.emulator.stats()[provider].streamsCut).toBe(1);
  });

  it('in more text pieces than the call\'s output tokens allow (+ 64) is read no further: invalid_output', async () => {
    await postFault(suite.rig.emulator, { provider, fault: 'respond', status: 200, body: wholeAnswers[provider] });
    let pieces = 0;
    const error = await rejectionOf(
      suite.rig.adapters[provider].generate(
        studyRequest('notes', { maxAnswerChars: 1_000_000, maxOutputTokens: 500 }),
        new Secret(`test-${provider}-key-0001`),
        openSignal(),
        { onDelta: () => (pieces += 1) },
      ),
    );
    const failure = suite.rig.adapters[provider].classify(error);
    expect(failure.errorClass).toBe('invalid_output');
    expect(failure.message).toContain('564 text pieces');
    expect(pieces).toBe(564);
    await expect.poll(() => suite.rig.emulator.stats()[provider].streamsCut).toBe(1);
  });

  it('is read no faster than 500 events a second after its first 1 000 (a provider pouring out events costs a bounded CPU a second)', async () => {
    // 2 500 text pieces, all sent at once by the emulator, within every bound: read whole, but paced.
    const text = 'Chlorophyll absorbs light in the chloroplast.'.padEnd(10_000, ' light');
    const body =
      provider === 'claude'
        ? { ...wholeAnswers.claude, content: [{ type: 'text', text }] }
        : { ...wholeAnswers.gpt, choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }] };
    await postFault(suite.rig.emulator, { provider, fault: 'respond', status: 200, body });
    let firstPieceAt: number | undefined;
    const answer = await suite.rig.adapters[provider].generate(
      studyRequest('notes', { maxAnswerChars: 1_000_000, maxOutputTokens: 4_000 }),
      new Secret(`test-${provider}-key-0001`),
      openSignal(),
      { onDelta: () => (firstPieceAt ??= performance.now()) },
    );
    const readMs = performance.now() - (firstPieceAt ?? 0);
    expect(answer.text).toBe(text);
    // At least 2 500 events (the pieces, plus the stream's own): 1 500 past the first 1 000, at 500 a second.
    expect(readMs).toBeGreaterThanOrEqual(2_950);
  });

  it('the same answer under a ceiling above it is read whole', async () => {
    const short = 'Chlorophyll absorbs light. '.repeat(100);
    const body =
      provider === 'claude'
        ? { ...wholeAnswers.claude, content: [{ type: 'text', text: short }] }
        : { ...wholeAnswers.gpt, choices: [{ index: 0, message: { role: 'assistant', content: short }, finish_reason: 'stop' }] };
    await postFault(suite.rig.emulator, { provider, fault: 'respond', status: 200, body });
    const answer = await suite.rig.adapters[provider].generate(
      studyRequest('notes', { maxAnswerChars: short.length }),
      new Secret(`test-${provider}-key-0001`),
      openSignal(),
    );
    expect(answer.text).toBe(short);
    expect(suite.rig.emulator.stats()[provider].streamsCut).toBe(0);
  });
});

describe('timelygpt: a whole answer past the call\'s ceiling', () => {
  const completion = (message: string): unknown => ({ type: 'final_response', message, model: 'timely-emu-1' });

  it('past 6 bytes a character (plus 64 KiB) is not read further: invalid_output', async () => {
    await postFault(suite.rig.emulator, { provider: 'timelygpt', fault: 'respond', status: 200, body: completion(bigText) });
    const error = await rejectionOf(
      suite.rig.adapters.timelygpt.generate(studyRequest('notes', { maxAnswerChars: ceiling }), new Secret('test-timelygpt-key-0001'), openSignal()),
    );
    const failure = suite.rig.adapters.timelygpt.classify(error);
    expect(failure.errorClass).toBe('invalid_output');
    expect(failure.message).toContain(`${ceiling * 6 + 65_536} bytes`);
  });

  it('under the byte bound but past the ceiling in characters: invalid_output, no text handed on', async () => {
    await postFault(suite.rig.emulator, { provider: 'timelygpt', fault: 'respond', status: 200, body: completion('x'.repeat(ceiling + 1)) });
    let received = 0;
    const error = await rejectionOf(
      suite.rig.adapters.timelygpt.generate(studyRequest('notes', { maxAnswerChars: ceiling }), new Secret('test-timelygpt-key-0001'), openSignal(), {
        onDelta: (text) => (received += text.length),
      }),
    );
    const failure = suite.rig.adapters.timelygpt.classify(error);
    expect(failure.errorClass).toBe('invalid_output');
    expect(failure.message).toContain(`${ceiling} characters`);
    expect(received).toBe(0);
  });
});
