/**
 * Overhead: what `POST /v1/generate` (one provider, breaker closed) costs over a client calling the
 * emulator by hand through the same SDK, whole (A) and streamed as the adapter streams (S, the like-for-like
 * baseline), with S on the service's transport (S′) and a plain Fastify pass-through (floor). Every part
 * runs in its own process on loopback: emulator, autocannon, service, baselines.
 *
 * A streamed answer costs its reader per event (the SDK's SSE parse, the adapter's read), so the same
 * answer is streamed short and long (`BENCH_STREAM_PIECES`, default 20 and 1,000 pieces an answer): a short
 * stream shows what the layer adds per request, a long one whether reading the events costs the service more
 * than it costs the SDK itself. Variants alternate (floor A S S′ B, then backwards) over several rounds;
 * figures are per-round paired differences/ratios, medians quoted; CPU is the serving process's
 * `process.cpuUsage()` difference over a run divided by the requests it served.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Child } from './support/children.js';
import { startChild, supportDirectory } from './support/children.js';
import type { LoadResult } from './support/load.child.js';
import { mebibytes, signed, slope } from './support/stats.js';
import {
  benchText,
  gptKey,
  postJson,
  resetFaults,
  setFault,
  setStreamPieces,
  startEmulatorChild,
  startLoadChild,
  startServiceChild,
} from './support/index.js';
import { loadAverage, median, round, runContext, writeBenchmarkSection } from './report.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 4);
/**
 * Each measured sample serves a fixed number of requests, every one answered, rather than running for a
 * fixed time: on a long stream a request takes seconds under 50 connections, and a timed window would charge
 * the CPU of the requests it cut off to the few it completed. The number is the same for every variant of a
 * stream length: what the slowest variant's warm-up served in `BENCH_SECONDS`, and at least three requests
 * per connection.
 */
const seconds = Number(process.env.BENCH_SECONDS ?? 2);
/** Pieces each streamed answer is cut into, one measured pass per value (the emulator's `streamPieces`). */
const streamLengths = (process.env.BENCH_STREAM_PIECES ?? '20,1000').split(',').map((value) => {
  const pieces = Number(value.trim());
  if (!Number.isInteger(pieces) || pieces < 1)
    throw new Error(`BENCH_STREAM_PIECES: ${value} is not a piece count`);
  return pieces;
});
/** Streams of at most this many pieces are judged by the short-stream goals, longer ones by the long-stream goal. */
const shortStreamMaxPieces = 100;
const growthTarget = Number(process.env.BENCH_GROWTH_REQUESTS ?? 100_000);
/** The 100,000 requests run in full, not extrapolated; the budget only guards against a hang. */
const growthBudgetMs = Number(process.env.BENCH_GROWTH_MS ?? 900_000);
const growthChunk = 5_000;
/**
 * Seconds of 50-connection load each variant gets before anything is measured (JIT, connection pools).
 * 1.5 s was too short for B: its first two measured rounds still cost three times the CPU per request of
 * the rounds after, the optimising compiler's background work counted as its CPU. Later stream lengths
 * get one run of `BENCH_SECONDS` each (the code is warm; the pools and the new answer shape settle).
 */
const warmUpSeconds = Number(process.env.BENCH_WARMUP_SECONDS ?? 6);
/**
 * BENCH_PROFILE=1: A's, S's and B's server processes are CPU-profiled during their first 50-connection
 * instant-upstream run of the first stream length, into dist/bench-profiles/{sdk,stream,service}.cpuprofile
 * (summarise with `node --import tsx bench/support/profile-summary.ts <file>`).
 */
const profileDirectory =
  process.env.BENCH_PROFILE === '1'
    ? join(supportDirectory, '..', '..', 'dist', 'bench-profiles')
    : undefined;

type VariantKey = 'floor' | 'sdk' | 'stream' | 'transport' | 'service';

interface Variant {
  readonly key: VariantKey;
  readonly label: string;
  readonly child: Child;
  readonly url: string;
  readonly body: string;
  readonly headers: Record<string, string>;
}

type ScenarioKey = 'slow50' | 'instant50' | 'single';

interface Scenario {
  readonly key: ScenarioKey;
  readonly label: string;
  readonly connections: number;
  readonly upstreamMs: number;
}

interface Sample {
  readonly load: LoadResult;
  readonly cpuMicrosPerRequest: number;
  readonly peakRss: number;
  /** The main thread's GC pauses per request, µs, and the collections per 1,000 requests. */
  readonly gcMicrosPerRequest: number;
  readonly minorGcsPerThousand: number;
  readonly majorGcsPerThousand: number;
}

const scenarios: readonly Scenario[] = [
  { key: 'slow50', label: '50 connections, upstream after 50 ms', connections: 50, upstreamMs: 50 },
  { key: 'instant50', label: 'saturation: 50 connections, upstream at once', connections: 50, upstreamMs: 0 },
  { key: 'single', label: '1 connection, upstream at once', connections: 1, upstreamMs: 0 },
];

/** Every sample of one run: by stream length, scenario and variant, one per round in round order. */
class Samples {
  private readonly byKey = new Map<string, Sample[]>();

  add(pieces: number, scenario: ScenarioKey, variant: VariantKey, sample: Sample): void {
    const key = `${pieces}:${scenario}:${variant}`;
    this.byKey.set(key, [...(this.byKey.get(key) ?? []), sample]);
  }

  of(pieces: number, scenario: ScenarioKey, variant: VariantKey): Sample[] {
    return this.byKey.get(`${pieces}:${scenario}:${variant}`) ?? [];
  }

  /** Median of a variant's figure over rounds. */
  median(
    pieces: number,
    scenario: ScenarioKey,
    variant: VariantKey,
    figure: (sample: Sample) => number,
  ): number {
    return median(this.of(pieces, scenario, variant).map(figure));
  }

  /** Per-round paired figure of B against `against` (both measured in the same round), median over rounds. */
  paired(
    pieces: number,
    scenario: ScenarioKey,
    against: VariantKey,
    figure: (b: Sample, baseline: Sample) => number,
  ): number {
    const baseline = this.of(pieces, scenario, against);
    return median(
      this.of(pieces, scenario, 'service').map((b, index) => figure(b, baseline[index] as Sample)),
    );
  }
}

const throughputRatio = (b: Sample, baseline: Sample): number =>
  b.load.requestsPerSecond / baseline.load.requestsPerSecond;
const cpuDifference = (b: Sample, baseline: Sample): number =>
  b.cpuMicrosPerRequest - baseline.cpuMicrosPerRequest;

async function main(): Promise<void> {
  const emulator = await startEmulatorChild();
  const baselineEnv = { OPENAI_BASE_URL: String(emulator.info['openaiBaseUrl']), GPT_MODEL: 'gpt-bench' };
  if (profileDirectory !== undefined) mkdirSync(profileDirectory, { recursive: true });
  const baseline = (mode: string): Promise<Child> =>
    startChild(mode, {
      entry: 'baseline.child.ts',
      env: { ...baselineEnv, BASELINE_MODE: mode },
      execArgv: ['--expose-gc'],
    });
  const [service, sdk, stream, transport, floor, load] = await Promise.all([
    // One client (one key, one address) drives all 50 connections: its shares of the generation slots
    // (admission control, default 8 per client, 32 per address) are raised so the bench measures the
    // hot path, not the refusals; so is its per-address generation rate (3,000 a minute would cap B at
    // 50 requests a second and charge the refusals' CPU to the served requests), and its per-address request
    // pacing (200 a second).
    startServiceChild(emulator, {
      PROVIDERS_DEFAULT_ORDER: 'gpt',
      RATE_LIMIT_GENERATIONS: '0',
      REQUESTS_PER_SECOND_PER_ADDRESS: '0',
      MAX_INFLIGHT_GENERATIONS: '256',
      MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '256',
    }),
    baseline('sdk'),
    baseline('sdk-stream'),
    baseline('sdk-transport'),
    baseline('passthrough'),
    startLoadChild(),
  ]);
  const baselineBody = JSON.stringify({ text: benchText });
  const baselineVariant = (key: VariantKey, label: string, child: Child): Variant => ({
    key,
    label,
    child,
    url: `${String(child.info['url'])}${String(child.info['path'])}`,
    body: baselineBody,
    headers: {},
  });
  const variants: readonly Variant[] = [
    baselineVariant('floor', 'floor: Fastify pass-through', floor),
    baselineVariant('sdk', 'A: Fastify + openai SDK by hand, whole answer', sdk),
    baselineVariant('stream', 'S: Fastify + openai SDK by hand, streamed', stream),
    baselineVariant('transport', "S′: S on the service's transport", transport),
    {
      key: 'service',
      label: 'B: POST /v1/generate',
      child: service,
      url: `${service.url}/v1/generate`,
      body: JSON.stringify({ task: 'notes', text: benchText, providers: ['gpt'], options: { lang: 'en' } }),
      headers: { 'x-gpt-key': gptKey },
    },
  ];

  // Sanity: every variant answers 200 with notes before anything is timed.
  for (const variant of variants) {
    const answer = await postJson(variant.url, variant.body, variant.headers);
    if (answer.status !== 200)
      throw new Error(
        `${variant.label} answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`,
      );
  }
  // Idle memory: after start-up and one request, before any load (RSS after a forced GC).
  const idle = {
    stream: (await stream.request<{ rss: number }>('gc')).rss,
    service: (await service.request<{ rss: number }>('gc')).rss,
  };
  const loadAtStart = loadAverage();

  async function measure(
    variant: Variant,
    scenario: Scenario,
    size: { readonly duration: number } | { readonly amount: number },
    profile?: string,
  ): Promise<Sample> {
    if (profile !== undefined) await variant.child.request('profileStart');
    const before = await variant.child.usage(true);
    const result = await load.run({
      url: variant.url,
      body: variant.body,
      headers: variant.headers,
      connections: scenario.connections,
      ...size,
    });
    const after = await variant.child.usage();
    if (profile !== undefined) await variant.child.request('profileStop', { file: profile });
    if (result.ok !== result.requests) {
      throw new Error(
        `${variant.label} (${scenario.key}): ${result.requests - result.ok} of ${result.requests} answers not 2xx (errors ${result.errors})`,
      );
    }
    const perRequest = (figure: (usage: typeof after) => number): number =>
      (figure(after) - figure(before)) / result.requests;
    return {
      load: result,
      cpuMicrosPerRequest: perRequest((usage) => usage.cpuMicros),
      peakRss: after.peakRss,
      gcMicrosPerRequest: perRequest((usage) => usage.gcMicros),
      minorGcsPerThousand: 1000 * perRequest((usage) => usage.minorGcs),
      majorGcsPerThousand: 1000 * perRequest((usage) => usage.majorGcs),
    };
  }

  const samples = new Samples();
  const loadByLength = new Map<number, string>();
  const amounts = new Map<number, number>();
  for (const [lengthIndex, pieces] of streamLengths.entries()) {
    await resetFaults(emulator.url);
    await setStreamPieces(emulator.url, pieces);
    const loadAtLength = loadAverage();
    // Warm-up (JIT, connection pools, the answer's new shape), discarded but for its pace.
    let slowest = Number.POSITIVE_INFINITY;
    for (const variant of variants) {
      const warm = await measure(variant, scenarios[1] as Scenario, {
        duration: lengthIndex === 0 ? warmUpSeconds : seconds,
      });
      slowest = Math.min(slowest, warm.load.requestsPerSecond);
    }
    const amount = Math.max(3 * 50, Math.round(slowest * seconds));
    amounts.set(pieces, amount);
    for (const scenario of scenarios) {
      await resetFaults(emulator.url);
      if (scenario.upstreamMs > 0)
        await setFault(emulator.url, { provider: 'gpt', fault: 'slow', ms: scenario.upstreamMs });
      for (let r = 0; r < rounds; r += 1) {
        const order = r % 2 === 0 ? variants : [...variants].reverse();
        const line: string[] = [];
        for (const variant of order) {
          const profile =
            profileDirectory !== undefined &&
            lengthIndex === 0 &&
            r === 0 &&
            scenario.key === 'instant50' &&
            variant.key !== 'floor' &&
            variant.key !== 'transport'
              ? join(profileDirectory, `${variant.key}.cpuprofile`)
              : undefined;
          const sample = await measure(variant, scenario, { amount }, profile);
          samples.add(pieces, scenario.key, variant.key, sample);
          line.push(
            `${variant.key} ${round(sample.load.requestsPerSecond, 0)} req/s p50 ${round(sample.load.p50)} cpu ${round(sample.cpuMicrosPerRequest, 0)}µs`,
          );
        }
        process.stdout.write(
          `${pieces} pieces, ${scenario.key} round ${r + 1}/${rounds} (load ${loadAverage()}): ${line.join(' | ')}\n`,
        );
      }
    }
    loadByLength.set(pieces, `${loadAtLength} → ${loadAverage()}`);
  }
  await resetFaults(emulator.url);

  // Memory: heap after GC over as many requests as fit, on the shortest stream (the most requests a second).
  const growthPieces = Math.min(...streamLengths);
  await setStreamPieces(emulator.url, growthPieces);
  const serviceVariant = variants.find((variant) => variant.key === 'service') as Variant;
  const points: [number, number][] = [];
  const rssPoints: [number, number][] = [];
  let served = 0;
  let peakRss = 0;
  const growthStarted = performance.now();
  const first = await service.request<{ heapUsed: number; rss: number }>('gc');
  points.push([0, first.heapUsed]);
  rssPoints.push([0, first.rss]);
  while (served < growthTarget && performance.now() - growthStarted < growthBudgetMs) {
    const result = await load.run({
      url: serviceVariant.url,
      body: serviceVariant.body,
      headers: serviceVariant.headers,
      connections: 50,
      amount: growthChunk,
    });
    if (result.ok !== result.requests)
      throw new Error(`growth run: ${result.requests - result.ok} answers not 2xx`);
    served += result.requests;
    const usage = await service.usage(true);
    peakRss = Math.max(peakRss, usage.peakRss);
    const collected = await service.request<{ heapUsed: number; rss: number }>('gc');
    points.push([served, collected.heapUsed]);
    rssPoints.push([served, collected.rss]);
    process.stdout.write(
      `growth: ${served} requests, heap after GC ${round(mebibytes(collected.heapUsed), 1)} MiB, rss ${round(mebibytes(collected.rss), 1)} MiB (load ${loadAverage()})\n`,
    );
  }
  const growthSeconds = (performance.now() - growthStarted) / 1000;

  await Promise.all([service.stop(), sdk.stop(), stream.stop(), transport.stop(), floor.stop(), load.stop()]);
  await emulator.stop();

  const markdown = report(
    samples,
    { points, rssPoints, served, peakRss, growthSeconds, pieces: growthPieces },
    idle,
    {
      atStart: loadAtStart,
      byLength: loadByLength,
      amounts,
    },
  );
  writeBenchmarkSection('overhead', markdown);
  process.stdout.write(`\n${markdown}`);
}

interface Growth {
  readonly points: readonly (readonly [number, number])[];
  readonly rssPoints: readonly (readonly [number, number])[];
  readonly served: number;
  readonly peakRss: number;
  readonly growthSeconds: number;
  /** The stream length the growth run was served with. */
  readonly pieces: number;
}

function verdict(met: boolean): string {
  return met ? '**met**' : '**missed**';
}

function report(
  samples: Samples,
  growth: Growth,
  idle: { stream: number; service: number },
  load: { atStart: string; byLength: ReadonlyMap<number, string>; amounts: ReadonlyMap<number, number> },
): string {
  const rows = streamLengths.flatMap((pieces) =>
    scenarios.map((scenario) => {
      const k = scenario.key;
      const rps = (variant: VariantKey): string =>
        round(
          samples.median(pieces, k, variant, (s) => s.load.requestsPerSecond),
          0,
        );
      const cpu = (variant: VariantKey): string =>
        round(
          samples.median(pieces, k, variant, (s) => s.cpuMicrosPerRequest),
          0,
        );
      const ratio = (against: VariantKey): string =>
        `${round(samples.paired(pieces, k, against, throughputRatio))}×`;
      const ms = (variant: VariantKey, f: 'p50' | 'p99'): string =>
        round(
          samples.median(pieces, k, variant, (s) => s.load[f]),
          1,
        );
      const latency = (f: 'p50' | 'p99'): string =>
        `${ms('stream', f)} → ${ms('service', f)} (${signed(
          samples.paired(pieces, k, 'stream', (b, s) => b.load[f] - s.load[f]),
          1,
        )})`;
      return [
        `${pieces} · ${scenario.label}`,
        ['floor', 'sdk', 'stream', 'transport', 'service'].map((v) => rps(v as VariantKey)).join(' / '),
        ratio('sdk'),
        ratio('stream'),
        ratio('transport'),
        latency('p50'),
        latency('p99'),
        ['sdk', 'stream', 'transport', 'service'].map((v) => cpu(v as VariantKey)).join(' / '),
        signed(samples.paired(pieces, k, 'stream', cpuDifference), 0),
        signed(samples.paired(pieces, k, 'transport', cpuDifference), 0),
      ];
    }),
  );

  const goals: string[] = [];
  const bOverS = (pieces: number, scenario: ScenarioKey): number =>
    samples.paired(pieces, scenario, 'stream', throughputRatio);
  for (const pieces of streamLengths) {
    const slow = bOverS(pieces, 'slow50');
    const saturated = bOverS(pieces, 'instant50');
    const cpu = samples.paired(pieces, 'instant50', 'stream', cpuDifference);
    const cpuSlow = samples.paired(pieces, 'slow50', 'stream', cpuDifference);
    if (pieces <= shortStreamMaxPieces) {
      goals.push(
        `- Short stream (${pieces} pieces): B/S ≥ 0.90 at 50 connections / 50 ms — ${verdict(slow >= 0.9)} (${round(slow)}×); ` +
          `≥ 0.85 at saturation — ${verdict(saturated >= 0.85)} (${round(saturated)}×); ` +
          `CPU per request B − S ≤ +250 µs — ${verdict(cpu <= 250 && cpuSlow <= 250)} (${signed(cpu, 0)} µs at saturation, ${signed(cpuSlow, 0)} µs at 50 ms).`,
      );
      const p50 = samples.paired(pieces, 'slow50', 'stream', (b, s) => b.load.p50 - s.load.p50);
      const p99 = samples.paired(pieces, 'slow50', 'stream', (b, s) => b.load.p99 - s.load.p99);
      const singleP50 = samples.paired(pieces, 'single', 'stream', (b, s) => b.load.p50 - s.load.p50);
      const singleP99 = samples.paired(pieces, 'single', 'stream', (b, s) => b.load.p99 - s.load.p99);
      goals.push(
        `- Short stream latency: 50 connections / 50 ms p50 ≤ S + 5 ms — ${verdict(p50 <= 5)} (${signed(p50)} ms), p99 ≤ S + 25 ms — ${verdict(p99 <= 25)} (${signed(p99)} ms); ` +
          `one connection p50 ≤ S + 0.5 ms — ${verdict(singleP50 <= 0.5)} (${signed(singleP50)} ms), p99 ≤ S + 2.5 ms — ${verdict(singleP99 <= 2.5)} (${signed(singleP99)} ms).`,
      );
    } else {
      goals.push(
        `- Long stream (${pieces} pieces): B ≥ S — ${verdict(slow >= 1 && saturated >= 1)} (B/S ${round(slow)}× at 50 connections / 50 ms, ${round(saturated)}× at saturation; ` +
          `CPU per request B − S ${signed(cpuSlow, 0)} / ${signed(cpu, 0)} µs).`,
      );
    }
  }

  /** Highest RSS of a variant under the 50-connection scenarios (the same rounds for S and B). */
  const peakUnderLoad = (variant: VariantKey): number =>
    Math.max(
      ...streamLengths.flatMap((pieces) => [
        ...samples.of(pieces, 'slow50', variant).map((s) => s.peakRss),
        ...samples.of(pieces, 'instant50', variant).map((s) => s.peakRss),
      ]),
    );
  const peakS = peakUnderLoad('stream');
  const peakB = peakUnderLoad('service');
  const idleDelta = mebibytes(idle.service - idle.stream);
  const peakDelta = mebibytes(peakB - peakS);
  const heapSlope = slope(growth.points) * 100_000;
  const rssSlope = slope(growth.rssPoints) * 100_000;
  const heapAt = (index: number): string => round(mebibytes(growth.points.at(index)?.[1] ?? Number.NaN), 1);
  const inFull = growth.served >= 100_000;
  const growthLimitMiB = 2;
  goals.push(
    `- RSS: idle ≤ S + 30 MiB — ${verdict(idleDelta <= 30)} (S ${round(mebibytes(idle.stream), 0)}, B ${round(mebibytes(idle.service), 0)} MiB after start-up, one request and a forced GC); ` +
      `peak under 50 connections ≤ S + 48 MiB — ${verdict(peakDelta <= 48)} (S ${round(mebibytes(peakS), 0)}, B ${round(mebibytes(peakB), 0)} MiB; B's peak over the growth run ${round(mebibytes(growth.peakRss), 0)} MiB).`,
    `- Heap after GC flat over 100,000 requests run in full (≤ ${growthLimitMiB} MiB per 100k; ${growth.pieces}-piece stream, 50 connections) — ${verdict(inFull && heapSlope <= growthLimitMiB * 1024 * 1024)} ` +
      `(${growth.served.toLocaleString('en-US')} requests in ${round(growth.growthSeconds, 0)} s${inFull ? '' : ', **not run in full** (BENCH_GROWTH_MS budget)'}; ` +
      `start / middle / end ${heapAt(0)} / ${heapAt(Math.floor((growth.points.length - 1) / 2))} / ${heapAt(-1)} MiB; ` +
      `least-squares slope ${signed(mebibytes(heapSlope))} MiB heap, ${signed(mebibytes(rssSlope))} MiB RSS per 100k).`,
  );

  const gcLine = streamLengths
    .map((pieces) => {
      const gc = (variant: VariantKey): string =>
        `${round(
          samples.median(pieces, 'instant50', variant, (s) => s.gcMicrosPerRequest),
          0,
        )} µs (${round(
          samples.median(pieces, 'instant50', variant, (s) => s.minorGcsPerThousand),
          0,
        )} scavenges, ${round(
          samples.median(pieces, 'instant50', variant, (s) => s.majorGcsPerThousand),
          1,
        )} full per 1,000)`;
      return `${pieces} pieces S ${gc('stream')}, B ${gc('service')}`;
    })
    .join('; ');
  const loads = streamLengths
    .map(
      (pieces) =>
        `${pieces} pieces: ${load.amounts.get(pieces) ?? '?'} requests a sample, load ${load.byLength.get(pieces) ?? '?'}`,
    )
    .join('; ');

  const header = [
    'stream pieces · scenario',
    'req/s floor / A / S / S′ / B',
    'B/A',
    'B/S',
    'B/S′',
    'p50 ms S → B (Δ)',
    'p99 ms S → B (Δ)',
    'CPU µs/req A / S / S′ / B',
    'B − S µs',
    'B − S′ µs',
  ];
  const line = (cells: readonly string[]): string => `| ${cells.join(' | ')} |`;

  return `## overhead: \`POST /v1/generate\` against the SDK called by hand
${runContext('overhead', `\`BENCH_ROUNDS\`=${rounds}, \`BENCH_SECONDS\`=${seconds}, \`BENCH_STREAM_PIECES\`=${streamLengths.join(',')}, warm-up ${warmUpSeconds} s`, load.atStart)}
Servers on loopback under autocannon, the emulator's gpt answering the same notes in N stream pieces: floor (Fastify + \`fetch\`), A (Fastify + \`openai\` SDK, whole answer),
S (the SDK streamed by hand), S′ (S on the service's transport), B (the service, run as it ships: \`--max-semi-space-size=16\`); B against each baseline per round, medians over rounds; CPU = the serving process's \`process.cpuUsage()\` per request. ${loads}.

${line(header)}
${line(header.map((_, index) => (index === 0 ? '---' : '---:')))}
${rows.map(line).join('\n')}

${goals.join('\n')}

GC at saturation, per request: ${gcLine}.
`;
}

await main();
