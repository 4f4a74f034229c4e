/**
 * The worker_threads entry that runs pdf.js off the main event loop (see extract-pool.ts). It loads
 * pdf.js, says `ready`, then answers one extraction at a time; answers carry the request id.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { lowerThreadPriority } from '../threads/thread-priority.js';
import { PdfRejectedError } from './errors.js';
import { extractPdfTextInline, preloadPdfParse } from './extract-text.js';
import type { ExtractRequest, ExtractResponse, ExtractWorkerData } from './worker-protocol.js';

const port = parentPort;
if (port === null) throw new Error('extract-worker must run as a worker thread');
// A hostile PDF's CPU must come from what the event loop leaves (WORKER_NICE, docs/documents.md).
lowerThreadPriority((workerData as ExtractWorkerData | undefined)?.nice ?? 0);

port.on('message', (request: ExtractRequest) => {
  void answer(request).then((response) => port.postMessage(response));
});
void preloadPdfParse().then(() => port.postMessage({ type: 'ready' } satisfies ExtractResponse));

async function answer(request: ExtractRequest): Promise<ExtractResponse> {
  try {
    const result = await extractPdfTextInline(new Uint8Array(request.bytes), request.options);
    return { type: 'result', id: request.id, ok: true, result };
  } catch (error) {
    if (error instanceof PdfRejectedError)
      return { type: 'result', id: request.id, ok: false, code: error.code, message: error.message };
    return {
      type: 'result',
      id: request.id,
      ok: false,
      code: 'INTERNAL',
      message: error instanceof Error ? error.message : String(error),
    };
  }
}
