/**
 * Jobs through the real service (config → adapters → actor system → Fastify on loopback) and the
 * provider emulator on loopback, reusing the HTTP helper's black-box harness. Nothing is mocked.
 */
import { expect } from 'vitest';
import { createGateway, type Gateway } from '../../src/actors/index.js';
import type { GatewayOptions } from '../../src/actors/gateway.js';
import type { Emulator } from '../../src/emulator/index.js';
import { createAdapters } from '../../src/providers/index.js';
import { request, startHarness } from '../http/blackbox-support.js';
import type { Harness, HttpResult } from '../http/blackbox-support.js';

export { postJson, request } from '../http/blackbox-support.js';
export type { Harness, HttpResult } from '../http/blackbox-support.js';

export const keys = {
  'x-claude-key': 'test-claude-key-0001-jobs',
  'x-gpt-key': 'test-gpt-key-0001-jobs',
} as const;

/**
 * The actor system alone on the emulator, as the registry-level tests drive it: three failures open a
 * breaker for a minute, no retries, fallback along the chain (`options` replace any of these).
 */
export function gatewayOnEmulator(emulator: Emulator, options: Partial<GatewayOptions> = {}): Gateway {
  return createGateway({
    adapters: createAdapters({
      anthropicBaseUrl: emulator.anthropicBaseUrl,
      openaiBaseUrl: emulator.openaiBaseUrl,
      timelygptBaseUrl: emulator.timelygptBaseUrl,
      claudeModel: 'claude-test',
      gptModel: 'gpt-test',
      timelygptModel: 'timely-test',
      timelygptTokenTtlMs: 60_000,
    }),
    breaker: { threshold: 3, recoveryMs: 60_000 },
    retry: { max: 0, backoffMs: [5] },
    policy: 'retry-then-fallback',
    providerTimeoutMs: 10_000,
    ...options,
  });
}

/** The service as the jobs tests want it: 60-page PDFs kept whole, small parts, fast retries. */
export function startJobsHarness(env: NodeJS.ProcessEnv = {}): Promise<Harness> {
  return startHarness({
    MAX_PDF_PAGES: '60',
    JOB_PART_BUDGET_TOKENS: '1200',
    PROVIDER_TIMEOUT_MS: '10000',
    LOG_LEVEL: 'warn',
    ...env,
  });
}

/** `POST /v1/documents` with a PDF; answers the document body. */
export async function uploadPdf(
  harness: Harness,
  pdf: Uint8Array,
  fileName = 'doc.pdf',
): Promise<{ documentId: string; sha256: string; pageCount: number; pagesUsed: number }> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(pdf)], { type: 'application/pdf' }), fileName);
  const result = await request(`${harness.url}/v1/documents`, { method: 'POST', body: form });
  expect(result.status, result.text).toBe(201);
  return result.body as { documentId: string; sha256: string; pageCount: number; pagesUsed: number };
}

export interface SseEvent {
  readonly event: string;
  readonly data: string;
}

export interface SseStream {
  readonly status: number;
  readonly contentType: string | null;
  /** Every event until the server ended the stream. */
  readonly events: Promise<SseEvent[]>;
  /** Every byte received, comments included (for leak checks). */
  readonly raw: () => string;
  /** Resolves with the events so far once `predicate` holds for one of them. */
  waitFor(predicate: (event: SseEvent) => boolean): Promise<SseEvent[]>;
  close(): void;
}

/** Parses `text/event-stream` blocks: `event:` and `data:` lines; comment lines (`:`) are skipped. */
export function parseSseBlock(block: string): SseEvent | undefined {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    if (field === 'data') data.push(value);
  }
  return data.length === 0 ? undefined : { event, data: data.join('\n') };
}

/** Opens `GET /v1/jobs/:id/events` with fetch and reads it with a small parser. */
export async function openEvents(url: string): Promise<SseStream> {
  const controller = new AbortController();
  const response = await fetch(url, { signal: controller.signal, headers: { accept: 'text/event-stream' } });
  const received: SseEvent[] = [];
  let raw = '';
  const waiters: { predicate: (event: SseEvent) => boolean; resolve: (events: SseEvent[]) => void }[] = [];
  const events = (async (): Promise<SseEvent[]> => {
    if (response.body === null) return received;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        const text = decoder.decode(value, { stream: true });
        raw += text;
        buffer += text;
        let end = buffer.indexOf('\n\n');
        while (end >= 0) {
          const parsed = parseSseBlock(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (parsed !== undefined) {
            received.push(parsed);
            for (const waiter of [...waiters]) {
              if (waiter.predicate(parsed)) {
                waiters.splice(waiters.indexOf(waiter), 1);
                waiter.resolve([...received]);
              }
            }
          }
          end = buffer.indexOf('\n\n');
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    }
    return received;
  })();
  return {
    status: response.status,
    contentType: response.headers.get('content-type'),
    events,
    raw: () => raw,
    waitFor(predicate) {
      const seen = received.find(predicate);
      if (seen !== undefined) return Promise.resolve([...received]);
      return new Promise((resolve) => waiters.push({ predicate, resolve }));
    },
    close: () => controller.abort(),
  };
}

export function dataOf<T>(event: SseEvent): T {
  return JSON.parse(event.data) as T;
}

/** GET /v1/jobs/:id until `predicate` holds (the service's own timing; bounded by the test timeout). */
export async function pollJob(
  harness: Harness,
  jobId: string,
  predicate: (body: { status: string; progress: number }) => boolean,
): Promise<HttpResult> {
  for (;;) {
    const result = await request(`${harness.url}/v1/jobs/${jobId}`);
    if (result.status !== 200 || predicate(result.body as { status: string; progress: number }))
      return result;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
