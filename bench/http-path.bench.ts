/**
 * HTTP path: where `POST /v1/generate`'s CPU goes besides the SDK call, in one process and
 * without sockets, so a change of a few tens of µs shows through the noise of a shared machine (the
 * overhead bench's figures move by hundreds of µs from run to run at a load of 10).
 *
 * Three Fastify apps in this process, driven through `app.inject()` with 50 requests in flight; the
 * emulator answers at once from its own process (its CPU is not counted):
 * - **A**: Fastify + the `openai` SDK called directly (the overhead bench's A: same prompt and json_schema,
 *   the content parsed as JSON), on the SDK's default `fetch`;
 * - **A′**: A with the SDK's `fetch` option set to the service's upstream transport
 *   (src/providers/upstream-fetch.ts), so that what the service adds is measured over the same transport;
 * - **HTTP path**: the service's own app (`buildApp`: routes, hooks, zod, admission, the study layer,
 *   the answer's validation and redaction, metrics) over a gateway that calls the gpt adapter directly,
 *   without the actors: everything the service does outside src/machines and src/actors;
 * - **B**: the whole service (`startService`), as `npm start` runs it.
 * CPU is `process.cpuUsage()` of this process per request (light-my-request's own work is in all three);
 * variants alternate over rounds, medians of per-round differences against A.
 */
import Fastify from 'fastify';
import OpenAI from 'openai';
import type { Attempt, CallRecord, Gateway, GenerateInput, GenerateOutcome } from '../src/actors/types.js';
import { loadConfig } from '../src/config.js';
import { createMemoryDocumentStore } from '../src/documents/index.js';
import { buildApp } from '../src/http/app.js';
import { adaptersFromConfig, startService } from '../src/http/service.js';
import { upstreamFetch } from '../src/providers/upstream-fetch.js';
import { buildNotesRequest } from '../src/study/prompts.js';
import { loadAverage, median, round, writeBenchSection } from './report.js';
import { benchText, gptKey, serviceEnv, startEmulatorChild } from './support/index.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const requestsPerRun = Number(process.env.BENCH_REQUESTS ?? 2000);
const inFlight = 50;

/** The actors left out: the chain's first provider called at once, its answer validated, the call counted for the metrics. */
function directGateway(adapters: ReturnType<typeof adaptersFromConfig>): Gateway {
  const callListeners = new Set<(record: CallRecord) => void>();
  const unused = (): never => {
    throw new Error('not used by the http-path bench');
  };
  return {
    async generate<T>(input: GenerateInput<T>): Promise<GenerateOutcome<T>> {
      const link = input.chain[0];
      if (link === undefined) throw new Error('empty chain');
      const startedAt = Date.now();
      const answer = await adapters[link.provider].generate(
        input.request,
        link.apiKey,
        input.signal ?? new AbortController().signal,
      );
      const verdict = input.validate(answer);
      if (!verdict.ok) throw new Error(`invalid answer: ${verdict.errors.join('; ')}`);
      const durationMs = Date.now() - startedAt;
      const record: CallRecord = {
        provider: link.provider,
        outcome: 'succeeded',
        durationMs,
        usage: answer.usage,
      };
      callListeners.forEach((listener) => listener(record));
      const attempt: Attempt = {
        provider: link.provider,
        retry: 0,
        model: answer.model,
        durationMs,
        outcome: 'succeeded',
        countedByBreaker: false,
      };
      return {
        status: 'succeeded',
        value: verdict.value,
        provider: link.provider,
        model: answer.model,
        fallback: false,
        attempts: [attempt],
        usage: answer.usage,
      };
    },
    providers: () => [],
    provider: unused,
    keyHealth: unused,
    controlBreaker: unused,
    onBreakerTransition: () => () => false,
    onCall(listener) {
      callListeners.add(listener);
      return () => callListeners.delete(listener);
    },
    onFallback: () => () => false,
    onCost: () => () => false,
    stop: async () => undefined,
  };
}

async function main(): Promise<void> {
  const emulator = await startEmulatorChild();
  const env = serviceEnv(emulator, {
    PROVIDERS_DEFAULT_ORDER: 'gpt',
    MAX_INFLIGHT_GENERATIONS: '256',
    MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '256',
  });
  const config = loadConfig(env);
  const service = await startService(config, { log: { level: 'silent' } });
  const adapters = adaptersFromConfig(config);
  const httpPath = await buildApp({
    config,
    gateway: directGateway(adapters),
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    log: { level: 'silent' },
    processMetrics: false,
  });
  await httpPath.ready();

  /** Fastify + the `openai` SDK called directly, on the given `fetch` (the SDK's default when absent). */
  async function directApp(fetch?: typeof upstreamFetch) {
    const app = Fastify({ logger: false });
    const client = new OpenAI({
      apiKey: gptKey,
      baseURL: config.baseUrls.gpt,
      maxRetries: 0,
      organization: null,
      project: null,
      ...(fetch === undefined ? {} : { fetch }),
    });
    app.post<{ Body: { text: string } }>('/direct', async (request) => {
      const prompt = buildNotesRequest({ text: request.body.text, lang: 'en' });
      const completion = await client.chat.completions.create({
        model: config.models.gpt,
        max_completion_tokens: prompt.maxOutputTokens,
        messages: [
          { role: 'system', content: prompt.system },
          ...prompt.messages.map((message) => ({ role: message.role, content: message.content })),
        ],
        response_format: {
          type: 'json_schema',
          json_schema: { name: prompt.task, schema: { ...prompt.jsonSchema }, strict: false },
        },
      });
      return { task: 'notes', result: JSON.parse(completion.choices[0]?.message.content ?? '') as unknown };
    });
    await app.ready();
    return app;
  }
  const sdk = await directApp();
  const sdkTransport = await directApp(upstreamFetch);

  const serviceBody = JSON.stringify({
    task: 'notes',
    text: benchText,
    providers: ['gpt'],
    options: { lang: 'en' },
  });
  const serviceHeaders = { 'content-type': 'application/json', 'x-gpt-key': gptKey };
  const variants = [
    {
      key: 'sdk',
      label: 'A: Fastify + openai SDK direct',
      send: () =>
        sdk.inject({
          method: 'POST',
          url: '/direct',
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify({ text: benchText }),
        }),
    },
    {
      key: 'transport',
      label: "A′: A on the service's transport",
      send: () =>
        sdkTransport.inject({
          method: 'POST',
          url: '/direct',
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify({ text: benchText }),
        }),
    },
    {
      key: 'http',
      label: 'HTTP path: the service app, gateway without actors',
      send: () =>
        httpPath.inject({
          method: 'POST',
          url: '/v1/generate',
          headers: serviceHeaders,
          payload: serviceBody,
        }),
    },
    {
      key: 'service',
      label: 'B: the whole service',
      send: () =>
        service.app.inject({
          method: 'POST',
          url: '/v1/generate',
          headers: serviceHeaders,
          payload: serviceBody,
        }),
    },
  ] as const;

  /** CPU µs per request of `requests` requests, `inFlight` at a time. */
  async function measure(
    send: () => Promise<{ statusCode: number; body: string }>,
    requests: number,
  ): Promise<number> {
    let started = 0;
    const before = process.cpuUsage();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (started < requests) {
          started += 1;
          const response = await send();
          if (response.statusCode !== 200)
            throw new Error(`answered ${response.statusCode}: ${response.body.slice(0, 300)}`);
        }
      }),
    );
    const used = process.cpuUsage(before);
    return (used.user + used.system) / requests;
  }

  const loadAtStart = loadAverage();
  for (const variant of variants) await measure(variant.send, 500);
  const samples = new Map<string, number[]>(variants.map((variant) => [variant.key, []]));
  for (let r = 0; r < rounds; r += 1) {
    const order = r % 2 === 0 ? variants : [...variants].reverse();
    const line: string[] = [];
    for (const variant of order) {
      const micros = await measure(variant.send, requestsPerRun);
      samples.get(variant.key)?.push(micros);
      line.push(`${variant.key} ${round(micros, 0)}µs`);
    }
    process.stdout.write(`round ${r + 1}/${rounds}: ${line.join(' | ')}\n`);
  }

  const of = (key: string): number[] => samples.get(key) ?? [];
  const differences = (key: string, from: string): number[] =>
    of(key).map((value, index) => value - (of(from)[index] ?? Number.NaN));
  const rows = variants.map((variant) => {
    const over = (base: string): string =>
      variant.key === base ? '—' : round(median(differences(variant.key, base)), 0);
    return [variant.label, round(median(of(variant.key)), 0), over('sdk'), over('transport')];
  });
  const markdown = writeBenchSection({
    bench: 'http-path',
    title: 'http-path: the service\'s CPU outside the actors, in one process',
    settings: `\`BENCH_ROUNDS\`=${rounds}, \`BENCH_REQUESTS\`=${requestsPerRun}, ${inFlight} in flight`,
    loadAtStart,
    measures:
      'Four apps in one process through `app.inject()`, the emulator answering at once: A (Fastify + `openai` SDK), A′ (A on the ' +
      'service\'s transport), the HTTP path (the service\'s app over a gateway calling the adapter directly), B (the whole service); ' +
      'CPU per request, medians of alternating rounds, differences per round.',
    columns: ['variant', 'CPU µs / request', 'over A, µs', 'over A′, µs'],
    rows,
    note: `B − HTTP path is what the actors add: ${round(median(differences('service', 'http')), 0)} µs per request.`,
  });
  process.stdout.write(markdown);
  await Promise.all([service.close(), httpPath.close(), sdk.close(), sdkTransport.close()]);
  await emulator.stop();
}

await main();
