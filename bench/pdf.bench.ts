/**
 * PDF extraction: pages per second of the project's extractor (src/documents, worker
 * thread as the service runs it, and inline for contrast) on generated 10- and 50-page PDFs, against
 * poppler's `pdftotext` on the same files; event-loop delay (p99 of monitorEventLoopDelay) while each
 * runs. Variants alternate over several rounds; ratios are per round, medians quoted.
 * Then the worker's time and memory against page count: book-like PDFs of BENCH_PDF_PAGES pages
 * (default 50,500,1000: a chapter, half a textbook, a whole one at the default MAX_PDF_PAGES; 40 lines and
 * a font object of its own a page) read once each by a fresh compiled worker at the default
 * PDF_WORKER_MEMORY_MB, which reports its live heap (after a full GC) and resident set at the document's
 * load and after every page; the goal is a flat line.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { createPdfExtractor, type PdfExtractor, type WorkerMemory } from '../src/documents/index.js';
import { buildDirectory, ensureCompiled } from './support/compile.js';
import { englishTextPdf } from '../test/fixtures/pdf/generate.js';
import { loadAverage, median, round, runContext, writeBenchmarkSection } from './report.js';

const execFileAsync = promisify(execFile);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const sizes = [10, 50] as const;
/** Extractions per measurement, so each lasts long enough to time. */
const repeats: Record<(typeof sizes)[number], number> = { 10: 8, 50: 3 };
const goalRatio = 0.3;
const memoryPages = (process.env.BENCH_PDF_PAGES ?? '50,500,1000').split(',').map(Number);
/** Flat: the peak live heap of the longest PDF at most this many times the shortest's. */
const flatFactor = 1.5;
const linesPerPage = 40;

interface Measurement {
  readonly pagesPerSecond: number;
  readonly delayP99Ms: number;
  readonly delayMaxMs: number;
}

type Variant = 'pdftotext' | 'worker' | 'inline';

function pdftotextVersion(): string | undefined {
  const result = spawnSync('pdftotext', ['-v'], { encoding: 'utf8' });
  if (result.error !== undefined) return undefined;
  return `${result.stderr}${result.stdout}`.split('\n').find((line) => line.includes('version'))?.trim() ?? 'pdftotext';
}

async function measure(run: () => Promise<unknown>, pages: number, times: number): Promise<Measurement> {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const started = performance.now();
  for (let i = 0; i < times; i += 1) await run();
  const elapsed = performance.now() - started;
  // A loop blocked for the whole run records its delay only when the timer fires again: let it.
  await new Promise((resolve) => setTimeout(resolve, 5));
  delay.disable();
  return { pagesPerSecond: (pages * times * 1000) / elapsed, delayP99Ms: delay.percentile(99) / 1e6, delayMaxMs: delay.max / 1e6 };
}

interface MemoryRow {
  readonly pages: number;
  readonly chars: number;
  readonly seconds: number;
  readonly memory: WorkerMemory;
}

/** createPdfExtractor from dist/bench-build (a compiled worker, as `npm start` runs it), or from source under BENCH_TSX=1. */
async function compiledExtractorFactory(): Promise<{ create: typeof createPdfExtractor; compiled: boolean }> {
  if (!ensureCompiled()) return { create: createPdfExtractor, compiled: false };
  const module = (await import(pathToFileURL(join(buildDirectory, 'src', 'documents', 'index.js')).href)) as { createPdfExtractor: typeof createPdfExtractor };
  return { create: module.createPdfExtractor, compiled: true };
}

/** Each size read once by a fresh worker that reports its memory (live heap: a full GC before each sample). */
async function measureMemory(): Promise<{ rows: MemoryRow[]; compiled: boolean }> {
  const { create, compiled } = await compiledExtractorFactory();
  process.env.STUDY_HELPER_EXTRACT_LIVE_HEAP = '1';
  const rows: MemoryRow[] = [];
  try {
    for (const pages of memoryPages) {
      const bytes = await englishTextPdf(pages, { fontPerPage: true, linesPerPage });
      let memory: WorkerMemory | undefined;
      const extractor = create({ workers: 1, timeoutMs: 600_000, onWorkerMemory: (reported) => (memory = reported) });
      try {
        const started = performance.now();
        const result = await extractor.extract(bytes, { maxPdfPages: pages });
        const seconds = (performance.now() - started) / 1000;
        if (result.pagesUsed !== pages || memory === undefined) throw new Error(`read ${result.pagesUsed} of ${pages} pages`);
        rows.push({ pages, chars: result.text.length, seconds, memory });
        const mb = (bytes: number): string => round(bytes / 2 ** 20, 1);
        process.stdout.write(`memory, ${pages} pages: live heap ${mb(memory.heapStartBytes)} → peak ${mb(memory.heapPeakBytes)} MB, RSS ${mb(memory.rssStartBytes)} → ${mb(memory.rssPeakBytes)} MB\n`);
      } finally {
        await extractor.close();
      }
    }
  } finally {
    delete process.env.STUDY_HELPER_EXTRACT_LIVE_HEAP;
  }
  return { rows, compiled };
}

async function main(): Promise<void> {
  const loadAtStart = loadAverage();
  const version = pdftotextVersion();
  const directory = mkdtempSync(join(tmpdir(), 'bench-pdf-'));
  const worker = createPdfExtractor();
  const inline = createPdfExtractor({ mode: 'inline' });
  const results = new Map<string, Measurement[]>();
  const ratios = new Map<number, number[]>();
  try {
    for (const pages of sizes) {
      const bytes = await englishTextPdf(pages);
      const file = join(directory, `${pages}.pdf`);
      writeFileSync(file, bytes);
      const extractors: Record<Exclude<Variant, 'pdftotext'>, PdfExtractor> = { worker, inline };
      const runs: Record<Variant, (() => Promise<unknown>) | undefined> = {
        pdftotext: version === undefined ? undefined : () => execFileAsync('pdftotext', ['-q', '-enc', 'UTF-8', file, '-']),
        worker: () => extractors.worker.extract(bytes, { maxPdfPages: 1000 }),
        inline: () => extractors.inline.extract(bytes, { maxPdfPages: 1000 }),
      };
      // Sanity and warm-up (JIT, the worker's first pdf.js load).
      const check = await worker.extract(bytes, { maxPdfPages: 1000 });
      if (check.pagesUsed !== pages) throw new Error(`extractor read ${check.pagesUsed} of ${pages} pages`);
      for (const run of Object.values(runs)) if (run !== undefined) await run();
      for (let r = 0; r < rounds; r += 1) {
        const order: Variant[] = r % 2 === 0 ? ['pdftotext', 'worker', 'inline'] : ['inline', 'worker', 'pdftotext'];
        const line: string[] = [];
        const inRound = new Map<Variant, Measurement>();
        for (const variant of order) {
          const run = runs[variant];
          if (run === undefined) continue;
          const measurement = await measure(run, pages, repeats[pages]);
          inRound.set(variant, measurement);
          const key = `${pages}:${variant}`;
          results.set(key, [...(results.get(key) ?? []), measurement]);
          line.push(`${variant} ${round(measurement.pagesPerSecond, 0)} pages/s, loop p99 ${round(measurement.delayP99Ms, 1)} ms`);
        }
        const tool = inRound.get('pdftotext');
        const ours = inRound.get('worker');
        if (tool !== undefined && ours !== undefined) ratios.set(pages, [...(ratios.get(pages) ?? []), ours.pagesPerSecond / tool.pagesPerSecond]);
        process.stdout.write(`${pages} pages, round ${r + 1}/${rounds}: ${line.join(' | ')}\n`);
      }
    }
  } finally {
    await worker.close();
    await inline.close();
    rmSync(directory, { recursive: true, force: true });
  }

  const memory = await measureMemory();
  const med = (pages: number, variant: Variant, figure: (m: Measurement) => number): number =>
    median((results.get(`${pages}:${variant}`) ?? []).map(figure));
  const cell = (pages: number, variant: Variant): string => {
    if (variant === 'pdftotext' && version === undefined) return 'not installed (Debian `poppler-utils`) | —';
    return `${round(med(pages, variant, (m) => m.pagesPerSecond), 0)} | ${round(med(pages, variant, (m) => m.delayP99Ms), 1)} / ${round(med(pages, variant, (m) => m.delayMaxMs), 1)}`;
  };
  const rows = sizes.flatMap((pages) => [
    `| ${pages} | \`pdftotext\` (a process per file) | ${cell(pages, 'pdftotext')} | — |`,
    `| ${pages} | extractor, worker (what the service runs) | ${cell(pages, 'worker')} | ${ratios.has(pages) ? `${round(median(ratios.get(pages) ?? []))}×` : '—'} |`,
  ]);
  const mb = (bytes: number): string => round(bytes / 2 ** 20, 1);
  const memoryRows = memory.rows.map(
    ({ pages, chars, seconds, memory: m }) =>
      `| ${pages} | ${chars} | ${mb(m.heapStartBytes)} → ${mb(m.heapPeakBytes)} | ${mb(m.rssStartBytes)} → ${mb(m.rssPeakBytes)} | ${round(seconds, 1)} |`,
  );
  const first = memory.rows[0];
  const last = memory.rows.at(-1);
  const flatRatio = first === undefined || last === undefined ? Number.NaN : last.memory.heapPeakBytes / first.memory.heapPeakBytes;
  const flatGoal =
    first === undefined || last === undefined
      ? '- worker memory: not measured'
      : `- peak live heap at ${last.pages} pages ≤ ${flatFactor}× at ${first.pages} pages (flat in page count) — ${flatRatio <= flatFactor ? '**met**' : '**missed**'} (${round(flatRatio)}×; all read at the default PDF_WORKER_MEMORY_MB)`;
  const speedGoal =
    version === undefined
      ? `- ≥ ${goalRatio}× pdftotext's pages/s: not measured — \`pdftotext\` is not installed here (\`apt-get install poppler-utils\`).`
      : `- ≥ ${goalRatio}× pdftotext's pages/s — ${sizes
          .map((pages) => {
            const ratio = median(ratios.get(pages) ?? []);
            return `${pages} pages **${ratio >= goalRatio ? 'met' : 'missed'}** (${round(ratio)}×)`;
          })
          .join(', ')}; loop delay p99 while the worker extracts ${sizes.map((pages) => `${round(med(pages, 'worker', (m) => m.delayP99Ms), 1)} ms`).join(' / ')} (inline: ${sizes.map((pages) => `${round(med(pages, 'inline', (m) => m.delayP99Ms), 1)} ms`).join(' / ')}).`;

  writeBenchmarkSection(
    'pdf',
    `## pdf: extraction speed against pdftotext; worker time and memory against page count
${runContext('pdf', `\`BENCH_ROUNDS\`=${rounds}, \`BENCH_PDF_PAGES\`=${memoryPages.join(',')}`, loadAtStart)} · ${version === undefined ? 'pdftotext not installed' : version}
Speed: English text PDFs extracted ${repeats[10]}× (10 pages) or ${repeats[50]}× (50 pages) in a row per variant, alternating (\`pdftotext\`: a process per file), loop delay = the bench's own loop, medians. Memory: book-like PDFs (${linesPerPage} lines and a font object a page) read once each by a fresh ${memory.compiled ? 'compiled' : 'tsx (heap includes tsx)'} worker at the default 48 MB heap, MB at the document's load → peak over its pages (live heap: after a full GC).

| pages | variant | pages/s | loop delay p99 / max ms | worker vs pdftotext |
| --- | --- | ---: | ---: | ---: |
${rows.join('\n')}

| pages | text chars | live heap MB | RSS MB | s |
| --- | ---: | ---: | ---: | ---: |
${memoryRows.join('\n')}

${speedGoal}
${flatGoal}
`,
  );
}

await main();
