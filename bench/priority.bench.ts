/**
 * `npm run bench -- priority`: what WORKER_NICE buys the event loop while a PDF worker is busy on a
 * hostile PDF. One process, the extract pool with one worker, the 50-pages-sharing-one-stream
 * PDF extracted over and over; the main thread meanwhile does 2 ms of work every 10 ms (a stand-in for
 * serving requests) and measures its event-loop delay. The worker runs at nice 0 and at the default 19,
 * alternating per round. The measuring process is pinned to one CPU (`taskset -c 0`, when there is one)
 * so that the worker and the event loop compete for it whatever the machine's other load: the figure is
 * the share of that CPU the event loop gets, which on a machine with idle cores is what the nice value
 * decides when the cores fill up.
 */
import { spawnSync } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createPdfExtractor } from '../src/documents/index.js';
import { sharedContentPdf } from './support/attacks.js';
import { loadAverage, median, round, writeBenchSection } from './report.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const seconds = Number(process.env.BENCH_SECONDS ?? 6);
const niceValues = [0, 19] as const;

interface Sample {
  loopP99Ms: number;
  loopMaxMs: number;
  /** Main-thread work units (2 ms each) done in the window. */
  ticks: number;
}

async function measure(nice: number): Promise<Sample> {
  const pdf = new Uint8Array(await sharedContentPdf(50));
  const extractor = createPdfExtractor({ workers: 1, nice });
  try {
    // A first, short extraction starts the worker (pdf.js loaded and warmed up) before the window.
    await extractor.extract(pdf, { maxPdfPages: 1 }).catch(() => undefined);
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    let ticks = 0;
    const work = setInterval(() => {
      const start = performance.now();
      while (performance.now() - start < 2);
      ticks += 1;
    }, 10);
    histogram.enable();
    const deadline = Date.now() + seconds * 1000;
    const busy = (async (): Promise<void> => {
      while (Date.now() < deadline) await extractor.extract(pdf, { maxPdfPages: 50 }).catch(() => undefined);
    })();
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    histogram.disable();
    clearInterval(work);
    await extractor.close();
    await busy;
    return { loopP99Ms: histogram.percentile(99) / 1e6, loopMaxMs: histogram.max / 1e6, ticks };
  } finally {
    await extractor.close();
  }
}

async function child(): Promise<void> {
  const nice = Number(process.env.BENCH_PRIORITY_NICE);
  process.stdout.write(`${JSON.stringify(await measure(nice))}\n`);
}

/** One measuring child at `nice`, pinned to CPU 0 when `pinned` (`taskset` is there). */
function runPinned(nice: number, pinned: boolean): Sample {
  const command = pinned ? 'taskset' : process.execPath;
  const args = [...(pinned ? ['-c', '0', process.execPath] : []), '--import', 'tsx', new URL(import.meta.url).pathname];
  const result = spawnSync(command, args, { env: { ...process.env, BENCH_PRIORITY_NICE: String(nice) }, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`priority child failed: ${result.stderr}`);
  const line = result.stdout.trim().split('\n').at(-1) ?? '';
  return JSON.parse(line) as Sample;
}

async function main(): Promise<void> {
  const loadAtStart = loadAverage();
  // Whether `taskset` (util-linux) can pin a process here; asked once.
  const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  const samples = new Map<number, Sample[]>(niceValues.map((nice) => [nice, []]));
  for (let index = 0; index < rounds; index += 1) {
    const order = index % 2 === 0 ? niceValues : [...niceValues].reverse();
    for (const nice of order) {
      const sample = runPinned(nice, pinned);
      samples.get(nice)?.push(sample);
      process.stdout.write(`round ${index + 1} nice ${nice}: loop p99 ${round(sample.loopP99Ms, 1)} ms, max ${round(sample.loopMaxMs, 1)} ms, work done ${sample.ticks}\n`);
    }
  }
  const row = (nice: number): Array<string | number> => {
    const list = samples.get(nice) ?? [];
    return [
      nice,
      round(median(list.map((s) => s.loopP99Ms)), 1),
      round(median(list.map((s) => s.loopMaxMs)), 1),
      median(list.map((s) => s.ticks)),
    ];
  };
  const ideal = Math.floor((seconds * 1000) / 10);
  const markdown = writeBenchSection({
    bench: 'priority',
    title: 'priority: the event loop beside a PDF worker on a hostile PDF',
    settings: `\`BENCH_ROUNDS\`=${rounds}, \`BENCH_SECONDS\`=${seconds}`,
    loadAtStart,
    measures:
      `${pinned ? 'Pinned to one CPU (`taskset -c 0`)' : 'Not pinned (no `taskset`)'}, an extract worker on the shared-stream PDF and an ` +
      `event loop doing 2 ms of work every 10 ms compete; work done = 2 ms units done in ${seconds} s (at most ${ideal}).`,
    columns: ['worker nice (`WORKER_NICE`)', 'event-loop delay p99 ms', 'delay max ms', 'work done'],
    rows: [row(0), row(19)],
  });
  process.stdout.write(`${markdown}\n`);
}

if (process.env.BENCH_PRIORITY_NICE !== undefined) await child();
else await main();
