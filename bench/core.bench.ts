/**
 * Core micro-benchmark: what the breaker and the provider actor add to one
 * upstream call, and what a whole `generate()` (with its per-request fallback actor) adds.
 *
 * The upstream is the scripted adapter answering through a microtask, so the figures are pure
 * bookkeeping. Variants run A/B alternating over several rounds; each round's overhead is
 * (variant − direct adapter call) per call, and the report takes the median round.
 */
import { performance } from 'node:perf_hooks';
import { assign, createActor, fromPromise, fromTransition, setup, type AnyActorRef } from 'xstate';
import { createUpstreamLogic } from '../src/actors/upstream.js';
import { attemptMachine, type UpstreamAnswer, type UpstreamInput } from '../src/machines/attempt.machine.js';
import { breakerMachine } from '../src/machines/breaker.machine.js';
import { createGateway } from '../src/actors/gateway.js';
import { providerMachine, type ProviderReply } from '../src/machines/provider.machine.js';
import type { GenerationRequest, ProviderAnswer } from '../src/providers/index.js';
import type { Validation } from '../src/actors/types.js';
import { Secret } from '../src/security/secret.js';
import { scriptedAdapter } from '../test/core/scripted-adapter.js';
import { codeVersion, loadAverage, machineInfo, median, round, writeBenchmarkSection } from './report.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const callsPerRound = Number(process.env.BENCH_CALLS ?? 10_000);
/** Provider actor + breaker bookkeeping per call, and a whole `gateway.generate()`, in µs. */
const goalMicroseconds = 60;
const generateGoalMicroseconds = 150;
/** `generate()` calls the heap is followed over (after a full GC at the start, the middle and the end). */
const heapRequests = Number(process.env.BENCH_HEAP_REQUESTS ?? 100_000);
/** Heap growth over those calls still called flat (the overhead bench's bound per 100,000 requests). */
const heapGrowthLimitMiB = 2;
/** A bare XState `send()` on an idle run of the machine the goals were set on (2026-11-30). */
const idleSendMicroseconds = 3.4;

const request: GenerationRequest = {
  task: 'notes',
  lang: 'en',
  system: 'bench',
  messages: [{ role: 'user', content: 'bench' }],
  jsonSchema: { type: 'object' },
  maxOutputTokens: 64,
  maxAnswerChars: 64 * 16,
};
const apiKey = 'bench-fake-key-0001';
const secret = new Secret(apiKey);

const adapters = {
  claude: scriptedAdapter('claude'),
  gpt: scriptedAdapter('gpt'),
  timelygpt: scriptedAdapter('timelygpt'),
};
/** The scripted adapter records every request; a benchmark must not grow the heap per call. */
function forgetRequests(): void {
  for (const adapter of Object.values(adapters)) adapter.requests.length = 0;
}

// ---- baseline: the same upstream called directly
const signal = new AbortController().signal;
async function directCalls(count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) await adapters.claude.generate(request, secret, signal);
}

// ---- breaker + provider actor: call.requested → provider.succeeded
const provider = createActor(
  providerMachine.provide({
    actors: { attempt: attemptMachine.provide({ actors: { upstream: createUpstreamLogic(adapters) } }) },
  }),
  { input: { providerId: 'claude', model: 'claude-model', threshold: 5, recoveryMs: 60_000 } },
).start();
const waiting = new Map<string, (reply: ProviderReply) => void>();
const caller: AnyActorRef = createActor(
  fromTransition((state: number, reply: ProviderReply) => {
    waiting.get(reply.callId)?.(reply);
    waiting.delete(reply.callId);
    return state;
  }, 0),
).start();
let callSeq = 0;
/** Accepts every answer: the bench measures bookkeeping, not validation. */
const acceptAll = (answer: ProviderAnswer): Validation<unknown> => ({ ok: true, value: answer.text });
function providerCall(): Promise<ProviderReply> {
  callSeq += 1;
  const callId = `bench:${callSeq}`;
  return new Promise((resolve) => {
    waiting.set(callId, resolve);
    provider.send({
      type: 'call.requested',
      callId,
      request,
      apiKey: secret,
      keyId: secret.fingerprint,
      replyTo: caller,
      validate: acceptAll,
      at: Date.now(),
    });
  });
}
async function providerCalls(count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) {
    const reply = await providerCall();
    if (reply.type !== 'provider.succeeded') throw new Error(`unexpected ${reply.type}`);
  }
}

// ---- diagnostics: where the provider actor's time goes
/** The same provider actor with a bare upstream promise (no stream observer, no classification). */
const bareUpstream = fromPromise<UpstreamAnswer, UpstreamInput>(({ signal: callSignal }) =>
  adapters.claude.generate(request, secret, callSignal).then((answer) => ({ answer, at: 0 })),
);
const bareProviderMachine = providerMachine.provide({
  actors: { attempt: attemptMachine.provide({ actors: { upstream: bareUpstream } }) },
});
const bareProvider = createActor(bareProviderMachine, {
  input: { providerId: 'claude', model: 'claude-model', threshold: 5, recoveryMs: 60_000 },
}).start();
function bareProviderCall(): Promise<ProviderReply> {
  callSeq += 1;
  const callId = `bare:${callSeq}`;
  return new Promise((resolve) => {
    waiting.set(callId, resolve);
    bareProvider.send({
      type: 'call.requested',
      callId,
      request,
      apiKey: secret,
      keyId: secret.fingerprint,
      replyTo: caller,
      validate: acceptAll,
      at: 0,
    });
  });
}
async function bareProviderCalls(count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) await bareProviderCall();
}

/** What call-upstream adds per call besides XState: the call's AbortController and its deadline timer. */
async function abortPlumbing(count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), 60_000);
    await adapters.claude.generate(request, secret, controller.signal);
    clearTimeout(timer);
  }
}

/** The breaker alone: `breaker.admit` then `call.succeeded`, as the provider actor sends them. */
const admitCall = {
  callId: 'b',
  request,
  apiKey: secret,
  keyId: secret.fingerprint,
  replyTo: caller,
  validate: acceptAll,
  at: 0,
};
const breaker = createActor(breakerMachine, {
  input: { providerId: 'claude', threshold: 5, recoveryMs: 60_000 },
}).start();
async function breakerCalls(count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) {
    breaker.send({ type: 'breaker.admit', call: admitCall, replyTo: caller, leased: false, at: 0 });
    breaker.send({ type: 'call.succeeded', callId: 'b', at: 0 });
  }
}

// ---- the whole generate(): fallback actor + provider actor + breaker
const gateway = createGateway({
  adapters,
  breaker: { threshold: 5, recoveryMs: 60_000 },
  retry: { max: 2, backoffMs: [1000, 2000] },
  policy: 'retry-then-fallback',
  providerTimeoutMs: 60_000,
});
const validate = (answer: ProviderAnswer) => ({ ok: true as const, value: answer.text });
async function generateCalls(count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) {
    const outcome = await gateway.generate({ request, validate, chain: [{ provider: 'claude', apiKey: new Secret(apiKey) }] });
    if (outcome.status !== 'succeeded') throw new Error(`unexpected ${outcome.status}`);
  }
}

// ---- the same with many calls in flight: a per-call cost that grew with the calls in flight shows here
/** Calls in flight at once for the concurrent variants (the HTTP bench's 50 connections). */
const inFlight = 50;
/** `count` calls of `one`, `inFlight` of them at a time. */
async function concurrently(count: number, one: () => Promise<void>): Promise<void> {
  let started = 0;
  const worker = async (): Promise<void> => {
    while (started < count) {
      started += 1;
      await one();
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, worker));
}
async function providerCallsInFlight(count: number): Promise<void> {
  await concurrently(count, async () => {
    const reply = await providerCall();
    if (reply.type !== 'provider.succeeded') throw new Error(`unexpected ${reply.type}`);
  });
}
async function generateCallsInFlight(count: number): Promise<void> {
  await concurrently(count, async () => {
    const outcome = await gateway.generate({ request, validate, chain: [{ provider: 'claude', apiKey: new Secret(apiKey) }] });
    if (outcome.status !== 'succeeded') throw new Error(`unexpected ${outcome.status}`);
  });
}

// ---- XState bare send(): one assign per event, no children
const counter = createActor(
  setup({ types: { context: {} as { count: number }, events: {} as { type: 'tick' } } }).createMachine({
    context: { count: 0 },
    on: { tick: { actions: assign({ count: ({ context }) => context.count + 1 }) } },
  }),
).start();
async function sends(count: number): Promise<void> {
  for (let i = 0; i < count; i += 1) counter.send({ type: 'tick' });
}

type Variant = {
  readonly name: string;
  readonly run: (count: number) => Promise<void>;
  readonly calls: number;
};

/**
 * Calls run in chunks with a macrotask turn between them, as real upstream answers (I/O) give.
 * Without it every call of a run happens inside one microtask checkpoint, where V8 keeps each
 * `AbortSignal.any` WeakRef target alive until the checkpoint ends: the heap grows ~3 KB per call
 * and GC dominates (measured; not a leak in production, where answers arrive as I/O events).
 */
const chunk = 200;
/**
 * CPU time of the last `timePerCall`, µs per call (`process.cpuUsage`: user + system, every thread of
 * the process): on a shared machine wall time also counts the time the process waited for a CPU, which
 * CPU time does not, so it is the steadier of the two under load.
 */
let lastCpuPerCall = 0;
async function timePerCall(variant: Variant): Promise<number> {
  forgetRequests();
  const cpuAtStart = process.cpuUsage();
  const started = performance.now();
  for (let done = 0; done < variant.calls; done += chunk) {
    await variant.run(Math.min(chunk, variant.calls - done));
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  const elapsed = performance.now() - started;
  const cpu = process.cpuUsage(cpuAtStart);
  lastCpuPerCall = (cpu.user + cpu.system) / variant.calls;
  return (elapsed * 1000) / variant.calls;
}

/** Heap used after a full collection (twice: the second frees what the first's finalisers released). */
function heapAfterGc(): number {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error('run with --expose-gc (npm run bench does)');
  collect();
  collect();
  return process.memoryUsage().heapUsed;
}

interface HeapCourse {
  readonly start: number;
  readonly middle: number;
  readonly end: number;
  readonly seconds: number;
}

/**
 * `heapRequests` `generate()` calls, `inFlight` at a time, in chunks with a macrotask turn between them (as
 * `timePerCall`): the heap after a full GC before, halfway and after. A per-request cost that stays behind
 * (an event type, a listener, a map entry per call) shows as growth; a flat heap is the goal.
 */
async function heapOverRequests(): Promise<HeapCourse> {
  const started = performance.now();
  const start = heapAfterGc();
  let middle = start;
  for (let done = 0; done < heapRequests; done += chunk) {
    forgetRequests();
    await generateCallsInFlight(Math.min(chunk, heapRequests - done));
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (done < heapRequests / 2 && done + chunk >= heapRequests / 2) middle = heapAfterGc();
  }
  forgetRequests();
  return { start, middle, end: heapAfterGc(), seconds: (performance.now() - started) / 1000 };
}

const mebibytes = (bytes: number): string => round(bytes / (1024 * 1024), 1);

async function main(): Promise<void> {
  const loadAtStart = loadAverage();
  const direct: Variant = { name: 'direct adapter call', run: directCalls, calls: callsPerRound };
  const actor: Variant = { name: 'provider actor + breaker', run: providerCalls, calls: callsPerRound };
  const full: Variant = {
    name: 'gateway.generate()',
    run: generateCalls,
    calls: Math.max(1000, callsPerRound / 4),
  };
  const send: Variant = { name: 'XState send()', run: sends, calls: callsPerRound * 5 };
  const bare: Variant = { name: 'bare provider', run: bareProviderCalls, calls: callsPerRound };
  const actorInFlight: Variant = { name: 'provider, in flight', run: providerCallsInFlight, calls: callsPerRound };
  const fullInFlight: Variant = { name: 'generate, in flight', run: generateCallsInFlight, calls: full.calls };
  const plumbing: Variant = { name: 'abort plumbing', run: abortPlumbing, calls: callsPerRound };
  const breakerOnly: Variant = { name: 'breaker alone', run: breakerCalls, calls: callsPerRound * 5 };
  const variants = [direct, actor, full, send, bare, plumbing, breakerOnly, actorInFlight, fullInFlight];

  // Warm-up round, discarded (JIT).
  for (const variant of variants) await timePerCall({ ...variant, calls: Math.min(variant.calls, 5000) });

  const samples = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const actorOverhead: number[] = [];
  const fullOverhead: number[] = [];
  const bareOverhead: number[] = [];
  const plumbingOverhead: number[] = [];
  const actorInFlightOverhead: number[] = [];
  const fullInFlightOverhead: number[] = [];
  const cpu = { direct: [] as number[], actor: [] as number[], full: [] as number[], send: [] as number[] };
  for (let r = 0; r < rounds; r += 1) {
    // A/B alternating: the baseline runs right before each variant it is subtracted from.
    const a1 = await timePerCall(direct);
    const cpuA1 = lastCpuPerCall;
    const b1 = await timePerCall(actor);
    cpu.actor.push(lastCpuPerCall - cpuA1);
    const a2 = await timePerCall(direct);
    const cpuA2 = lastCpuPerCall;
    const b2 = await timePerCall(full);
    cpu.full.push(lastCpuPerCall - cpuA2);
    cpu.direct.push(cpuA1, cpuA2);
    const s = await timePerCall(send);
    cpu.send.push(lastCpuPerCall);
    const a3 = await timePerCall(direct);
    const b3 = await timePerCall(bare);
    const a4 = await timePerCall(direct);
    const b4 = await timePerCall(plumbing);
    samples.get(breakerOnly.name)?.push(await timePerCall(breakerOnly));
    const a5 = await timePerCall(direct);
    const b5 = await timePerCall(actorInFlight);
    const a6 = await timePerCall(direct);
    const b6 = await timePerCall(fullInFlight);
    actorInFlightOverhead.push(b5 - a5);
    fullInFlightOverhead.push(b6 - a6);
    bareOverhead.push(b3 - a3);
    plumbingOverhead.push(b4 - a4);
    samples.get(direct.name)?.push(a1, a2);
    samples.get(actor.name)?.push(b1);
    samples.get(full.name)?.push(b2);
    samples.get(send.name)?.push(s);
    actorOverhead.push(b1 - a1);
    fullOverhead.push(b2 - a2);
    process.stdout.write(
      `round ${r + 1}/${rounds}: direct ${round(a1)} µs, provider ${round(b1)} µs (+${round(b1 - a1)}), ` +
        `generate ${round(b2)} µs (+${round(b2 - a2)}), send ${round(s, 3)} µs\n`,
    );
  }

  const heap = await heapOverRequests();
  const heapGrowth = heap.end - heap.start;
  process.stdout.write(
    `heap after GC over ${heapRequests} generate() calls: ${mebibytes(heap.start)} → ${mebibytes(heap.middle)} → ${mebibytes(heap.end)} MiB (${round(heap.seconds, 0)} s, load ${loadAverage()})\n`,
  );

  const actorMedian = median(actorOverhead);
  const fullMedian = median(fullOverhead);
  const sendMedian = median(samples.get(send.name) ?? []);
  const verdict = actorMedian <= goalMicroseconds ? 'met' : 'missed';
  const generateVerdict = fullMedian <= generateGoalMicroseconds ? 'met' : 'missed';
  const rows = [
    ['direct adapter call (baseline)', median(samples.get(direct.name) ?? []), undefined],
    [
      'provider actor + breaker: `call.requested` → `provider.succeeded`',
      median(samples.get(actor.name) ?? []),
      actorMedian,
    ],
    [
      'full `gateway.generate()` (adds the per-request fallback run)',
      median(samples.get(full.name) ?? []),
      fullMedian,
    ],
    ['XState bare `send()` (one assign)', sendMedian, undefined],
  ] as const;
  const inFlightRows = [
    ['provider actor + breaker', actorMedian, median(actorInFlightOverhead)],
    ['full `gateway.generate()`', fullMedian, median(fullInFlightOverhead)],
  ] as const;
  const inFlightTable = inFlightRows
    .map(([name, one, many]) => `| ${name} | ${round(one)} | ${round(many)} | ${round(many / one, 2)}× |`)
    .join('\n');
  const diagnostics = [
    ['provider actor + breaker, upstream a bare promise (no stream observer)', median(bareOverhead)],
    ['the call\'s AbortController + deadline timer alone (no XState)', median(plumbingOverhead)],
    [
      'breaker actor alone: `breaker.admit` + `call.succeeded` (2 sends, 1 answer)',
      median(samples.get(breakerOnly.name) ?? []),
    ],
  ] as const;
  const diagnosticTable = diagnostics.map(([name, value]) => `| ${name} | ${round(value)} |`).join('\n');
  const cpuRows = [median(cpu.direct), median(cpu.actor), median(cpu.full), median(cpu.send)];
  const table = rows
    .map(
      ([name, total, overhead], index) =>
        `| ${name} | ${round(total)} | ${overhead === undefined ? '—' : round(overhead)} | ${round(cpuRows[index] ?? 0)} |`,
    )
    .join('\n');
  const markdown = `## core: the actors' bookkeeping per call
\`npm run bench -- core\` (\`BENCH_ROUNDS\`=${rounds}, \`BENCH_CALLS\`=${callsPerRound}) · ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC · commit ${codeVersion()} · load ${loadAtStart} → ${loadAverage()} · ${machineInfo()}
Sequential calls to a scripted upstream answering through a microtask (a macrotask turn every ${chunk}), so only the
bookkeeping counts; overhead = variant − direct adapter call, medians of ${rounds} alternating rounds; CPU = \`process.cpuUsage\` per call.

| per call | µs | overhead µs | CPU µs (overhead) |
| --- | ---: | ---: | ---: |
${table}

| overhead per call, µs | 1 in flight | ${inFlight} in flight | ratio |
| --- | ---: | ---: | ---: |
${inFlightTable}

| diagnostic | µs per call |
| --- | ---: |
${diagnosticTable}

- provider actor + breaker ≤ ${goalMicroseconds} µs per call (${round(goalMicroseconds / idleSendMicroseconds, 1)}× an idle bare \`send()\`) — **${verdict}** (${round(actorMedian)} µs, ${round(actorMedian / sendMedian, 1)}× this run's \`send()\`)
- full \`gateway.generate()\` ≤ ${generateGoalMicroseconds} µs (${round(generateGoalMicroseconds / idleSendMicroseconds, 1)}×) — **${generateVerdict}** (${round(fullMedian)} µs, ${round(fullMedian / sendMedian, 1)}×); CPU ${round(median(cpu.actor))} / ${round(median(cpu.full))} µs
- heap after GC flat over ${heapRequests.toLocaleString('en-US')} \`generate()\` calls, ${inFlight} in flight (≤ ${heapGrowthLimitMiB} MiB growth) — **${heapGrowth <= heapGrowthLimitMiB * 1024 * 1024 ? 'met' : 'missed'}** (start / middle / end ${mebibytes(heap.start)} / ${mebibytes(heap.middle)} / ${mebibytes(heap.end)} MiB, ${round(heap.seconds, 0)} s)
`;
  writeBenchmarkSection('core', markdown);
  process.stdout.write(`\n${markdown}`);
  await gateway.stop();
  provider.stop();
  bareProvider.stop();
  breaker.stop();
}

await main();
