/**
 * The worker_threads entry that counts tokens off the main event loop (see token-counter.ts): it loads
 * gpt-tokenizer (its BPE ranks are ~20 MiB of heap, ~55 MiB of RSS, and take a few hundred
 * milliseconds to build), then answers one request at a time; answers carry the request id.
 */
import { parentPort } from 'node:worker_threads';
import { estimateTokens, splitTextParts } from './split.js';
import type { TokenRequest, TokenResponse } from './token-protocol.js';

const port = parentPort;
if (port === null) throw new Error('token-worker must run as a worker thread');

port.on('message', (request: TokenRequest) => port.postMessage(answer(request)));

function answer(request: TokenRequest): TokenResponse {
  try {
    if (request.kind === 'count') return { id: request.id, ok: true, tokens: estimateTokens(request.text) };
    return { id: request.id, ok: true, parts: splitTextParts(request.text, { budgetTokens: request.budgetTokens }) };
  } catch (error) {
    return { id: request.id, ok: false, message: error instanceof Error ? error.message : String(error) };
  }
}
