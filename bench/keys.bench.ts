/**
 * `npm run bench -- keys`: what per-key health costs on the event loop, at 100 and at 10 000 refused keys
 * (the most refused keys a provider remembers), alternating the two sizes over rounds (medians): one refusal (a new key's
 * `key.failed` stepped into the book), one admission look-up (the provider's `isKeyRefused` guard), and the
 * counts `GET /v1/providers` and `/metrics` read. The figure that matters is the ratio: a hostile client
 * spraying bad keys must not make each refusal slower as the book fills.
 */
import { createActor } from 'xstate';
import { keyAdmission, keyBookMachine, refusedKeyCounts } from '../src/machines/key-book.machine.js';
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
}

function measure(size: number): Sample {
  const { actor } = filledBook(size);
  const added: string[] = [];
  let start = performance.now();
  for (let i = 0; i < events; i += 1) {
    const id = keyId();
    added.push(id);
    actor.send({ type: 'key.failed', keyId: id, callId: id, errorClass: 'auth', at });
  }
  const refusalUs = ((performance.now() - start) * 1000) / events;
  const keys = actor.getSnapshot().context.keys;
  // Keys still in the book (the most recent ones: at 100 the older ones were forgotten).
  const ids = added.slice(-Math.min(size, added.length));
  start = performance.now();
  let refused = 0;
  for (let i = 0; i < events * 10; i += 1)
    if (!keyAdmission(keys, ids[i % ids.length] as string, at).admit) refused += 1;
  const admissionUs = ((performance.now() - start) * 1000) / (events * 10);
  start = performance.now();
  for (let i = 0; i < 20; i += 1) refusedKeyCounts(keys);
  const countsMs = (performance.now() - start) / 20;
  actor.stop();
  if (refused === 0) throw new Error('no refused look-up: the bench measures nothing');
  return { refusalUs, admissionUs, countsMs };
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
]);
const ratio = medianOf(10_000, 'refusalUs') / medianOf(100, 'refusalUs');
const markdown = writeBenchSection({
  bench: 'keys',
  title: 'keys: per-key health on the event loop',
  settings: `\`BENCH_ROUNDS\`=${rounds}, \`BENCH_EVENTS\`=${events}`,
  measures:
    'One provider\'s key book holding 100 or 10,000 refused keys: a refusal (a new key\'s `key.failed` stepped in, the least ' +
    'recently touched key forgotten at the bound), the admission look-up of every call, the counts `GET /v1/providers` reads.',
  columns: ['refused keys', 'µs per refusal', 'µs per admission look-up', 'ms per count read'],
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
