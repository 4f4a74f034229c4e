import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { createPdfExtractor, type PdfExtractor } from '../../src/documents/index.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';

/** Longest event-loop stall (ms) while `work` runs, sampled every millisecond. */
async function longestStall(work: () => Promise<unknown>): Promise<{ maxMs: number; p99Ms: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  await sleep(10);
  await work();
  // Let the loop turn once more so a stall at the very end is recorded.
  await sleep(10);
  histogram.disable();
  return { maxMs: histogram.max / 1e6, p99Ms: histogram.percentile(99) / 1e6 };
}

describe('event loop while extracting a 50-page PDF', () => {
  const extractors: PdfExtractor[] = [];
  afterAll(async () => {
    await Promise.all(extractors.map((extractor) => extractor.close()));
  });

  it('the worker extractor stalls the loop far less than extraction on the main thread', async () => {
    const pdf = await englishTextPdf(50);
    const inline = createPdfExtractor({ mode: 'inline' });
    const worker = createPdfExtractor();
    extractors.push(inline, worker);
    // Warm both: the first call loads pdf.js (on the main thread for inline, which blocks ~0.5 s).
    await inline.extract(pdf, { maxPdfPages: 50 });
    await worker.extract(pdf, { maxPdfPages: 50 });

    const inlineStall = await longestStall(() => inline.extract(pdf, { maxPdfPages: 50 }));
    const workerStall = await longestStall(() => worker.extract(pdf, { maxPdfPages: 50 }));
    console.info(
      `50-page PDF, loop stall: inline max ${inlineStall.maxMs.toFixed(1)} ms (p99 ${inlineStall.p99Ms.toFixed(1)}), worker max ${workerStall.maxMs.toFixed(1)} ms (p99 ${workerStall.p99Ms.toFixed(1)})`,
    );
    expect(workerStall.maxMs).toBeLessThan(inlineStall.maxMs);
    expect(workerStall.p99Ms).toBeLessThan(50);
  }, 120_000);
});
