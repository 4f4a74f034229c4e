/**
 * WORKER_NICE: the PDF extract workers (child processes, for their memory ceiling) lower every thread
 * of their process, the token-count worker its own thread, so a hostile upload or text takes only the
 * CPU the event loop leaves. Read from the kernel (/proc/<pid>/task/<tid>/stat, field 19 is the nice
 * value), not from the code that set it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { createPdfExtractor, type PdfExtractor } from '../../src/documents/index.js';
import { createTokenCounter, type TokenCounter } from '../../src/study/index.js';
import { loadConfig } from '../../src/config.js';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway } from '../http/support.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';

const linux = process.platform === 'linux';

/** The nice value of every thread of process `pid` (this one by default), by thread id. */
function threadNices(pid: number | 'self' = 'self'): Map<number, number> {
  const nices = new Map<number, number>();
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'latin1');
      // The command name is in parentheses and may hold spaces: count the fields after its ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      nices.set(Number(task), Number(fields[16]));
    } catch {
      // The thread ended while listed.
    }
  }
  return nices;
}

/** Threads that appeared since `before` with the given nice value (the worker, and threads it started). */
function newThreadsAt(before: Map<number, number>, nice: number): number[] {
  return [...threadNices()].filter(([tid, value]) => !before.has(tid) && value === nice).map(([tid]) => tid);
}

/** Threads that were there in `before` and whose nice value changed since: the worker must lower only itself. */
function changedThreads(before: Map<number, number>): number[] {
  return [...threadNices()].filter(([tid, value]) => before.has(tid) && before.get(tid) !== value).map(([tid]) => tid);
}

/** The nice values of the threads of this process's child processes (the PDF extract workers). */
function childThreadNices(): number[] {
  const nices: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/u.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== process.pid) continue;
      nices.push(...threadNices(Number(name)).values());
    } catch {
      // A process that ended while listed.
    }
  }
  return nices;
}

const extractors: PdfExtractor[] = [];
const counters: TokenCounter[] = [];
afterEach(async () => {
  await Promise.all([...extractors.splice(0).map((e) => e.close()), ...counters.splice(0).map((c) => c.close())]);
});

describe.runIf(linux)('workers run below the event loop (WORKER_NICE)', () => {
  it('starts each PDF extract worker at the nice value it is given, and leaves it alone by default', async () => {
    const pdf = await englishTextPdf(1);
    for (const [options, expected] of [
      [{ workers: 1, nice: 7 }, 7],
      [{ workers: 1 }, 0],
    ] as const) {
      const before = threadNices();
      const extractor = createPdfExtractor(options);
      extractors.push(extractor);
      expect((await extractor.extract(pdf, { maxPdfPages: 50 })).pageCount).toBe(1);
      // Every thread of the worker process, Node's own and those pdf.js starts (they inherit the value).
      const workerThreads = childThreadNices();
      expect(workerThreads.length).toBeGreaterThanOrEqual(1);
      expect(new Set(workerThreads)).toEqual(new Set([expected]));
      expect(changedThreads(before)).toEqual([]);
      expect(threadNices().get(process.pid)).toBe(0);
      await extractors.splice(0)[0]?.close();
    }
  }, 60_000);

  it("runs the service's PDF workers at WORKER_NICE, 19 by default (an upload through the app)", async () => {
    const app = await buildApp({
      // Only the deadline is raised: a worker at 19 on the oversubscribed test machine waits behind every
      // other process (the reason testConfig runs the behaviour tests at 0).
      config: loadConfig({ LOG_LEVEL: 'silent', PDF_TIMEOUT_MS: '120000' }),
      gateway: staticGateway(),
      documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
      processMetrics: false,
    });
    try {
      const before = threadNices();
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(await englishTextPdf(1))], { type: 'application/pdf' }), 'a.pdf');
      const request = new Request('http://localhost/', { method: 'POST', body: form });
      const upload = await app.inject({
        method: 'POST',
        url: '/v1/documents',
        headers: { 'content-type': request.headers.get('content-type') ?? '' },
        payload: Buffer.from(await request.arrayBuffer()),
      });
      expect(upload.statusCode, upload.body).toBe(201);
      expect(childThreadNices().filter((nice) => nice === 19).length).toBeGreaterThanOrEqual(1);
      expect(changedThreads(before)).toEqual([]);
    } finally {
      await app.close();
    }
  }, 180_000);

  it('starts the token-count worker at the configured nice value', async () => {
    const before = threadNices();
    const counter = createTokenCounter({ nice: 5 });
    counters.push(counter);
    expect(await counter.count('b'.repeat(5_000))).toBeGreaterThan(0);
    expect(newThreadsAt(before, 5)).toHaveLength(1);
    expect(changedThreads(before)).toEqual([]);
    expect(threadNices().get(process.pid)).toBe(0);
  }, 60_000);

  it('reads WORKER_NICE from the environment: 19 by default, 0 to 19 accepted', () => {
    expect(loadConfig({}).workerNice).toBe(19);
    expect(loadConfig({ WORKER_NICE: '0' }).workerNice).toBe(0);
    expect(() => loadConfig({ WORKER_NICE: '20' })).toThrow(/WORKER_NICE/);
    expect(() => loadConfig({ WORKER_NICE: '-5' })).toThrow(/WORKER_NICE/);
  });
});
