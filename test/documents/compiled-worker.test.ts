import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { heapHungryPdf } from '../fixtures/pdf/hostile.js';

const execFileAsync = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
// Inside node_modules so that the compiled files resolve pdf-parse like dist/ does.
const buildDir = join(root, 'node_modules', '.cache', `study-helper-documents-${process.pid}`);
// Compiled with src/ as the root (the documents module imports src/threads): the module lands in documents/.
const outDir = join(buildDir, 'documents');

describe('the PDF worker from compiled JavaScript (as under dist/)', () => {
  beforeAll(async () => {
    const sources = ['index.ts', 'extract-worker.ts'].map((file) => join(root, 'src', 'documents', file));
    await execFileAsync(
      process.execPath,
      [
        join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
        ...sources,
        ...['--outDir', buildDir, '--rootDir', join(root, 'src')],
        ...['--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--target', 'ES2022'],
        ...['--strict', '--skipLibCheck', '--types', 'node', '--lib', 'ES2023,DOM', '--ignoreConfig'],
      ],
      { cwd: root },
    );
  }, 120_000);

  afterAll(async () => {
    await rm(buildDir, { recursive: true, force: true });
  });

  it('compiles extract-worker.js next to pdf-extractor.js and extracts through it', async () => {
    const files = await readdir(outDir);
    expect(files).toEqual(expect.arrayContaining(['pdf-extractor.js', 'extract-worker.js']));
    const pdfPath = join(outDir, 'fixture.pdf');
    await writeFile(pdfPath, await englishTextPdf(2));
    const script = [
      `import { readFileSync } from 'node:fs';`,
      `import { createPdfExtractor } from ${JSON.stringify(join(outDir, 'index.js'))};`,
      `const extractor = createPdfExtractor();`,
      `const result = await extractor.extract(readFileSync(${JSON.stringify(pdfPath)}), { maxPdfPages: 50 });`,
      `await extractor.close();`,
      `console.log(JSON.stringify({ pageCount: result.pageCount, wordCount: result.wordCount }));`,
    ].join('\n');
    await mkdir(outDir, { recursive: true });
    const scriptPath = join(outDir, 'run.mjs');
    await writeFile(scriptPath, script);
    // Plain node, no tsx: only the compiled worker file can serve this.
    const { stdout } = await execFileAsync(process.execPath, [scriptPath], { cwd: outDir });
    expect(JSON.parse(stdout)).toEqual({ pageCount: 2, wordCount: 120 });
  }, 60_000);

  it('a PDF past the worker memory cap fails alone with PDF_MEMORY_LIMIT; the extraction beside it succeeds', async () => {
    // Compiled, pdf.js runs in a 48 MB heap; a TJ array of 4 million strings (12 KB on disk) needs more.
    const hungryPath = join(outDir, 'hungry.pdf');
    const benignPath = join(outDir, 'benign.pdf');
    await writeFile(hungryPath, heapHungryPdf(4_000_000));
    await writeFile(benignPath, await englishTextPdf(2));
    const script = [
      `import { readFileSync } from 'node:fs';`,
      `import { createPdfExtractor } from ${JSON.stringify(join(outDir, 'index.js'))};`,
      `const extractor = createPdfExtractor({ workers: 2, memoryMb: 48, timeoutMs: 120000 });`,
      `const outcome = (promise) => promise.then((result) => ({ pageCount: result.pageCount }), (error) => ({ code: error.code }));`,
      `const [hungry, benign] = await Promise.all([`,
      `  outcome(extractor.extract(readFileSync(${JSON.stringify(hungryPath)}), { maxPdfPages: 50 })),`,
      `  outcome(extractor.extract(readFileSync(${JSON.stringify(benignPath)}), { maxPdfPages: 50 })),`,
      `]);`,
      `const after = await outcome(extractor.extract(readFileSync(${JSON.stringify(benignPath)}), { maxPdfPages: 50 }));`,
      `await extractor.close();`,
      `console.log(JSON.stringify({ hungry, benign, after }));`,
    ].join('\n');
    const scriptPath = join(outDir, 'memory.mjs');
    await writeFile(scriptPath, script);
    const { stdout } = await execFileAsync(process.execPath, [scriptPath], { cwd: outDir });
    expect(JSON.parse(stdout)).toEqual({ hungry: { code: 'PDF_MEMORY_LIMIT' }, benign: { pageCount: 2 }, after: { pageCount: 2 } });
  }, 180_000);

  it('reads a 1,000-page book-like PDF at the defaults (MAX_PDF_PAGES, PDF_WORKER_MEMORY_MB), each page where pageStarts says', async () => {
    // 1,000 pages of 40 lines, each page's text in a font object of its own (as a typeset book's subset
    // fonts are): before extraction went page by page, pdf.js kept every page and font it met and 700
    // such pages were refused PDF_MEMORY_LIMIT at the default 48 MB heap.
    const pages = 1000;
    const linesPerPage = 40;
    const bookPath = join(outDir, 'book.pdf');
    await writeFile(bookPath, await englishTextPdf(pages, { fontPerPage: true, linesPerPage }));
    const outcome = await extractCompiled(bookPath);
    expect(outcome.code).toBeUndefined();
    expect({ pageCount: outcome.pageCount, pagesUsed: outcome.pagesUsed }).toEqual({ pageCount: pages, pagesUsed: pages });
    const text = outcome.text ?? '';
    // Every page's text is there, in order: each page opens with its own chapter line…
    const chapters = [...text.matchAll(/^Chapter (\d+): Plant biology$/gmu)].map((match) => Number(match[1]));
    expect(chapters).toEqual(Array.from({ length: pages }, (_, index) => index + 1));
    expect(text.split('\n')).toHaveLength(pages * linesPerPage + (pages - 1));
    // …exactly where pageStarts says it begins.
    expect(outcome.pageStarts).toHaveLength(pages);
    (outcome.pageStarts ?? []).forEach((start, index) => expect(text.startsWith(`Chapter ${index + 1}: Plant biology\n`, start)).toBe(true));
  }, 900_000);

  // TeX Live's manuals (Debian's texlive-latex-base-doc): source2e.pdf's and source3.pdf's index pages hold
  // hundreds of link annotations each, which pdf.js keeps while the document is open; 50 such pages filled
  // the 48 MB heap (docs/documents.md "Whole books"). Read when present (scripts/read-manuals.ts says how
  // to fetch them); no deadline here: time is the bench's and the script's to report, not a test's.
  const manuals = process.env.TEXLIVE_MANUALS ?? '/tmp/manuals';
  const sources = ['latex/base/source2e.pdf', 'latex/l3kernel/source3.pdf'].map((file) => join(manuals, 'x', 'usr', 'share', 'doc', 'texlive-doc', file));
  it.skipIf(!sources.every((file) => existsSync(file)))('reads source2e.pdf and source3.pdf whole (1,221 and 1,400-odd pages) at the default worker memory', async () => {
    for (const file of sources) {
      const outcome = await extractCompiled(file, 10_000);
      expect(outcome.code, file).toBeUndefined();
      expect(outcome.pagesUsed, file).toBe(outcome.pageCount);
      expect(outcome.pagesUsed, file).toBeGreaterThan(1000);
      expect(outcome.pageStarts, file).toHaveLength(outcome.pagesUsed ?? -1);
    }
  }, 900_000);

  /** Extracts `path` through the compiled worker at the defaults (MAX_PDF_PAGES unless `maxPdfPages`), with no deadline to race on a busy machine, in a process of its own. */
  async function extractCompiled(path: string, maxPdfPages?: number): Promise<{ code?: string; pageCount?: number; pagesUsed?: number; text?: string; pageStarts?: number[] }> {
    const script = [
      `import { readFileSync } from 'node:fs';`,
      `import { createPdfExtractor, defaultMaxPdfPages } from ${JSON.stringify(join(outDir, 'index.js'))};`,
      `const extractor = createPdfExtractor({ workers: 1, timeoutMs: 1800000 });`,
      `const outcome = await extractor.extract(readFileSync(${JSON.stringify(path)}), { maxPdfPages: ${maxPdfPages ?? 'defaultMaxPdfPages'} }).then(`,
      `  (result) => ({ pageCount: result.pageCount, pagesUsed: result.pagesUsed, text: result.text, pageStarts: result.pageStarts }),`,
      `  (error) => ({ code: error.code }),`,
      `);`,
      `await extractor.close();`,
      `console.log(JSON.stringify(outcome));`,
    ].join('\n');
    const scriptPath = join(outDir, 'extract.mjs');
    await writeFile(scriptPath, script);
    const { stdout } = await execFileAsync(process.execPath, [scriptPath], { cwd: outDir, maxBuffer: 256 * 1024 * 1024 });
    return JSON.parse(stdout) as { code?: string; pageCount?: number; pagesUsed?: number; text?: string; pageStarts?: number[] };
  }
});
