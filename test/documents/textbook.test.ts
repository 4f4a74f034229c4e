/**
 * Textbooks a chapter at a time (docs/documents.md "Outline", docs/api.md "Textbooks"), through the real
 * service and the real SDKs against the emulator. Claude's calls go through a recording proxy: the test's
 * own oracle of which pages' text reached the model. Every page N of the fixtures begins "Chapter N:".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { outlinedPdf } from '../fixtures/pdf/outline.js';
import { postJson, request, startHarness, type Harness } from '../http/blackbox-support.js';
import { parseSseBlock } from '../jobs/support.js';
import { startRecordingProxy, type RecordingProxy } from '../jobs/recording-proxy.js';

const keys = { 'x-claude-key': 'test-claude-key-0001-textbook' };
const pageCount = 44;
const pagesUsed = 40;
const maxTextParts = 3;

let emulator: Emulator;
let proxy: RecordingProxy;
let harness: Harness;
let outlined: { documentId: string; body: Record<string, unknown> };
let dense: string;

async function upload(pdf: Uint8Array): Promise<{ documentId: string; body: Record<string, unknown> }> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(pdf)], { type: 'application/pdf' }), 'book.pdf');
  const result = await request(`${harness.url}/v1/documents`, { method: 'POST', body: form });
  expect(result.status, result.text).toBe(201);
  const body = result.body as Record<string, unknown>;
  return { documentId: String(body.documentId), body };
}

/** The page numbers N of every "Chapter N:" in `text`. */
function chaptersIn(text: string): Set<number> {
  return new Set([...text.matchAll(/Chapter (\d+):/gu)].map((match) => Number(match[1])));
}

/** Every item of a result with the `pages` it carries. */
function itemsOf(result: Record<string, unknown>): { pages?: unknown }[] {
  if (Array.isArray(result.questions)) return result.questions as { pages?: unknown }[];
  return ['keyConcepts', 'sections', 'glossary'].flatMap((list) => (result[list] ?? []) as { pages?: unknown }[]);
}

/** Each item carries a non-empty list of whole pages, each within from..to. */
function expectPagesWithin(items: readonly { pages?: unknown }[], from: number, to: number): void {
  expect(items.length).toBeGreaterThan(0);
  for (const item of items) {
    expect(Array.isArray(item.pages), JSON.stringify(item)).toBe(true);
    const pages = item.pages as number[];
    expect(pages.length).toBeGreaterThan(0);
    for (const page of pages) {
      expect(Number.isInteger(page)).toBe(true);
      expect(page).toBeGreaterThanOrEqual(from);
      expect(page).toBeLessThanOrEqual(to);
    }
  }
}

beforeAll(async () => {
  emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
  proxy = await startRecordingProxy(emulator);
  harness = await startHarness({
    ANTHROPIC_BASE_URL: proxy.url,
    MAX_PDF_PAGES: String(pagesUsed),
    MAX_TEXT_PARTS: String(maxTextParts),
    PROVIDER_TIMEOUT_MS: '20000',
    LOG_LEVEL: 'warn',
  });
  outlined = await upload(await outlinedPdf(pageCount));
  // 40 lines a page (~600 tokens): the whole book needs more than 3 parts of 6000 tokens.
  dense = (await upload(await englishTextPdf(pagesUsed, { linesPerPage: 40 }))).documentId;
}, 240_000);

afterAll(async () => {
  await harness?.close();
  await proxy?.close();
  await emulator?.close();
});

describe('the outline', () => {
  it('answers the bookmarks depth first: level 1 on top, pages 1-based, titles as text, link-only entries left out', () => {
    expect(outlined.body.pageCount).toBe(pageCount);
    expect(outlined.body.pagesUsed).toBe(pagesUsed);
    expect(outlined.body.outline).toEqual([
      { title: 'Part I: Cells', page: 1, level: 1 },
      { title: 'Chapter 1 Membranes', page: 2, level: 2 },
      { title: '1.1 Lipids', page: 3, level: 3 },
      { title: '1.2 Proteins', page: 4, level: 3 },
      { title: 'Chapter 2 광합성', page: 6, level: 2 },
      { title: 'Appendix', page: 11, level: 2 },
      { title: 'Index', page: 12, level: 1 },
    ]);
    expect(outlined.body).not.toHaveProperty('pageStarts');
  });

  it('is [] for a PDF without bookmarks', async () => {
    const plain = await upload(await englishTextPdf(2));
    expect(plain.body.outline).toEqual([]);
  });
});

describe('a page range', () => {
  it("sends only those pages' text to the model, and every notes item carries pages within the range", async () => {
    proxy.seen.length = 0;
    const result = await postJson(`${harness.url}/v1/generate`, { task: 'notes', documentId: outlined.documentId, pages: { from: 3, to: 5 }, providers: ['claude'] }, keys);
    expect(result.status, result.text).toBe(200);
    const prompts = proxy.seen.map((seen) => seen.body).join('\n');
    expect(proxy.seen.length).toBeGreaterThan(0);
    expect([...chaptersIn(prompts)].sort((a, b) => a - b)).toEqual([3, 4, 5]);
    expectPagesWithin(itemsOf((result.body as { result: Record<string, unknown> }).result), 3, 5);
  });

  it('streams question items that carry pages within the range, as the final result does', async () => {
    const response = await fetch(`${harness.url}/v1/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...keys },
      body: JSON.stringify({ task: 'mcq', documentId: outlined.documentId, pages: { from: 7, to: 9 }, providers: ['claude'], options: { count: 3 } }),
    });
    expect(response.status).toBe(200);
    const events = (await response.text())
      .split('\n\n')
      .map((block) => parseSseBlock(block))
      .filter((event) => event !== undefined);
    const items = events.filter((event) => event.event === 'item').map((event) => (JSON.parse(event.data) as { value: { pages?: unknown } }).value);
    expectPagesWithin(items, 7, 9);
    const done = events.find((event) => event.event === 'done');
    expect(done, JSON.stringify(events.map((event) => event.event))).toBeDefined();
    expectPagesWithin(itemsOf((JSON.parse(done?.data ?? '{}') as { result: Record<string, unknown> }).result), 7, 9);
  });

  it('gives a job whose notes, mcq and fill items all carry pages within the range', async () => {
    proxy.seen.length = 0;
    const created = await postJson(`${harness.url}/v1/jobs`, { documentId: outlined.documentId, pages: { from: 2, to: 3 }, providers: ['claude'], options: { mcqCount: 2, fillCount: 2 } }, keys);
    expect(created.status, created.text).toBe(202);
    const jobId = (created.body as { jobId: string }).jobId;
    let view: { status: string; result?: Record<string, Record<string, unknown>> } = { status: 'queued' };
    for (const deadline = Date.now() + 120_000; Date.now() < deadline && !['succeeded', 'failed'].includes(view.status); ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      view = (await request(`${harness.url}/v1/jobs/${jobId}`)).body as typeof view;
    }
    expect(view.status, JSON.stringify(view)).toBe('succeeded');
    for (const stage of ['notes', 'mcq', 'fill']) expectPagesWithin(itemsOf(view.result?.[stage] ?? {}), 2, 3);
    expect([...chaptersIn(proxy.seen.map((seen) => seen.body).join('\n'))].sort((a, b) => a - b)).toEqual([2, 3]);
  }, 150_000);

  it('leaves items of text input without pages', async () => {
    const result = await postJson(`${harness.url}/v1/generate`, { task: 'notes', text: 'Chapter 1: Photosynthesis converts light energy into chemical energy stored in glucose.', providers: ['claude'] }, keys);
    expect(result.status, result.text).toBe(200);
    for (const item of itemsOf((result.body as { result: Record<string, unknown> }).result)) expect(item).not.toHaveProperty('pages');
  });
});

describe('INVALID_PAGES', () => {
  const cases: [string, { from: number; to: number }][] = [
    ['from after to', { from: 5, to: 3 }],
    ['before the first page', { from: 0, to: 2 }],
    ['past the last page', { from: 43, to: 45 }],
    ['past pagesUsed (left out at upload)', { from: 39, to: 41 }],
  ];
  it.each(cases)('answers 422 for a range %s, on generate and on jobs, and calls no provider', async (_name, pages) => {
    proxy.seen.length = 0;
    const generated = await postJson(`${harness.url}/v1/generate`, { task: 'notes', documentId: outlined.documentId, pages, providers: ['claude'] }, keys);
    expect(generated.status, generated.text).toBe(422);
    expect((generated.body as { error: { code: string } }).error.code).toBe('INVALID_PAGES');
    const job = await postJson(`${harness.url}/v1/jobs`, { documentId: outlined.documentId, pages, providers: ['claude'] }, keys);
    expect(job.status, job.text).toBe(422);
    expect((job.body as { error: { code: string } }).error.code).toBe('INVALID_PAGES');
    expect(proxy.seen).toHaveLength(0);
  });

  it('answers 422 for pages sent with text instead of a documentId', async () => {
    const result = await postJson(`${harness.url}/v1/generate`, { task: 'notes', text: 'Some text to study.', pages: { from: 1, to: 1 }, providers: ['claude'] }, keys);
    expect(result.status, result.text).toBe(422);
    expect((result.body as { error: { code: string } }).error.code).toBe('INVALID_PAGES');
  });
});

describe('TOO_MANY_PARTS', () => {
  it('says how many pages fit, and that many pages are accepted while one more is not', async () => {
    const whole = await postJson(`${harness.url}/v1/generate`, { task: 'notes', documentId: dense, providers: ['claude'] }, keys);
    expect(whole.status, whole.text).toBe(413);
    const message = (whole.body as { error: { code: string; message: string } }).error;
    expect(message.code).toBe('TOO_MANY_PARTS');
    const fit = /(\d+) pages? fit \(pages 1–(\d+)\)/u.exec(message.message);
    expect(fit, message.message).not.toBeNull();
    const count = Number(fit?.[1]);
    expect(Number(fit?.[2])).toBe(count);
    expect(count).toBeGreaterThan(0);
    expect(count).toBeLessThan(pagesUsed);
    const fits = await postJson(`${harness.url}/v1/generate`, { task: 'notes', documentId: dense, pages: { from: 1, to: count }, providers: ['claude'] }, keys);
    expect(fits.status, fits.text).toBe(200);
    const tooMany = await postJson(`${harness.url}/v1/generate`, { task: 'notes', documentId: dense, pages: { from: 1, to: count + 1 }, providers: ['claude'] }, keys);
    expect(tooMany.status, tooMany.text).toBe(413);
  }, 120_000);

  it("refuses a job's dry-run estimate as the job would be, with the same advice, asking no provider", async () => {
    const asGenerate = await postJson(`${harness.url}/v1/generate`, { task: 'notes', documentId: dense, providers: ['claude'] }, keys);
    const estimate = await postJson(`${harness.url}/v1/jobs`, { documentId: dense, estimate: true, providers: ['claude'] }, keys);
    expect(estimate.status, estimate.text).toBe(413);
    const error = (estimate.body as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('TOO_MANY_PARTS');
    expect(error.message).toMatch(/\d+ pages? fit \(pages 1–\d+\)/u);
    expect(error.message).toBe((asGenerate.body as { error: { message: string } }).error.message);
    const fitting = /(\d+) pages? fit/u.exec(error.message);
    const within = await postJson(`${harness.url}/v1/jobs`, { documentId: dense, estimate: true, pages: { from: 1, to: Number(fitting?.[1]) }, providers: ['claude'] }, keys);
    expect(within.status, within.text).toBe(200);
  }, 120_000);
});
