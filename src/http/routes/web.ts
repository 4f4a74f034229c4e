/**
 * The web page and what only the page needs (docs/web.md):
 * - `GET /` and `GET /web/<file>`: the page's files from src/web/public (a fixed list, nothing else from disk);
 * - `GET /web/machines.json`: every generated machine diagram (docs/machines/*.mmd) as a state tree and a
 *   laid-out drawing (src/web/machine-drawings.ts), which the page renders as SVG;
 * - `GET /v1/providers/events`: Server-Sent Events with every provider's breaker, fed by
 *   `gateway.onBreakerTransition` (event `transition`, followed by a `snapshot`) and a periodic `snapshot`;
 * - `GET /demo/config` and, in demo mode only, `POST|DELETE /demo/faults`: the page's fault panel, proxied
 *   to the emulator's control endpoint so the page talks to this service alone.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Gateway } from '../../actors/types.js';
import { providerIds } from '../../providers/index.js';
import type { ProviderId } from '../../providers/index.js';
import { publicFiles, webPaths } from '../../web/assets.js';
import type { WebPaths } from '../../web/assets.js';
import { machineDrawings } from '../../web/machine-drawings.js';
import { ApiError } from '../errors.js';
import type { Admission } from '../admission.js';
import { defaultSseMaxBufferBytes, enterStream, openEventStream, renderEvent, type SseWriter } from '../sse.js';
import { breakerStateSchema, errorBodySchema, providerIdSchema, providerStatusSchema } from '../schemas.js';
import { eventStreamResponse } from '../openapi.js';

export interface WebRoutesOptions {
  readonly gateway: Gateway;
  /** Demo mode: the emulator the fault panel drives. Absent: no fault routes, no prefilled keys. */
  readonly demo?: { readonly emulatorUrl: string };
  /** How often the providers stream repeats the full snapshot (default 1000 ms). */
  readonly snapshotIntervalMs?: number;
  /** Most bytes queued for one stream's client before it is dropped (64 KiB in the service). */
  readonly sseMaxBufferBytes?: number;
  /** The instance's event-stream slots, shared with the job streams (SSE_MAX_STREAMS[_PER_CLIENT]); unbounded when absent. */
  readonly streams?: Admission;
  /** Where the page's files are; found from the project root when absent. */
  readonly paths?: WebPaths;
}

/** Obviously fake keys the emulator accepts; the page is prefilled with them in demo mode. */
const demoKeys: Readonly<Record<ProviderId, string>> = {
  claude: 'demo-claude-key-0001',
  gpt: 'demo-gpt-key-0001',
  timelygpt: 'demo-timelygpt-key-0001',
};

/** The same keys with the emulator's 429 prefix: "rate-limit this key" in the fault panel. */
const demoRateLimitedKeys: Readonly<Record<ProviderId, string>> = {
  claude: 'emu-ratelimit-demo-claude-0001',
  gpt: 'emu-ratelimit-demo-gpt-0001',
  timelygpt: 'emu-ratelimit-demo-timelygpt-0001',
};

/** The emulator faults the panel may set (docs/emulator.md). */
const demoFaults = ['http500', 'http503', 'overloaded', 'slow', 'hang', 'reset', 'garbage', 'invalidOutput', 'truncated'] as const;

const securityHeaders: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

const faultBodySchema = z.strictObject({
  provider: providerIdSchema,
  fault: z.enum(demoFaults).describe('An emulator fault (docs/emulator.md).'),
  count: z.int().min(1).max(1000).optional().describe('For the next n calls; until reset when absent.'),
  ms: z.int().min(1).max(120_000).optional().describe('Delay of the `slow` fault.'),
});

const demoConfigSchema = z.object({
  demo: z.boolean(),
  keys: z.record(z.string(), z.string()).optional(),
  rateLimitedKeys: z.record(z.string(), z.string()).optional(),
  faults: z.array(z.string()).optional(),
});


export const webRoutes: FastifyPluginAsyncZod<WebRoutesOptions> = async (app, options) => {
  const { gateway } = options;
  const paths = options.paths ?? webPaths();
  const snapshotIntervalMs = options.snapshotIntervalMs ?? 1000;

  async function sendFile(name: string, reply: FastifyReply): Promise<unknown> {
    const type = publicFiles.get(name);
    if (type === undefined) throw new ApiError('NOT_FOUND', `No route GET /web/${name}.`);
    const body = await readFile(join(paths.publicDirectory, name));
    return reply
      .headers(securityHeaders)
      .header('cache-control', 'no-cache')
      .type(type)
      .send(body);
  }

  app.get('/', { schema: { hide: true } }, async (_request, reply) => sendFile('index.html', reply));
  app.get('/favicon.ico', { schema: { hide: true } }, async (_request, reply) => sendFile('favicon.svg', reply));

  const drawings = machineDrawings(paths.machinesDirectory);
  // The demo's page is its point: lay the diagrams out as soon as the service is up (off the event loop,
  // not delaying the start), so the first visit does not wait for them. Elsewhere the first visit does.
  if (options.demo !== undefined) {
    app.addHook('onReady', async () => {
      drawings().catch((error: unknown) => app.log.warn({ err: error }, 'machine diagrams: layout failed'));
    });
  }
  app.get('/web/machines.json', { schema: { hide: true } }, async (_request, reply) =>
    reply.header('cache-control', 'no-cache').send({ machines: await drawings() }),
  );

  app.get(
    '/web/:file',
    { schema: { hide: true, params: z.object({ file: z.string() }) } },
    async (request, reply) => sendFile(request.params.file, reply),
  );

  // ------------------------------------------------------------------ live breakers over SSE
  // Every stream gets the same events: each is rendered once and written to all of them, and one timer
  // repeats the snapshot for all, so a thousand streams cost a thousand writes a second, not a thousand
  // snapshots of the gateway, JSON texts and timers.
  const streams = new Map<SseWriter, () => void>();
  const snapshotText = (): string => renderEvent('snapshot', { providers: gateway.providers(), at: Date.now() });
  const broadcast = (text: string): void => {
    for (const [sse, close] of streams) if (!sse.raw(text)) close();
  };
  let ticker: NodeJS.Timeout | undefined;
  let unsubscribe: (() => void) | undefined;
  const listen = (): void => {
    if (ticker !== undefined) return;
    ticker = setInterval(() => broadcast(snapshotText()), snapshotIntervalMs);
    unsubscribe = gateway.onBreakerTransition((transition) => {
      broadcast(renderEvent('transition', transition));
      broadcast(snapshotText());
    });
  };
  const quietIfAlone = (): void => {
    if (streams.size > 0 || ticker === undefined) return;
    clearInterval(ticker);
    ticker = undefined;
    unsubscribe?.();
    unsubscribe = undefined;
  };
  app.addHook('preClose', async () => {
    for (const close of [...streams.values()]) close();
  });

  app.get(
    '/v1/providers/events',
    {
      schema: {
        tags: ['providers'],
        summary: 'Live breaker state of every provider as Server-Sent Events.',
        description:
          'text/event-stream. `snapshot` ({"providers":[…as GET /v1/providers…],"at"}) at once and every second; ' +
          '`transition` ({"provider","from","to","at"}) when a breaker changes state, followed by a fresh `snapshot`. ' +
          'A client (remote address) holds at most SSE_MAX_STREAMS_PER_CLIENT event streams at once (429 TOO_MANY_REQUESTS), ' +
          'the instance SSE_MAX_STREAMS (503 SERVER_BUSY).',
        response: {
          200: eventStreamResponse('Every breaker, live.', {
            snapshot: z
              .object({ providers: z.array(providerStatusSchema), at: z.number().describe('ms since the epoch') })
              .describe('Every provider as GET /v1/providers answers: at once, every second, and after each transition.'),
            transition: z
              .object({ provider: providerIdSchema, from: breakerStateSchema, to: breakerStateSchema, at: z.number() })
              .describe('A breaker changed state.'),
          }),
          429: errorBodySchema,
          503: errorBodySchema,
        },
      },
    },
    async (request, reply) => {
      // Refused before the stream starts, as a JSON error with Retry-After.
      const release = enterStream(options.streams, request.ip);
      // A client that does not read is dropped once its buffer is full (src/http/sse.ts).
      const sse = openEventStream(reply, options.sseMaxBufferBytes ?? defaultSseMaxBufferBytes, () =>
        request.log.info('providers stream: client not reading, dropped'),
      );
      const response = reply.raw;
      let closed = false;
      const close = (): void => {
        if (closed) return;
        closed = true;
        streams.delete(sse);
        release();
        quietIfAlone();
        if (!response.writableEnded) response.end();
      };
      request.raw.on('close', close);
      response.on('close', close);
      if (sse.raw('retry: 2000\n\n') && sse.raw(snapshotText())) {
        streams.set(sse, close);
        listen();
      } else {
        close();
      }
    },
  );

  // ------------------------------------------------------------------ demo: prefilled keys and the fault panel
  const demo = options.demo;
  app.get(
    '/demo/config',
    {
      schema: {
        hide: true,
        response: { 200: demoConfigSchema },
      },
    },
    async () =>
      demo === undefined
        ? { demo: false }
        : { demo: true, keys: { ...demoKeys }, rateLimitedKeys: { ...demoRateLimitedKeys }, faults: [...demoFaults] },
  );

  if (demo === undefined) return;
  const controlUrl = `${demo.emulatorUrl}/_emulator/faults`;

  async function forward(method: 'POST' | 'DELETE', body?: unknown): Promise<{ status: number; json: unknown }> {
    let answer: Response;
    try {
      answer = await fetch(controlUrl, {
        method,
        ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(5000),
      });
    } catch {
      throw new ApiError('INTERNAL_ERROR', 'The emulator did not answer the fault request.');
    }
    const text = await answer.text();
    let json: unknown;
    try {
      json = text === '' ? {} : JSON.parse(text);
    } catch {
      json = { message: text.slice(0, 200) };
    }
    return { status: answer.status, json };
  }

  app.post(
    '/demo/faults',
    {
      schema: {
        hide: true,
        body: faultBodySchema,
        response: { 200: z.object({ ok: z.literal(true), emulator: z.unknown() }), 400: errorBodySchema },
      },
    },
    async (request, reply) => {
      const { status, json } = await forward('POST', request.body);
      if (status >= 400) throw new ApiError('INVALID_REQUEST', `The emulator refused the fault (HTTP ${status}).`);
      request.log.info({ provider: request.body.provider, fault: request.body.fault }, 'demo fault set');
      return reply.code(200).send({ ok: true, emulator: json });
    },
  );

  app.delete('/demo/faults', { schema: { hide: true } }, async (request, reply) => {
    const { status } = await forward('DELETE');
    if (status >= 400) throw new ApiError('INTERNAL_ERROR', `The emulator refused the reset (HTTP ${status}).`);
    request.log.info('demo faults reset');
    return reply.code(200).send({ ok: true, providers: [...providerIds] });
  });
};
