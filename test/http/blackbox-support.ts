/**
 * Black-box harness: the real service (config → adapters → actor system → Fastify on a loopback port)
 * talking over real HTTP to the provider emulator on another loopback port. Nothing is mocked.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { loadConfig } from '../../src/config.js';
import { startEmulator } from '../../src/emulator/index.js';
import type { Emulator, EmulatorOptions, FaultSpec } from '../../src/emulator/index.js';
import { startService } from '../../src/http/service.js';
import type { Service } from '../../src/http/service.js';
import { providerIds } from '../../src/providers/index.js';
import { logCapture } from './support.js';

export const adminToken = 'test-admin-token-0001';

export interface Harness {
  readonly emulator: Emulator;
  readonly service: Service;
  readonly url: string;
  /** Every JSON log line the service wrote. */
  readonly logs: string[];
  fault(spec: FaultSpec): void;
  /** Faults off, every breaker reset. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

export async function startHarness(env: NodeJS.ProcessEnv = {}, emulatorOptions: EmulatorOptions = {}): Promise<Harness> {
  const emulator = await startEmulator({ host: '127.0.0.1', port: 0, ...emulatorOptions });
  const capture = logCapture();
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    ANTHROPIC_BASE_URL: emulator.anthropicBaseUrl,
    OPENAI_BASE_URL: emulator.openaiBaseUrl,
    TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl,
    RETRY_BACKOFF_MS: '5,10',
    PROVIDER_TIMEOUT_MS: '500',
    BREAKER_FAILURE_THRESHOLD: '3',
    ADMIN_TOKEN: adminToken,
    LOG_LEVEL: 'debug',
    ...env,
  });
  const service = await startService(config, { log: { stream: capture.stream } });
  const connections = openConnections(service.app.server);
  const harness: Harness = {
    emulator,
    service,
    url: service.url,
    logs: capture.lines,
    fault: (spec) => emulator.setFault(spec),
    async reset() {
      emulator.resetFaults();
      for (const id of providerIds) {
        const response = await fetch(`${service.url}/v1/providers/${id}/breaker`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ action: 'reset' }),
        });
        if (response.status !== 200) throw new Error(`breaker reset of ${id} answered ${response.status}`);
      }
    },
    async close() {
      // A service that does not close within a while says what it still serves (seen twice in CI as a
      // bare hook timeout), then its connections are cut so the file's other tests still end.
      const watchdog = setTimeout(() => {
        console.error(`harness: the service has not closed after ${closeWarningMs} ms; open connections: ${connections() || 'none'}`);
        service.app.server.closeAllConnections();
      }, closeWarningMs);
      try {
        await service.close();
      } finally {
        clearTimeout(watchdog);
      }
      await emulator.close();
    },
  };
  return harness;
}

const closeWarningMs = 15_000;

/**
 * The server's open connections as the harness saw them (age, requests made on each, the last one and
 * whether its request and response were complete, bytes read), for a close that takes too long.
 */
function openConnections(server: Server): () => string {
  interface Seen {
    readonly since: number;
    requests: number;
    last: string;
  }
  const open = new Map<Socket, Seen>();
  server.on('connection', (socket: Socket) => {
    open.set(socket, { since: performance.now(), requests: 0, last: 'none' });
    socket.once('close', () => open.delete(socket));
  });
  server.on('request', (request, response) => {
    const seen = open.get(request.socket);
    if (seen === undefined) return;
    seen.requests += 1;
    const what = `${request.method} ${request.url?.split('?')[0]}`;
    seen.last = `${what} (answering)`;
    response.once('close', () => {
      seen.last = `${what} (request ${request.complete ? 'complete' : 'incomplete'}, response ${response.writableFinished ? 'finished' : 'cut'})`;
    });
  });
  return () =>
    [...open].map(([socket, seen]) => `[${Math.round(performance.now() - seen.since)} ms old, ${seen.requests} request(s), last ${seen.last}, ${socket.bytesRead} bytes read]`).join(', ');
}

export interface HttpResult {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test bodies are read loosely
  readonly body: any;
}

export async function request(url: string, init: RequestInit = {}): Promise<HttpResult> {
  const response = await fetch(url, init);
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, text, body };
}

export function postJson(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<HttpResult> {
  return request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

/** A small real PDF with a text layer (pdf-lib). */
export async function textPdf(lines: readonly string[]): Promise<Uint8Array> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  const page = pdf.addPage([595, 842]);
  lines.forEach((line, index) => page.drawText(line, { x: 50, y: 780 - index * 18, size: 12, font }));
  return pdf.save();
}

export const studyText =
  'Photosynthesis converts light energy into chemical energy stored in glucose. ' +
  'Chlorophyll in the chloroplasts absorbs mostly blue and red light. ' +
  'The light reactions split water and release oxygen; the Calvin cycle fixes carbon dioxide into sugar. ' +
  'Cellular respiration later releases the stored energy as ATP.';
