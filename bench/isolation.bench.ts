/**
 * Isolation (issue 12): a steady client makes healthy `POST /v1/generate` requests (the emulator answers
 * after 50 ms) while a hostile client runs each attack in turn. For every attack, a no-attack window of
 * the same length runs just before it (same process, same load), and the report gives the steady
 * client's p99 against that baseline, its error rate, the service's event-loop delay p99 and its peak
 * RSS during the attack, and what the hostile client got back. Every part runs in its own process:
 * emulator, service (the shipped defaults), steady load (autocannon); the hostile client runs here.
 */
import type { Outcomes } from './support/attacks.js';
import {
  bigAnswerBody,
  bigAnswers,
  connectionFlood,
  flateBombPdf,
  inventedKeyGenerations,
  inventedKeyJobs,
  keyStatusFlood,
  nestedJson,
  hugePageCountPdf,
  hugeText,
  jobFlood,
  nonReadingSse,
  pdfFlood,
  sharedContentPdf,
  slowClients,
  unspacedText,
} from './support/attacks.js';
import type { LoadResult } from './support/load.child.js';
import { benchText, gptKey, postJson, resetFaults, setFault, startEmulatorChild, startLoadChild, startServiceChild } from './support/index.js';
import { mebibytes } from './support/stats.js';
import { loadAverage, machineInfo, median, round, writeBenchmarkSection } from './report.js';
import { englishTextPdf } from '../test/fixtures/pdf/generate.js';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { supportDirectory } from './support/children.js';

const windowSeconds = Number(process.env.BENCH_SECONDS ?? 8);
/**
 * Baseline-then-attack pairs per attack (BENCH_ROUNDS). One 8 s window holds ~250 steady requests, so its
 * p99 is the third-worst of them: one scheduling hiccup of the shared machine moves it by 100 ms or more.
 * The rise judged is the median of the rounds' rises; errors are counted over every round; the peak RSS
 * is the highest of any round.
 */
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const goals = { p99RiseMs: 50, errorRate: 0, loopDelayP99Ms: 50, peakRssMb: 300 };
const hostileKey = 'bench-hostile-gpt-key-0001';
/**
 * BENCH_PROFILE=1: the service is CPU-profiled during each attack window, into
 * dist/bench-profiles/isolation-<attack>.cpuprofile (summarise with
 * `node --import tsx bench/support/profile-summary.ts <file>`).
 */
const profileDirectory = process.env.BENCH_PROFILE === '1' ? join(supportDirectory, '..', '..', 'dist', 'bench-profiles') : undefined;

interface Attack {
  readonly key: string;
  readonly label: string;
  readonly pdf?: boolean;
  /** Longer windows where a deadline must pass to be seen (slowloris: the headers are due within 10 s). */
  readonly seconds?: number;
  run(context: { url: string; deadline: number; hostileKey: string }): Promise<Outcomes>;
}

interface Window {
  readonly steady: LoadResult;
  readonly loopDelayP99Ms: number;
  readonly peakRssMb: number;
  readonly hostile: Outcomes;
  /** CPU time the service (all its threads) and the emulator used in the window. */
  readonly cpuSeconds: { readonly service: number; readonly emulator: number };
}

interface Row {
  readonly attack: Attack;
  /** One baseline and one attack window per round, in order. */
  readonly baselines: readonly Window[];
  readonly attacks: readonly Window[];
}

function errorRate(result: LoadResult): number {
  return result.requests === 0 ? 1 : (result.requests - result.ok) / result.requests;
}

async function main(): Promise<void> {
  const loadAtStart = loadAverage();
  const emulator = await startEmulatorChild();
  await setFault(emulator.url, { provider: 'gpt', fault: 'slow', ms: 50 });
  const service = await startServiceChild(emulator);
  const load = await startLoadChild();
  const url = service.url;
  const steadyBody = JSON.stringify({ task: 'notes', text: benchText, options: { lang: 'en' } });
  const check = await postJson(`${url}/v1/generate`, steadyBody, { 'x-gpt-key': gptKey });
  if (check.status !== 200) throw new Error(`the steady request failed: ${check.status} ${JSON.stringify(check.body)}`);

  process.stdout.write('building the hostile PDFs…\n');
  const smallPdf = await englishTextPdf(2);
  const [sharedPdf, bombPdf] = [await sharedContentPdf(), await flateBombPdf()];
  const pagesPdf = hugePageCountPdf();
  const attacks: Attack[] = [
    { key: 'unspaced', label: '100 KB text without a space (×4 at a time)', run: unspacedText },
    { key: 'huge', label: '10 MB text (×4 at a time)', run: hugeText },
    { key: 'jobs', label: 'job-slot flooding (8 loops of POST /v1/jobs)', run: (context) => jobFlood(context, smallPdf) },
    { key: 'slow', label: 'slowloris: 200 header tricklers, 50 body tricklers (1 byte / 500 ms)', seconds: Math.max(windowSeconds, 14), run: slowClients },
    { key: 'sse', label: '200 event streams that never read', run: nonReadingSse },
    { key: 'pdfShared', label: `PDF, 50 pages sharing one content stream (${round(sharedPdf.length / 1024, 0)} KB, ×2 at a time)`, pdf: true, run: (context) => pdfFlood(context, sharedPdf) },
    { key: 'pdfBomb', label: `PDF, FlateDecode bomb (${round(bombPdf.length / 1024 / 1024, 1)} MB → 1 GiB of zeros, ×2)`, pdf: true, run: (context) => pdfFlood(context, bombPdf) },
    { key: 'pdfPages', label: 'PDF, page tree claiming 2^30 pages (×2)', pdf: true, run: (context) => pdfFlood(context, pagesPdf) },
    // Issue 28: each from an address of its own (127.0.0.2 and up), the steady client on 127.0.0.1.
    { key: 'nested', label: '2 MB of `[` (a million deep), new key each, ×4', run: nestedJson },
    { key: 'connections', label: '15 000 half-sent POSTs from one address, held open', run: (context) => connectionFlood(context) },
    { key: 'keyGenerations', label: 'generations, a new key per request, 32 connections from one address', run: inventedKeyGenerations },
    { key: 'keyJobs', label: 'job creations, a new key per job, 8 loops from one address', run: (context) => inventedKeyJobs(context, smallPdf) },
    { key: 'keyStatus', label: 'GET /v1/keys/status, a new candidate key per request, 16 connections', run: keyStatusFlood },
    {
      key: 'bigAnswers',
      label: 'provider answering 7 MB of valid notes, 16 generations at a time',
      run: async (context) => {
        await setFault(emulator.url, { provider: 'claude', fault: 'respond', status: 200, body: bigAnswerBody(), headers: { 'content-type': 'application/json' } });
        try {
          return await bigAnswers(context);
        } finally {
          await resetFaults(emulator.url);
          await setFault(emulator.url, { provider: 'gpt', fault: 'slow', ms: 50 });
        }
      },
    },
  ];
  const only = process.env.BENCH_ATTACKS?.split(',');

  const measureWindow = async (seconds: number, attack?: Attack): Promise<Window> => {
    await service.request('loopDelay', { reset: true });
    const cpuBefore = { service: (await service.usage(true)).cpuMicros, emulator: (await emulator.usage()).cpuMicros };
    const profile = attack !== undefined && profileDirectory !== undefined ? join(profileDirectory, `isolation-${attack.key}.cpuprofile`) : undefined;
    if (profile !== undefined) await service.request('profileStart');
    const deadline = Date.now() + seconds * 1000;
    const steady = load.run({ url: `${url}/v1/generate`, headers: { 'x-gpt-key': gptKey }, body: steadyBody, connections: 2, duration: seconds, timeoutSeconds: 10 });
    const hostile = attack === undefined ? Promise.resolve({}) : attack.run({ url, deadline, hostileKey });
    const [steadyResult, hostileOutcomes] = await Promise.all([steady, hostile]);
    if (profile !== undefined) await service.request('profileStop', { file: profile });
    const delay = await service.request<{ p99Ms: number }>('loopDelay', { reset: true });
    const usage = await service.usage(true);
    const cpuSeconds = { service: (usage.cpuMicros - cpuBefore.service) / 1e6, emulator: ((await emulator.usage()).cpuMicros - cpuBefore.emulator) / 1e6 };
    return { steady: steadyResult, loopDelayP99Ms: delay.p99Ms, peakRssMb: mebibytes(usage.peakRss), hostile: hostileOutcomes, cpuSeconds };
  };

  const rows: Row[] = [];
  if (profileDirectory !== undefined) mkdirSync(profileDirectory, { recursive: true });
  try {
    await measureWindow(2); // warm-up
    for (const attack of attacks) {
      if (only !== undefined && !only.includes(attack.key)) continue;
      const seconds = attack.seconds ?? windowSeconds;
      const baselines: Window[] = [];
      const attackWindows: Window[] = [];
      for (let index = 0; index < rounds; index += 1) {
        const baseline = await measureWindow(seconds);
        const attacked = await measureWindow(seconds, attack);
        baselines.push(baseline);
        attackWindows.push(attacked);
        process.stdout.write(
          `${attack.key} ${index + 1}/${rounds}: p99 ${round(baseline.steady.p99, 1)} → ${round(attacked.steady.p99, 1)} ms, errors ${round(errorRate(attacked.steady) * 100, 2)} %, ` +
            `loop p99 ${round(attacked.loopDelayP99Ms, 1)} ms, peak RSS ${round(attacked.peakRssMb, 0)} MiB, ` +
            `CPU s service ${round(baseline.cpuSeconds.service, 1)} → ${round(attacked.cpuSeconds.service, 1)}, emulator ${round(baseline.cpuSeconds.emulator, 1)} → ${round(attacked.cpuSeconds.emulator, 1)}, ` +
            `hostile ${JSON.stringify(attacked.hostile)}\n`,
        );
        // Let the hostile client's leftovers (jobs, closing sockets) finish before the next baseline.
        await new Promise((resolve) => setTimeout(resolve, 3000));
      }
      rows.push({ attack, baselines, attacks: attackWindows });
    }
  } finally {
    await load.stop();
    await service.stop();
    await emulator.stop();
  }
  // A run of some attacks (BENCH_ATTACKS) writes its own section, so the full run's table is kept.
  writeBenchmarkSection(only === undefined ? 'isolation' : `isolation:${only.join('+')}`, report(rows, loadAtStart));
}

function report(rows: readonly Row[], loadAtStart: string): string {
  const verdict = (ok: boolean): string => (ok ? 'yes' : '**no**');
  const lines = [
    '## Isolation: a steady client while a hostile one attacks (bench/isolation.bench.ts)',
    '',
    `\`npm run bench -- isolation\` (BENCH_SECONDS=${windowSeconds} per window, BENCH_ROUNDS=${rounds} baseline-then-attack pairs per attack; BENCH_ATTACKS=unspaced,huge,… runs some). ${machineInfo()}.`,
    `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC; load average (1/5/15 min) ${loadAtStart} at the start, ${loadAverage()} at the end (2 shared cores:`,
    'with the load far above 2, event-loop delay includes the time the OS does not schedule the process at all; compare each attack with its own baseline window).',
    'The service runs with its shipped defaults (docs/configuration.md) in its own process; the emulator answers',
    'after 50 ms; the steady client is autocannon with 2 connections making `POST /v1/generate` notes requests with',
    'its own key. Before each attack window a window of the same length without it is the baseline; each attack runs',
    `${rounds} such pairs. The rise is the median of the ${rounds} rounds' rises (each round's in the next column); p99, loop`,
    "delay (the service's `monitorEventLoopDelay` p99, 5 ms resolution) and service CPU (the whole service process, event",
    "loop and worker threads) are medians of the windows; errors and requests are counted over every round; peak RSS",
    "(the service's, sampled every 100 ms) is the highest of any window.",
    'The hostile PDFs are built at run time (bench/support/attacks.ts).',
    `Goals: p99 rise ≤ ${goals.p99RiseMs} ms, error rate 0, loop delay p99 ≤ ${goals.loopDelayP99Ms} ms, peak RSS ≤ ${goals.peakRssMb} MB (every attack; was PDF attacks only).`,
    '',
    '| attack | steady p99 baseline → attack (ms) | rise (ms), median | rises per round (ms) | steady requests | steady errors | loop delay p99 baseline → attack (ms) | peak RSS baseline → attack (MiB) | service CPU s baseline → attack | goals met |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  const signed = (value: number): string => `${value >= 0 ? '+' : ''}${round(value, 1)}`;
  for (const { attack, baselines, attacks } of rows) {
    const rises = attacks.map((window, index) => window.steady.p99 - (baselines[index]?.steady.p99 ?? 0));
    const rise = median(rises);
    const requests = attacks.reduce((sum, window) => sum + window.steady.requests, 0);
    const failed = attacks.reduce((sum, window) => sum + (window.steady.requests - window.steady.ok), 0);
    const rate = requests === 0 ? 1 : failed / requests;
    const of = (windows: readonly Window[], read: (window: Window) => number): number => median(windows.map(read));
    const peak = (windows: readonly Window[]): number => Math.max(...windows.map((window) => window.peakRssMb));
    const loopDelay = of(attacks, (window) => window.loopDelayP99Ms);
    const met =
      rise <= goals.p99RiseMs &&
      rate <= goals.errorRate &&
      loopDelay <= goals.loopDelayP99Ms &&
      peak(attacks) * 1.048576 <= goals.peakRssMb;
    lines.push(
      `| ${attack.label} | ${round(of(baselines, (w) => w.steady.p99), 1)} → ${round(of(attacks, (w) => w.steady.p99), 1)} | ${signed(rise)} | ${rises.map(signed).join(', ')} | ${requests} | ${round(rate * 100, 2)} % | ${round(of(baselines, (w) => w.loopDelayP99Ms), 1)} → ${round(loopDelay, 1)} | ${round(peak(baselines), 0)} → ${round(peak(attacks), 0)} | ${round(of(baselines, (w) => w.cpuSeconds.service), 1)} → ${round(of(attacks, (w) => w.cpuSeconds.service), 1)} | ${verdict(met)} |`,
    );
  }
  lines.push('', 'What the hostile client got back, all rounds together:', '');
  for (const { attack, attacks } of rows) {
    const total: Outcomes = {};
    for (const window of attacks) for (const [label, times] of Object.entries(window.hostile)) total[label] = (total[label] ?? 0) + times;
    const outcomes = Object.entries(total)
      .map(([label, times]) => `${label} ×${times}`)
      .join(', ');
    lines.push(`- ${attack.label}: ${outcomes === '' ? 'nothing' : outcomes}`);
  }
  return lines.join('\n');
}

await main();
