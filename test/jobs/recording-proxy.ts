/**
 * A recording proxy in front of the emulator's Anthropic endpoint, the restart and lease tests' own
 * oracle of what an instance asked a provider and was answered (test/jobs/restart.test.ts,
 * test/fleet/job-lease.test.ts). `hold(body, index)` true leaves the call unanswered (the instance waits
 * on it, as on a slow provider); otherwise it is answered after `delayMs`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Emulator } from '../../src/emulator/index.js';

/** One provider call the proxy saw: its request body and whether the caller got the emulator's 200. */
interface Seen {
  readonly body: string;
  answered: boolean;
}

export interface RecordingProxy {
  readonly url: string;
  readonly seen: Seen[];
  /** `index` counts the calls this proxy saw, from 0. */
  hold: (body: string, index: number) => boolean;
  delayMs: number;
  close(): Promise<void>;
}

/** The headers passed on: the caller's, without those that describe its own connection. */
function forwardedHeaders(request: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === 'string' && name !== 'host' && name !== 'content-length' && name !== 'connection') headers[name] = value;
  }
  return headers;
}

export async function startRecordingProxy(emulator: Emulator): Promise<RecordingProxy> {
  const held = new Set<ServerResponse>();
  const proxy: RecordingProxy = {
    url: '',
    seen: [],
    hold: () => false,
    delayMs: 0,
    close: async () => undefined,
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const seen: Seen = { body, answered: false };
      proxy.seen.push(seen);
      if (proxy.hold(body, proxy.seen.length - 1)) {
        held.add(res);
        return;
      }
      void (async () => {
        if (proxy.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, proxy.delayMs));
        const upstream = await fetch(`${emulator.anthropicBaseUrl}${req.url ?? ''}`, {
          method: req.method ?? 'POST',
          headers: forwardedHeaders(req),
          body,
        });
        const text = await upstream.text();
        res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
        res.end(text, () => {
          seen.answered = upstream.status === 200;
        });
      })().catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return Object.assign(proxy, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

/** What a step is: the request body without what may differ between two processes' SDK calls. */
export function stepOf(body: string): string {
  const parsed = JSON.parse(body) as { system?: unknown; messages?: unknown };
  return JSON.stringify({ system: parsed.system, messages: parsed.messages });
}
