/**
 * The worker_threads entry that counts tokens off the main event loop (see token-counter.ts): it loads
 * gpt-tokenizer (its BPE ranks take tens of MiB and a noticeable
 * time to build: docs/study-material.md), then answers one request at a time; answers carry the request id.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { lowerThreadPriority } from '../threads/thread-priority.js';
import { estimateTokens, splitTextParts } from './split.js';
import type { TokenRequest, TokenResponse, TokenWorkerData } from './token-protocol.js';

const port = parentPort;
if (port === null) throw new Error('token-worker must run as a worker thread');
// A long hostile text's counting must come from what the event loop leaves (WORKER_NICE).
lowerThreadPriority((workerData as TokenWorkerData | undefined)?.nice ?? 0);

port.on('message', (request: TokenRequest) => port.postMessage(answer(request)));

function answer(request: TokenRequest): TokenResponse {
  try {
    if (request.kind === 'count') return { id: request.id, ok: true, tokens: estimateTokens(request.text) };
    return { id: request.id, ok: true, parts: splitTextParts(request.text, { budgetTokens: request.budgetTokens }) };
  } catch (error) {
    return { id: request.id, ok: false, message: error instanceof Error ? error.message : String(error) };
  }
}
