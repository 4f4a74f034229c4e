/**
 * `npx tsx scripts/read-manuals.ts [directory|file.pdf …]`: reads every PDF under the directories given
 * (default /tmp/manuals) through the service's extractor at its defaults (PDF_WORKERS one worker at a
 * time here, PDF_WORKER_MEMORY_MB, PDF_TIMEOUT_MS, MAX_PDF_PAGES, PDF_MAX_DECODED_MB), compiled as
 * `npm start` runs it, and reports for each its pages, time and the worker's peak memory, then the count
 * read, the pages in all, the slowest and the highest peak. Real books for the textbook use: TeX Live's
 * manuals, English and Korean, from Debian (docs/documents.md "Whole books"):
 *
 *   mkdir -p /tmp/manuals && cd /tmp/manuals && apt-get download texlive-latex-base-doc texlive-lang-korean \
 *     && for f in *.deb; do dpkg-deb -x $f x; done
 *
 * Exits non-zero when a PDF is refused. BENCH_TSX=1 runs the worker under tsx instead (its heap then
 * gets tsx's allowance on top).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildDirectory, ensureCompiled } from '../bench/support/compile.js';
import { createPdfExtractor, defaultMaxPdfPages, pdfExtractorDefaults, type WorkerMemory } from '../src/documents/index.js';


/** The PDFs under `path` (a file or a directory), sorted; symbolic links are not followed (Debian's dangle). */
function pdfsUnder(path: string): string[] {
  if (statSync(path).isFile()) return path.endsWith('.pdf') ? [path] : [];
  return readdirSync(path, { withFileTypes: true })
    .flatMap((entry) => {
      const child = join(path, entry.name);
      if (entry.isDirectory()) return pdfsUnder(child);
      return entry.isFile() && entry.name.endsWith('.pdf') ? [child] : [];
    })
    .sort();
}

async function extractorFactory(): Promise<typeof createPdfExtractor> {
  if (!ensureCompiled()) return createPdfExtractor;
  const module = (await import(pathToFileURL(join(buildDirectory, 'src', 'documents', 'index.js')).href)) as { createPdfExtractor: typeof createPdfExtractor };
  return module.createPdfExtractor;
}

interface Row {
  readonly file: string;
  readonly pages: number;
  readonly seconds: number;
  readonly memory?: WorkerMemory;
  readonly refused?: string;
}

const mb = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);

async function main(): Promise<void> {
  const roots = process.argv.slice(2);
  const files = (roots.length > 0 ? roots : ['/tmp/manuals']).flatMap(pdfsUnder);
  if (files.length === 0) {
    process.stderr.write('No PDF found (fetch the manuals first: see the comment at the top of this script).\n');
    process.exitCode = 2;
    return;
  }
  const create = await extractorFactory();
  // Set by the pool when an extraction finishes (a holder: TypeScript cannot see the callback assign it).
  const seen: { memory?: WorkerMemory } = {};
  const extractor = create({ workers: 1, queueMax: files.length, onWorkerMemory: (reported) => (seen.memory = reported) });
  const rows: Row[] = [];
  try {
    for (const file of files) {
      delete seen.memory;
      const started = performance.now();
      try {
        const result = await extractor.extract(new Uint8Array(readFileSync(file)), { maxPdfPages: defaultMaxPdfPages });
        const memory = seen.memory as WorkerMemory | undefined;
        const row: Row = { file, pages: result.pagesUsed, seconds: (performance.now() - started) / 1000, ...(memory === undefined ? {} : { memory }) };
        rows.push(row);
        process.stdout.write(`${row.seconds.toFixed(1).padStart(6)} s  ${String(row.pages).padStart(5)} p  heap ${memory === undefined ? '?' : mb(memory.heapPeakBytes)} MB  RSS +${memory === undefined ? '?' : mb(memory.rssPeakBytes - memory.rssStartBytes)} MB  ${file}\n`);
      } catch (error) {
        const code = (error as { code?: string }).code ?? 'ERROR';
        const refused = `${code}: ${error instanceof Error ? error.message : String(error)}`;
        rows.push({ file, pages: 0, seconds: (performance.now() - started) / 1000, refused });
        process.stdout.write(`refused ${file}: ${refused}\n`);
      }
    }
  } finally {
    await extractor.close();
  }
  const read = rows.filter((row) => row.refused === undefined);
  const slowest = read.reduce<Row | undefined>((worst, row) => (worst === undefined || row.seconds > worst.seconds ? row : worst), undefined);
  const heaviest = read.reduce<Row | undefined>(
    (worst, row) => (worst === undefined || (row.memory?.rssPeakBytes ?? 0) > (worst.memory?.rssPeakBytes ?? 0) ? row : worst),
    undefined,
  );
  const peakHeap = Math.max(0, ...read.map((row) => row.memory?.heapPeakBytes ?? 0));
  process.stdout.write(
    [
      '',
      `read ${read.length} of ${rows.length} PDFs at the defaults (PDF_WORKER_MEMORY_MB=${pdfExtractorDefaults.memoryMb}, PDF_TIMEOUT_MS=${pdfExtractorDefaults.timeoutMs}, MAX_PDF_PAGES=${defaultMaxPdfPages})`,
      `pages read: ${read.reduce((sum, row) => sum + row.pages, 0)}; longest: ${Math.max(0, ...read.map((row) => row.pages))}`,
      slowest === undefined ? '' : `slowest: ${slowest.seconds.toFixed(1)} s (${slowest.pages} pages, ${slowest.file})`,
      heaviest?.memory === undefined
        ? ''
        : `peak worker memory: heap ${mb(peakHeap)} MB; RSS ${mb(heaviest.memory.rssPeakBytes)} MB (+${mb(heaviest.memory.rssPeakBytes - heaviest.memory.rssStartBytes)} MB over its start, ${heaviest.file})`,
      ...rows.filter((row) => row.refused !== undefined).map((row) => `REFUSED ${row.file}: ${row.refused}`),
      '',
    ].join('\n'),
  );
  if (read.length < rows.length) process.exitCode = 1;
}

await main();
