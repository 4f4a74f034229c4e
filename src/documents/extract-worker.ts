/**
 * The worker_threads entry that runs pdf.js off the main event loop (see pdf-extractor.ts).
 * Each message is one extraction; answers carry the request id.
 */
import { parentPort } from 'node:worker_threads';
import { PdfRejectedError } from './errors.js';
import { extractPdfTextInline } from './extract-text.js';
import type { ExtractRequest, ExtractResponse } from './worker-protocol.js';

const port = parentPort;
if (port === null) throw new Error('extract-worker must run as a worker thread');

port.on('message', (request: ExtractRequest) => {
  void answer(request).then((response) => port.postMessage(response));
});

async function answer(request: ExtractRequest): Promise<ExtractResponse> {
  try {
    const result = await extractPdfTextInline(new Uint8Array(request.bytes), {
      maxPdfPages: request.maxPdfPages,
    });
    return { id: request.id, ok: true, result };
  } catch (error) {
    if (error instanceof PdfRejectedError)
      return { id: request.id, ok: false, code: error.code, message: error.message };
    return {
      id: request.id,
      ok: false,
      code: 'INTERNAL',
      message: error instanceof Error ? error.message : String(error),
    };
  }
}
