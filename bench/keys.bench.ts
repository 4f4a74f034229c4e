/**
 * `npm run bench -- keys`: what per-key health costs on the event loop, at 100 and at 10 000 refused keys
 * (the most refused keys a provider remembers), alternating the two sizes over rounds (medians): one refusal (a new key's
 * `key.failed`: a key actor spawned on its shelf, the least recently touched one stopped at the bound),
 * one admission (the provider's `key.admit`, answered by the refused key's own actor), the counts
 * `GET /v1/providers` and `/metrics` read, and the heap the refused keys hold. The figure that matters is
 * the ratio: a hostile client spraying bad keys must not make each refusal slower as the book fills.
 */
import { createActor, fromCallback } from 'xstate';
import type { CallRequest } from '../src/machines/call-request.js';
import type { KeyAnswer } from '../src/machines/key-health.machine.js';
import { keyBookMachine, refusedKeyCounts } from '../src/machines/key-book.machine.js';
import { Secret } from '../src/security/secret.js';
import { median, round, writeBenchSection } from './report.js';

const rounds = Number(process.env['BENCH_ROUNDS'] ?? 5);
const events = Number(process.env['BENCH_EVENTS'] ?? 2000);
const sizes = [100, 10_000] as const;
const at = Date.now();
let sequence = 0;
const keyId = (): string => (sequence += 1).toString(16).padStart(32, 'a');

function filledBook(size: number) {
  const actor = createActor(keyBookMachine, {
    input: { providerId: 'claude', quarantineMs: 600_000, coolingMs: 30_000, maxKeys: size },
  }).start();
  const ids: string[] = [];
  for (let i = 0; i < size; i += 1) {
    const id = keyId();
    ids.push(id);
    actor.send({ type: 'key.failed', keyId: id, callId: id, errorClass: 'quota_exhausted', at });
  }
  return { actor, ids };
}

interface Sample {
  refusalUs: number;
  admissionUs: number;
  countsMs: number;
  heapKiBPerKey: number;
}

let refused = 0;
const replyTo = createActor(
  fromCallback<KeyAnswer>(({ receive }) =>
    receive((answer) => {
      if (answer.type === 'key.refused') refused += 1;
    }),
  ),
).start();
const apiKey = new Secret('bench-key-not-a-real-key');
const callOf = (keyId: string): CallRequest => ({
  callId: 'bench',
  keyId,
  replyTo,
  request: { task: 'notes', text: 'bench', maxOutputTokens: 16 } as unknown as CallRequest['request'],
  apiKey,
  validate: () => ({ ok: true, value: {} }),
  at,
});

function measure(size: number): Sample {
  globalThis.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const { actor } = filledBook(size);
  globalThis.gc?.();
  const heapKiBPerKey = (process.memoryUsage().heapUsed - heapBefore) / 1024 / size;
  const added: string[] = [];
  let start = performance.now();
  for (let i = 0; i < events; i += 1) {
    const id = keyId();
    added.push(id);
    actor.send({ type: 'key.failed', keyId: id, callId: id, errorClass: 'auth', at });
  }
  const refusalUs = ((performance.now() - start) * 1000) / events;
  const book = actor.getSnapshot().context;
  // Keys still in the book (the most recent ones: at 100 the older ones were forgotten).
  const ids = added.slice(-Math.min(size, added.length));
  const calls = ids.map(callOf);
  start = performance.now();
  refused = 0;
  for (let i = 0; i < events * 10; i += 1) {
    const call = calls[i % calls.length] as CallRequest;
    actor.send({ type: 'key.admit', keyId: call.keyId, call, replyTo, at });
  }
  const admissionUs = ((performance.now() - start) * 1000) / (events * 10);
  start = performance.now();
  for (let i = 0; i < 20; i += 1) refusedKeyCounts(book);
  const countsMs = (performance.now() - start) / 20;
  actor.stop();
  if (refused === 0) throw new Error('no refused look-up: the bench measures nothing');
  return { refusalUs, admissionUs, countsMs, heapKiBPerKey };
}

measure(100); // warm-up, discarded
const samples = new Map<number, Sample[]>(sizes.map((size) => [size, []]));
for (let round_ = 0; round_ < rounds; round_ += 1) {
  const order = round_ % 2 === 0 ? sizes : [...sizes].reverse();
  for (const size of order) samples.get(size)?.push(measure(size));
}
const medianOf = (size: number, field: keyof Sample): number =>
  median((samples.get(size) ?? []).map((s) => s[field]));
const rows = sizes.map((size) => [
  size.toLocaleString('en'),
  round(medianOf(size, 'refusalUs'), 1),
  round(medianOf(size, 'admissionUs'), 3),
  round(medianOf(size, 'countsMs'), 3),
  round(medianOf(size, 'heapKiBPerKey'), 1),
]);
const ratio = medianOf(10_000, 'refusalUs') / medianOf(100, 'refusalUs');
const markdown = writeBenchSection({
  bench: 'keys',
  title: 'keys: per-key health on the event loop',
  settings: `\`BENCH_ROUNDS\`=${rounds}, \`BENCH_EVENTS\`=${events}`,
  measures:
    'One provider\'s key book holding 100 or 10,000 refused keys, each a key actor of its own: a refusal (a new key\'s ' +
    '`key.failed`: its actor spawned, the least recently touched one stopped at the bound), the admission every call asks ' +
    '(`key.admit`, answered by the key\'s actor), the counts `GET /v1/providers` reads, the heap per refused key.',
  columns: ['refused keys', 'µs per refusal', 'µs per admission', 'ms per count read', 'KiB heap per key'],
  rows,
  goals: [
    {
      rule: 'a refusal costs the same at 10,000 keys as at 100 (≤ 2×: a hostile client spraying bad keys cannot stall the loop)',
      met: ratio <= 2,
      measured: `${round(ratio, 2)}×`,
    },
  ],
});
process.stdout.write(`${markdown}\n`);
