/**
 * The provider emulator: one node:http server speaking Anthropic Messages, OpenAI Chat Completions
 * and TimelyGPT, with a control endpoint for faults and call counters (docs/emulator.md).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleAnthropicMessages } from './anthropic.js';
import {
  FaultBoard,
  isEmulatedProvider,
  isFaultName,
  isStreamErrorKind,
  type EmulatorStats,
  type FaultSpec,
} from './faults.js';
import type { GenerationOptions } from './generation.js';
import { parseJsonObject, readBody, send } from './http-io.js';
import { handleOpenaiChatCompletions } from './openai.js';
import { handleTimelyAuthenticate, handleTimelyCompletion, TokenIssuer } from './timelygpt.js';

export interface EmulatorOptions {
  /** 0 (default) picks a free port. */
  readonly port?: number;
  readonly host?: string;
  /** Delay of the `slow` fault when it names no `ms` (default 2000). */
  readonly slowMs?: number;
  /** Input (system + messages) longer than this answers the provider's context-length error (default 1,000,000 chars). */
  readonly maxInputChars?: number;
  /** Speed of streamed answers in tokens (4 characters) per second; 0 (the default) sends every token at once. */
  readonly tokensPerSecond?: number;
  /** Pieces a streamed answer is cut into, of near-equal length; 0 (the default) cuts one per token. */
  readonly streamPieces?: number;
}

export interface Emulator {
  readonly url: string;
  /** Anthropic SDK `baseURL` (the SDK appends `/v1/messages`). */
  readonly anthropicBaseUrl: string;
  /** OpenAI SDK `baseURL` (includes `/v1`). */
  readonly openaiBaseUrl: string;
  /** TimelyGPT base: `${base}/sdk-auth/authenticate`, `${base}/llm-completion`. */
  readonly timelygptBaseUrl: string;
  /** Same as `POST /_emulator/faults`. */
  setFault(spec: FaultSpec): void;
  /** Same as `DELETE /_emulator/faults`. */
  resetFaults(): void;
  /** Same as `POST /_emulator/speed`: tokens per second of streamed answers (0: all at once). */
  setSpeed(tokensPerSecond: number): void;
  /** Same as `POST /_emulator/pieces`: pieces per streamed answer (0: one per token). */
  setStreamPieces(pieces: number): void;
  /** Same as `GET /_emulator/stats`. */
  stats(): EmulatorStats;
  resetStats(): void;
  /** The salted fingerprint the counters use for a key (for tests that look a key's count up). */
  fingerprint(key: string): string;
  close(): Promise<void>;
}

const timelyBase = '/timelygpt/api/v2/chat';

/** Reads a control-endpoint fault body; a string says what is wrong with it. */
function parseFaultSpec(body: Record<string, unknown> | undefined): FaultSpec | string {
  if (!body) return 'body must be a JSON object';
  const { provider, fault, count, ms, status, headers, after, error } = body;
  if (!isEmulatedProvider(provider)) return 'provider must be claude, gpt or timelygpt';
  if (!isFaultName(fault)) return `unknown fault ${JSON.stringify(fault)}`;
  if (count !== undefined && (typeof count !== 'number' || !Number.isInteger(count) || count < 1))
    return 'count must be a positive integer';
  if (ms !== undefined && (typeof ms !== 'number' || ms < 0)) return 'ms must be a non-negative number';
  if (status !== undefined && (typeof status !== 'number' || status < 100 || status > 599))
    return 'status must be an HTTP status';
  if (after !== undefined && (typeof after !== 'number' || !Number.isInteger(after) || after < 0))
    return 'after must be a non-negative integer';
  if (error !== undefined && !isStreamErrorKind(error)) return `unknown error ${JSON.stringify(error)}`;
  const headerRecord =
    typeof headers === 'object' && headers !== null
      ? Object.fromEntries(
          Object.entries(headers).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
        )
      : undefined;
  return {
    provider,
    fault,
    ...(count === undefined ? {} : { count }),
    ...(ms === undefined ? {} : { ms }),
    ...(status === undefined ? {} : { status }),
    ...(after === undefined ? {} : { after }),
    ...(error === undefined ? {} : { error }),
    ...('body' in body ? { body: body['body'] } : {}),
    ...(headerRecord ? { headers: headerRecord } : {}),
  };
}

function isSpeed(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= 1_000_000;
}

function speedOrThrow(value: number): number {
  if (!isSpeed(value)) throw new RangeError('tokensPerSecond must be a number from 0 to 1000000');
  return value;
}

function isPieceCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 1_000_000;
}

function piecesOrThrow(value: number): number {
  if (!isPieceCount(value)) throw new RangeError('pieces must be a whole number from 0 to 1000000');
  return value;
}

export async function startEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  const board = new FaultBoard();
  const issuer = new TokenIssuer();
  let sequence = 0;
  const generation: GenerationOptions = {
    slowMs: options.slowMs ?? 2000,
    maxInputChars: options.maxInputChars ?? 1_000_000,
    pending: new Set(),
    tokensPerSecond: speedOrThrow(options.tokensPerSecond ?? 0),
    streamPieces: piecesOrThrow(options.streamPieces ?? 0),
    nextSequence: () => ++sequence,
  };

  async function control(request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
    if (path === '/_emulator/faults' && request.method === 'POST') {
      const spec = parseFaultSpec(parseJsonObject(await readBody(request)));
      if (typeof spec === 'string') return send(response, { status: 400, body: { error: spec } });
      board.set(spec);
      return send(response, { status: 200, body: { ok: true, fault: spec } });
    }
    if (path === '/_emulator/faults' && request.method === 'DELETE') {
      board.reset();
      return send(response, { status: 200, body: { ok: true } });
    }
    if (path === '/_emulator/speed' && request.method === 'POST') {
      const tokensPerSecond = parseJsonObject(await readBody(request))?.['tokensPerSecond'];
      if (!isSpeed(tokensPerSecond))
        return send(response, {
          status: 400,
          body: { error: 'tokensPerSecond must be a number from 0 to 1000000' },
        });
      generation.tokensPerSecond = tokensPerSecond;
      return send(response, { status: 200, body: { ok: true, tokensPerSecond } });
    }
    if (path === '/_emulator/pieces' && request.method === 'POST') {
      const pieces = parseJsonObject(await readBody(request))?.['pieces'];
      if (!isPieceCount(pieces))
        return send(response, { status: 400, body: { error: 'pieces must be a whole number from 0 to 1000000' } });
      generation.streamPieces = pieces;
      return send(response, { status: 200, body: { ok: true, pieces } });
    }
    if (path === '/_emulator/stats' && request.method === 'GET')
      return send(response, { status: 200, body: board.stats() });
    if (path === '/_emulator/stats' && request.method === 'DELETE') {
      board.resetStats();
      return send(response, { status: 200, body: { ok: true } });
    }
    return send(response, { status: 404, body: { error: 'unknown control route' } });
  }

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = new URL(request.url ?? '/', 'http://emulator').pathname;
    const method = request.method ?? 'GET';
    if (path.startsWith('/_emulator/')) return control(request, response, path);
    if (method === 'POST' && path === '/anthropic/v1/messages')
      return handleAnthropicMessages(request, response, board, generation);
    if (method === 'POST' && path === '/openai/v1/chat/completions')
      return handleOpenaiChatCompletions(request, response, board, generation);
    if (method === 'GET' && path === `${timelyBase}/sdk-auth/authenticate`)
      return handleTimelyAuthenticate(request, response, board, issuer);
    if (method === 'POST' && path === `${timelyBase}/llm-completion`)
      return handleTimelyCompletion(request, response, board, issuer, generation);
    return send(response, { status: 404, body: { error: `no route ${method} ${path}` } });
  }

  const server = createServer((request, response) => {
    route(request, response).catch((error: unknown) => {
      if (!response.headersSent)
        send(response, {
          status: 500,
          body: { error: error instanceof Error ? error.message : 'emulator error' },
        });
      else response.destroy();
    });
  });
  // Requests can legitimately hang (faults); never let the server time them out itself.
  server.requestTimeout = 0;
  // Long keep-alive: the SDKs reuse connections as they would against the real APIs (a short one made
  // every call open a new TCP connection, which cost more than everything the benchmarks measure).
  server.keepAliveTimeout = 65_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;

  return {
    url,
    anthropicBaseUrl: `${url}/anthropic`,
    openaiBaseUrl: `${url}/openai/v1`,
    timelygptBaseUrl: `${url}${timelyBase}`,
    setFault: (spec) => board.set(spec),
    setSpeed: (tokensPerSecond) => {
      generation.tokensPerSecond = speedOrThrow(tokensPerSecond);
    },
    setStreamPieces: (pieces) => {
      generation.streamPieces = piecesOrThrow(pieces);
    },
    resetFaults: () => board.reset(),
    stats: () => board.stats(),
    resetStats: () => board.resetStats(),
    fingerprint: (key) => board.fingerprint(key),
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const timer of generation.pending) clearTimeout(timer);
        generation.pending.clear();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
