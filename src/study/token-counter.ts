/**
 * Token counting for the request path, off the main event loop: one worker thread
 * (token-worker.ts) holds gpt-tokenizer and does every count and split that the cheap bound cannot settle.
 * The main thread never loads the tokenizer, so a process that only ever sees short texts never pays for
 * its memory (study-material.md), and a long or hostile text (100 000 characters without a space) costs
 * other requests
 * nothing but a message. The worker starts on the first text that needs it and ends after `idleMs`
 * without work, handing its memory back; requests wait in order (a split is linear in the text, and the
 * text is bounded by MAX_TEXT_CHARS). A worker that dies fails the requests it held (an internal error)
 * and a new one starts with the next request.
 */
import type { Worker } from 'node:worker_threads';
import { startWorker, workerEntry, type WorkerEntry } from '../threads/worker-entry.js';
import { splitWithoutCounting, type TextPart } from './token-count.js';
import type { TokenRequest, TokenResponse, TokenWorkerData } from './token-protocol.js';

export interface TokenCounter {
  /** The text in parts of at most `budgetTokens` tokens (the same parts as `splitText`), with their counts. */
  split(text: string, budgetTokens: number): Promise<TextPart[]>;
  /** Tokens in `text` (the same count as `estimateTokens`). */
  count(text: string): Promise<number>;
  /** Whether the worker runs now (tests, docs). */
  readonly running: boolean;
  /** Ends the worker; requests still waiting fail. A later request starts a new one. */
  close(): Promise<void>;
}

export interface TokenCounterOptions {
  /** The worker ends after this long without a request (default 10 000 ms). */
  readonly idleMs?: number;
  readonly entry?: WorkerEntry;
  /** The worker thread's nice value (0–19; default: the process's, set from WORKER_NICE by the service, else 0). */
  readonly nice?: number;
}

/**
 * Default of `TokenCounterOptions.idleMs`. The worker holds gpt-tokenizer's ranks (tens of MiB); starting it
 * again costs a few hundred milliseconds at the workers' low priority (WORKER_NICE). 10 s covers the
 * counts of one job's stages, and a burst of long texts does not leave its memory behind for a minute.
 */
const tokenWorkerIdleMs = 10_000;

/**
 * The worker's heap bounds. Unbounded, V8 sizes a worker's heap for the machine (two 64 MiB semi-spaces on
 * Node 24, an old generation it lets grow before collecting), and splitting texts without a space (each one
 * long word for the tokenizer's merges) took the process from ~80 to ~400–500 MiB RSS, most of it kept after
 * the worker ended. With these bounds the same work peaks at ~190 MiB with no loss of speed; a 3.6 MB text
 * and four 200 000-character words at once still split well within them (docs/operations.md "Memory").
 */
const tokenWorkerLimits = { maxYoungGenerationSizeMb: 8, maxOldGenerationSizeMb: 256 };

interface Waiting {
  readonly resolve: (response: TokenResponse) => void;
  readonly reject: (error: Error) => void;
}

type Request = { readonly kind: 'count'; readonly text: string } | { readonly kind: 'split'; readonly text: string; readonly budgetTokens: number };

export function createTokenCounter(options: TokenCounterOptions = {}): TokenCounter {
  const idleMs = options.idleMs ?? tokenWorkerIdleMs;
  const waiting = new Map<number, Waiting>();
  let worker: Worker | undefined;
  let idleTimer: NodeJS.Timeout | undefined;
  let nextId = 1;

  const failAll = (error: Error): void => {
    for (const entry of waiting.values()) entry.reject(error);
    waiting.clear();
  };

  const stop = (): Promise<number> | undefined => {
    clearTimeout(idleTimer);
    idleTimer = undefined;
    const ending = worker;
    worker = undefined;
    return ending?.terminate();
  };

  /** While requests wait, the worker keeps the process alive; idle, it does not, and it ends after `idleMs`. */
  const settleIdle = (): void => {
    if (worker === undefined || waiting.size > 0) return;
    worker.unref();
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => void stop(), idleMs);
    idleTimer.unref();
  };

  const ensureWorker = (): Worker => {
    clearTimeout(idleTimer);
    idleTimer = undefined;
    if (worker !== undefined) return worker;
    const workerData: TokenWorkerData = { nice: options.nice ?? tokenWorkerNice };
    const started = startWorker(options.entry ?? workerEntry('token-worker', import.meta.url), {
      workerData,
      resourceLimits: tokenWorkerLimits,
    });
    started.on('message', (response: TokenResponse) => {
      const entry = waiting.get(response.id);
      if (entry === undefined) return;
      waiting.delete(response.id);
      entry.resolve(response);
      settleIdle();
    });
    const onDeath = (error: Error): void => {
      if (worker !== started) return;
      worker = undefined;
      failAll(new Error(`The token-count worker failed: ${error.message}`));
    };
    started.on('error', onDeath);
    started.on('exit', (code) => onDeath(new Error(`it exited (code ${code})`)));
    worker = started;
    return started;
  };

  const ask = (request: Request): Promise<TokenResponse> =>
    new Promise<TokenResponse>((resolve, reject) => {
      const id = nextId;
      nextId += 1;
      const running = ensureWorker();
      running.ref();
      waiting.set(id, { resolve, reject });
      running.postMessage({ ...request, id } satisfies TokenRequest);
    });

  return {
    async split(text, budgetTokens) {
      // The cheap bound settles most texts on the spot: no worker, no tokenizer.
      const settled = splitWithoutCounting(text, budgetTokens);
      if (settled !== undefined) return settled;
      const response = await ask({ kind: 'split', text, budgetTokens });
      if (!response.ok) throw new Error(`Splitting the text failed: ${response.message}`);
      if (!('parts' in response)) throw new Error('The token-count worker answered a split with a count');
      return response.parts;
    },
    async count(text) {
      if (text === '') return 0;
      const response = await ask({ kind: 'count', text });
      if (!response.ok) throw new Error(`Counting tokens failed: ${response.message}`);
      if (!('tokens' in response)) throw new Error('The token-count worker answered a count with parts');
      return response.tokens;
    },
    get running() {
      return worker !== undefined;
    },
    async close() {
      failAll(new Error('The token counter was closed.'));
      await stop();
    },
  };
}

let tokenWorkerNice = 0;

/**
 * WORKER_NICE for the token counters of this process: their next worker starts at this nice value (the
 * service sets it at start-up; 0, unchanged, until then).
 */
export function setTokenWorkerNice(nice: number): void {
  tokenWorkerNice = nice;
}

/** The process's token counter: its worker starts on the first text the cheap bound cannot settle. */
export const tokenCounter: TokenCounter = createTokenCounter();
