/**
 * The generation stream's writer on its own: deltas batched and scrubbed of the request's keys even when an
 * echo is split across batches; exactly one terminal event; nothing after it.
 */
import fc from 'fast-check';
import type { FastifyReply } from 'fastify';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GenerationStream } from '../../src/http/generation-stream.js';
import { parseSseBlock } from '../jobs/support.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- event bodies are read loosely
type Json = any;

const key = 'test-claude-key-0001-echo-abcdefgh';

/** A reply whose raw response records what is written (the writer needs only these members). */
function fakeReply(): { reply: FastifyReply; written: () => string; headers: () => Record<string, string> | undefined } {
  let out = '';
  let head: Record<string, string> | undefined;
  const raw = {
    destroyed: false,
    writableEnded: false,
    writableLength: 0,
    writeHead: (_status: number, headers: Record<string, string>) => {
      head = headers;
    },
    flushHeaders: () => {},
    write: (text: string) => {
      out += text;
      return true;
    },
    end: () => {
      raw.writableEnded = true;
    },
    destroy: () => {
      raw.destroyed = true;
    },
  };
  const reply = { hijack: () => {}, raw } as unknown as FastifyReply;
  return { reply, written: () => out, headers: () => head };
}

function events(text: string): { event: string; data: Json }[] {
  return text
    .split('\n\n')
    .map(parseSseBlock)
    .filter((event) => event !== undefined)
    .map((event) => ({ event: event.event, data: JSON.parse(event.data) }));
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

function open(deltaMaxChars = 16) {
  const fake = fakeReply();
  const stream = new GenerationStream(fake.reply, { task: 'notes', keys: [key], maxBufferBytes: 1 << 20, heartbeatMs: 15_000, deltaMaxChars, deltaIntervalMs: 100, onDrop: () => {} });
  return { ...fake, stream };
}

describe('GenerationStream', () => {
  it('never sends a key echoed by the model, however the output is split into deltas and batches', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 12 }), fc.integer({ min: 4, max: 80 }), fc.integer({ min: 0, max: 200 }), (cuts, batch, padding) => {
        const { stream, written } = open(batch);
        const output = `{"keyConcepts":[{"term":"${'x'.repeat(padding)}","definition":"my key is ${key} ok"}]}`;
        const points = [...new Set(cuts.map((cut) => cut % output.length))].sort((a, b) => a - b);
        let last = 0;
        for (const point of [...points, output.length]) {
          stream.delta('claude', output.slice(last, point));
          last = point;
          vi.advanceTimersByTime(150);
        }
        stream.end('done', {});
        const sent = events(written()).filter((event) => event.event === 'delta').map((event) => event.data.text as string).join('');
        // No run of 8 characters of the key is sent (the house rule for an echo, docs/errors.md).
        for (let at = 0; at + 8 <= key.length; at += 1) expect(written()).not.toContain(key.slice(at, at + 8));
        // An echo split across two batches is redacted in each (markers may repeat, with at most 7 of the key's
        // characters between them); everything around the echo arrives unchanged.
        const head = `{"keyConcepts":[{"term":"${'x'.repeat(padding)}","definition":"my key is [redacted]`;
        expect(sent.startsWith(head)).toBe(true);
        expect(sent.endsWith(' ok"}]}')).toBe(true);
        for (const gap of sent.slice(head.length, -' ok"}]}'.length).split('[redacted]')) expect(gap.replace(/[^a-z0-9]/gi, '').length).toBeLessThan(8);
      }),
      { numRuns: 200 },
    );
  });

  it('never sends 8 letters or digits of a key in a row in the joined deltas, however far apart the model spaces them', () => {
    // The rule, literally: take the text of every delta event, joined; keep its letters and digits, lowercased;
    // no 8 consecutive of them are 8 consecutive letters and digits of the key.
    const keySymbols = key.toLowerCase().replace(/[^a-z0-9]/g, '');
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 20 }), fc.integer({ min: 4, max: 600 }), (blanks, cuts, batch) => {
        const { stream, written } = open(batch);
        const output = `The key is ${[...key].join(' '.repeat(blanks))} and that is all.`;
        let at = 0;
        for (let piece = 0; at < output.length; piece += 1) {
          const next = Math.min(output.length, at + (cuts[piece % cuts.length] ?? 1));
          stream.delta('claude', output.slice(at, next));
          at = next;
          if (piece % 3 === 0) vi.advanceTimersByTime(150);
        }
        stream.end('done', {});
        const joined = events(written()).filter((event) => event.event === 'delta').map((event) => event.data.text as string).join('');
        const symbols = joined.toLowerCase().replace(/[^a-z0-9]/g, '');
        for (let from = 0; from + 8 <= keySymbols.length; from += 1) expect(symbols).not.toContain(keySymbols.slice(from, from + 8));
        expect(joined.startsWith('The key is ')).toBe(true);
        expect(joined.endsWith(' and that is all.')).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('batches deltas by time: pieces within 100 ms go as one event', () => {
    const { stream, written } = open(10_000);
    stream.delta('claude', 'a'.repeat(100));
    stream.delta('claude', 'b'.repeat(100));
    expect(written()).toBe('');
    vi.advanceTimersByTime(100);
    // The last 7 letters or digits wait for what follows them (an echo of a key may go on).
    expect(events(written())).toEqual([{ event: 'delta', data: { provider: 'claude', text: `${'a'.repeat(100)}${'b'.repeat(93)}` } }]);
    stream.attempt({ provider: 'claude', model: 'm', outcome: 'succeeded', countedByBreaker: false, retry: 0, durationMs: 1 });
    expect(events(written()).map((event) => [event.event, event.data.text?.length])).toEqual([
      ['delta', 193],
      ['delta', 7],
      ['attempt', undefined],
    ]);
  });

  it('ends with exactly one terminal event and writes nothing after it', () => {
    const { stream, written, headers } = open();
    stream.item({ kind: 'glossaryEntry', value: { term: 't', definition: `uses ${key}` } });
    stream.end('done', { task: 'notes' });
    stream.item({ kind: 'glossaryEntry', value: { term: 'u', definition: 'late' } });
    stream.end('error', { status: 500 });
    expect(headers()?.['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(events(written())).toEqual([
      { event: 'item', data: { task: 'notes', kind: 'glossaryEntry', value: { term: 't', definition: 'uses [redacted]' } } },
      { event: 'done', data: { task: 'notes' } },
    ]);
  });
});
