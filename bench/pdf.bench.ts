/**
 * PDF extraction (issue 8): pages per second of the project's extractor (src/documents, worker
 * thread as the service runs it, and inline for contrast) on generated 10- and 50-page PDFs, against
 * poppler's `pdftotext` on the same files; event-loop delay (p99 of monitorEventLoopDelay) while each
 * runs. Variants alternate over several rounds; ratios are per round, medians quoted.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { createPdfExtractor, type PdfExtractor } from '../src/documents/index.js';
import { englishTextPdf } from '../test/fixtures/pdf/generate.js';
import { median, round, runContext, writeBenchmarkSection } from './report.js';

const execFileAsync = promisify(execFile);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const sizes = [10, 50] as const;
/** Extractions per measurement, so each lasts long enough to time. */
const repeats: Record<(typeof sizes)[number], number> = { 10: 8, 50: 3 };
const goalRatio = 0.3;

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

async function main(): Promise<void> {
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

  const med = (pages: number, variant: Variant, figure: (m: Measurement) => number): number =>
    median((results.get(`${pages}:${variant}`) ?? []).map(figure));
  const cell = (pages: number, variant: Variant): string => {
    if (variant === 'pdftotext' && version === undefined) return 'not installed (Debian `poppler-utils`) | —';
    return `${round(med(pages, variant, (m) => m.pagesPerSecond), 0)} | ${round(med(pages, variant, (m) => m.delayP99Ms), 1)} / ${round(med(pages, variant, (m) => m.delayMaxMs), 1)}`;
  };
  const rows = sizes.flatMap((pages) => [
    `| ${pages} | \`pdftotext\` (a process per file) | ${cell(pages, 'pdftotext')} | — |`,
    `| ${pages} | extractor, worker thread (what the service runs) | ${cell(pages, 'worker')} | ${ratios.has(pages) ? `${round(median(ratios.get(pages) ?? []))}×` : '—'} |`,
    `| ${pages} | extractor, inline on the event loop | ${cell(pages, 'inline')} | — |`,
  ]);
  const goals = sizes.map((pages) => {
    const ratio = median(ratios.get(pages) ?? []);
    if (version === undefined) return `- ${pages} pages: not measured — \`pdftotext\` is not installed here (\`apt-get install poppler-utils\`).`;
    return `- ${pages} pages: ≥ ${goalRatio}× pdftotext's pages/s — ${ratio >= goalRatio ? '**met**' : '**missed**'} (${round(ratio)}×, ${round(ratio / goalRatio, 1)}× the goal); event-loop delay p99 while the worker extracts ${round(med(pages, 'worker', (m) => m.delayP99Ms), 1)} ms (inline: ${round(med(pages, 'inline', (m) => m.delayP99Ms), 1)} ms).`;
  });

  writeBenchmarkSection(
    'pdf',
    `## pdf: extraction pages per second against pdftotext
${runContext('pdf', `\`BENCH_ROUNDS\`=${rounds}`)} · ${version === undefined ? 'pdftotext not installed' : version}
Generated English text PDFs extracted ${repeats[10]}× (10 pages) or ${repeats[50]}× (50 pages) in a row per variant, alternating; \`pdftotext\` is a
process per file (start-up included); loop delay = the bench's own event loop while the variant runs. Medians.

| pages | variant | pages/s | loop delay p99 / max ms | worker vs pdftotext |
| --- | --- | ---: | ---: | ---: |
${rows.join('\n')}

${goals.join('\n')}
`,
  );
}

await main();
