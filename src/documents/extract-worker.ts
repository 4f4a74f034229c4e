/**
 * The extract worker: the child-process entry that runs pdf.js for the extract pool (extract-pool.ts),
 * its resident set watched by its parent (extract-process.ts) and its V8 heap capped by flags: a worker
 * thread's `resourceLimits` bound only the V8 heap, while a decompression bomb lives in ArrayBuffers
 * outside it. It loads pdf.js, says `ready`, then answers one extraction at a time over the IPC
 * channel. An allocation that fails anyway (RangeError) is answered PDF_MEMORY_LIMIT and the process
 * exits, so that its successor starts clean.
 */
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setPriority } from 'node:os';
import { PdfRejectedError } from './errors.js';
import { extractPdfTextInline, preloadPdfParse } from './extract-text.js';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { ExtractRequestToChild, ExtractResponse, WorkerMemory } from './worker-protocol.js';

const send = process.send?.bind(process);
if (send === undefined) throw new Error('extract-worker must run as a child process with an IPC channel');
const nice = Math.min(19, Number(process.env.STUDY_HELPER_EXTRACT_NICE ?? '0'));
// A hostile PDF's CPU must come from what the event loop leaves (WORKER_NICE, docs/documents.md): every
// thread of this process (Node's own started before this line), again once pdf.js has started its own.
lowerEveryThread();

/** Sets WORKER_NICE on each thread of this process (Linux: a thread id is a pid to setpriority(2)). */
function lowerEveryThread(): void {
  if (!(nice > 0)) return;
  try {
    for (const task of readdirSync('/proc/self/task')) setPriority(Number(task), nice);
  } catch {
    // No /proc (not Linux), or a thread ended while listed: the ones set keep their value.
  }
}

/** True for the error V8 or Node throws when an allocation is refused. */
function isAllocationFailure(error: unknown): boolean {
  return error instanceof RangeError && /allocation failed|Array buffer|Invalid typed array length|out of memory/iu.test(error.message);
}

let allocationFailed = false;
process.on('uncaughtException', (error) => {
  // pdf.js runs parts of its work in callbacks; a refused allocation there must still end this process.
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(isAllocationFailure(error) ? 137 : 70);
});

process.on('message', (request: ExtractRequestToChild) => {
  void answer(request).then((response) => {
    send(response, undefined, undefined, () => {
      if (allocationFailed) process.exit(137);
    });
  });
});
process.on('disconnect', () => process.exit(0));
void preloadPdfParse().then(() => {
  lowerEveryThread();
  send({ type: 'ready' } satisfies ExtractResponse);
});

/**
 * A full garbage collection before each memory sample, when asked for (the bench's live-heap figures).
 * Not handed to the extraction: full collections run by hand near the heap limit make V8 abort
 * ("ineffective mark-compacts", seen on hyperref.pdf), so the extraction judges the heap as V8 leaves it.
 */
const collect = ((): (() => void) | undefined => {
  if (process.env.STUDY_HELPER_EXTRACT_LIVE_HEAP !== '1') return undefined;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

/** Peak memory of one extraction, sampled at the document's load and after each page. */
function memorySampler(): { sample: () => void; memory: WorkerMemory } {
  const memory: WorkerMemory = { heapStartBytes: 0, heapPeakBytes: 0, rssStartBytes: 0, rssPeakBytes: 0 };
  const sample = (): void => {
    collect?.();
    const heap = getHeapStatistics().used_heap_size;
    const rss = process.memoryUsage.rss();
    if (memory.heapStartBytes === 0) Object.assign(memory, { heapStartBytes: heap, rssStartBytes: rss });
    memory.heapPeakBytes = Math.max(memory.heapPeakBytes, heap);
    memory.rssPeakBytes = Math.max(memory.rssPeakBytes, rss);
  };
  sample();
  return { sample, memory };
}

async function answer(request: ExtractRequestToChild): Promise<ExtractResponse> {
  try {
    const { sample, memory } = memorySampler();
    const bytes = 'path' in request ? new Uint8Array(await readFile(request.path)) : request.bytes;
    let told = false;
    const observe = (_page: number, pagesUsed: number): void => {
      sample();
      if (told || pagesUsed === 0) return;
      told = true;
      process.send?.({ type: 'pages', id: request.id, pagesUsed } satisfies ExtractResponse);
    };
    const result = await extractPdfTextInline(bytes, request.options, observe);
    return { type: 'result', id: request.id, ok: true, result, memory };
  } catch (error) {
    if (error instanceof PdfRejectedError)
      return { type: 'result', id: request.id, ok: false, code: error.code, message: error.message };
    if (isAllocationFailure(error)) {
      allocationFailed = true;
      return { type: 'result', id: request.id, ok: false, code: 'PDF_MEMORY_LIMIT', message: 'An allocation was refused.' };
    }
    return {
      type: 'result',
      id: request.id,
      ok: false,
      code: 'INTERNAL',
      message: error instanceof Error ? error.message : String(error),
    };
  }
}
