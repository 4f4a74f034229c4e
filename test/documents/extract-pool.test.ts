import { afterEach, describe, expect, it } from 'vitest';
import {
  createPdfExtractor,
  PdfExtractorBusyError,
  PdfRejectedError,
  type PdfExtractor,
} from '../../src/documents/index.js';
import { readdirSync, readFileSync } from 'node:fs';
import { defaultCeilingMb, ExtractPool, type ExtractWorkerEntry } from '../../src/documents/extract-pool.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { flateBombPdf, sharedContentStreamPdf } from '../fixtures/pdf/hostile.js';

const extractors: PdfExtractor[] = [];

afterEach(async () => {
  await Promise.all(extractors.splice(0).map((extractor) => extractor.close()));
});

function pool(options: Parameters<typeof createPdfExtractor>[0]): PdfExtractor {
  const extractor = createPdfExtractor(options);
  extractors.push(extractor);
  return extractor;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => new Error('expected a rejection, got a result'),
    (reason: unknown) => reason,
  );
}

/** 50 pages sharing one content stream of 150000 text operators: minutes of pdf.js even on an idle machine. */
const slowPdf = (): Uint8Array => sharedContentStreamPdf(50, 150_000);

describe('PDF extraction pool', () => {
  it('stops a PDF at its own deadline (PDF_EXTRACTION_TIMEOUT) while the extractions beside it succeed', async () => {
    // Deadlines are real: a worker thread runs on its own clock. 5 s is far above what a 3-page PDF
    // takes (~0.1 s warm) and far below what the slow PDF takes (minutes).
    const extractor = pool({ workers: 2, timeoutMs: 5_000 });
    const benign = await englishTextPdf(3);
    const slow = failure(extractor.extract(slowPdf(), { maxPdfPages: 50 }));
    const beside = await Promise.all([1, 2, 3].map(() => extractor.extract(benign, { maxPdfPages: 50 })));
    expect(beside.map((result) => result.pageCount)).toEqual([3, 3, 3]);
    const error = await slow;
    expect(error).toBeInstanceOf(PdfRejectedError);
    expect((error as PdfRejectedError).code).toBe('PDF_EXTRACTION_TIMEOUT');
    // The pool goes on: the stopped worker is replaced when needed.
    expect((await extractor.extract(benign, { maxPdfPages: 50 })).pageCount).toBe(3);
  }, 120_000);

  it('gives an extraction PDF_TIMEOUT_MS for each pagesPerDeadline pages its worker says it reads, and at least one', async () => {
    // A scripted worker (the protocol of worker-protocol.ts, no pdf.js): it says it will read `pages`
    // pages, then answers after 3 s. Timers, not pdf.js's speed, decide: the test holds on a busy machine.
    const scripted = (pages: number): ExtractWorkerEntry => ({
      kind: 'eval',
      url: new URL(import.meta.url),
      code: [
        `process.send({ type: 'ready' });`,
        `process.on('message', (request) => {`,
        `  process.send({ type: 'pages', id: request.id, pagesUsed: ${pages} });`,
        `  const result = { pageCount: ${pages}, pagesUsed: ${pages}, wordCount: 1, charCount: 4, warnings: [], text: 'text', pageStarts: [0], outline: [] };`,
        `  setTimeout(() => process.send({ type: 'result', id: request.id, ok: true, result, memory: { heapStartBytes: 0, heapPeakBytes: 0, rssStartBytes: 0, rssPeakBytes: 0 } }), 3000);`,
        `});`,
        `process.on('disconnect', () => process.exit(0));`,
      ].join('\n'),
    });
    const limits = { workers: 1, queueMax: 1, timeoutMs: 1_000, memoryMb: 48, retryAfterSeconds: 1, nice: 0 };
    const run = async (pages: number, pagesPerDeadline: number): Promise<unknown> => {
      const extractPool = new ExtractPool(scripted(pages), { ...limits, pagesPerDeadline });
      try {
        return await extractPool.extract(new Uint8Array(8), { maxPdfPages: 1000 }).then((result) => result.pagesUsed, (error: unknown) => error);
      } finally {
        await extractPool.close();
      }
    };
    // 10 pages at 1 per deadline: 10 s for an answer in 3 s.
    expect(await run(10, 1)).toBe(10);
    // 10 pages at 250 per deadline: one deadline, 1 s.
    const single = await run(10, 250);
    expect((single as PdfRejectedError).code).toBe('PDF_EXTRACTION_TIMEOUT');
    expect((single as Error).message).toMatch(/within 1 s \(PDF_TIMEOUT_MS for each 250 pages read\)/u);
    // 2 pages at 1 per deadline: 2 s, still short of the 3 s the answer takes.
    expect(((await run(2, 1)) as PdfRejectedError).code).toBe('PDF_EXTRACTION_TIMEOUT');
  }, 60_000);

  it('refuses at once when every worker is busy and the queue is full, and fails nothing else', async () => {
    const extractor = pool({ workers: 1, queueMax: 1, timeoutMs: 60_000 });
    const running = failure(extractor.extract(slowPdf(), { maxPdfPages: 50 }));
    const queued = failure(extractor.extract(slowPdf(), { maxPdfPages: 50 }));
    const refused = await failure(extractor.extract(await englishTextPdf(1), { maxPdfPages: 50 }));
    expect(refused).toBeInstanceOf(PdfExtractorBusyError);
    expect((refused as PdfExtractorBusyError).retryAfterSeconds).toBeGreaterThan(0);
    expect((refused as Error).message).toMatch(/PDF_WORKERS=1, 1 may wait/);
    await extractors.splice(0)[0]?.close();
    // Closing fails the two it held (not as a refusal of the PDF).
    for (const error of [await running, await queued]) {
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(PdfRejectedError);
    }
  });

  it('with a queue of 0 refuses whenever every worker is taken', async () => {
    const extractor = pool({ workers: 1, queueMax: 0, timeoutMs: 60_000 });
    void failure(extractor.extract(slowPdf(), { maxPdfPages: 50 }));
    expect(await failure(extractor.extract(await englishTextPdf(1), { maxPdfPages: 50 }))).toBeInstanceOf(PdfExtractorBusyError);
  });
});

/** Resident set of this process and its child processes, MB, read from /proc (the test's own oracle). */
function treeRssMb(): number {
  let total = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/u.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const isThisProcess = Number(name) === process.pid;
      if (!isThisProcess && Number(fields[1]) !== process.pid) continue;
      total += Number(fields[21]) * 4096;
    } catch {
      // A process that ended while the list was read.
    }
  }
  return total / (1024 * 1024);
}

describe('the memory ceiling of a worker', () => {
  it('kills a worker whose memory outgrows its ceiling however the bomb is built (here: with the scan off), alone', async () => {
    // The decoded-bytes scan is switched off (a budget of 1 TB), so pdf.js inflates 384 MB of zeros
    // itself, into ArrayBuffers outside any V8 heap limit: only the ceiling can stop it.
    const bomb = await flateBombPdf(384 * 1024 * 1024);
    const benign = await englishTextPdf(3);
    const extractor = pool({ workers: 2, timeoutMs: 120_000 });
    // Both workers started and warm: the baseline holds two ready workers.
    await Promise.all([extractor.extract(benign, { maxPdfPages: 50 }), extractor.extract(benign, { maxPdfPages: 50 })]);
    const baseline = treeRssMb();
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, treeRssMb());
    }, 5);
    try {
      const [bombed, beside] = await Promise.all([
        failure(extractor.extract(bomb, { maxPdfPages: 50, maxDecodedBytes: 2 ** 40 })),
        extractor.extract(benign, { maxPdfPages: 50 }),
      ]);
      expect((bombed as PdfRejectedError).code).toBe('PDF_MEMORY_LIMIT');
      expect(beside.pageCount).toBe(3);
    } finally {
      clearInterval(sampler);
    }
    // The rule: a worker grows by at most its ceiling (48 MB heap + 64 MB decoded + 32 MB = 144 MB),
    // read every 20 ms; 64 MB more is what pdf.js can write between two reads.
    expect(defaultCeilingMb(48)).toBe(144);
    expect(peak - baseline).toBeLessThan(144 + 64);
    // The pool goes on with a new worker.
    expect((await extractor.extract(benign, { maxPdfPages: 50 })).pageCount).toBe(3);
  }, 300_000);
});
