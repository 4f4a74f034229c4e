/**
 * HTTP path: where `POST /v1/generate`'s CPU goes besides the SDK call, in one process and
 * without sockets, so a change of a few tens of µs shows through the noise of a shared machine (the
 * overhead bench's figures move by hundreds of µs from run to run at a load of 10).
 *
 * Five Fastify apps in this process, driven through `app.inject()` with 50 requests in flight; the
 * emulator answers at once from its own process (its CPU is not counted), each answer cut into
 * `BENCH_STREAM_PIECES` stream pieces (default 20, the overhead bench's short stream):
 * - **S**: Fastify + the `openai` SDK streamed by hand (the overhead bench's S: same prompt and json_schema,
 *   `stream: true`, the chunks iterated, the content parsed as JSON), on the SDK's default `fetch`;
 * - **S′**: S with the SDK's `fetch` option set to the service's upstream transport
 *   (src/providers/upstream-fetch.ts), so that what the service adds is measured over the same transport;
 * - **HTTP path**: the service's own app (`buildApp`: routes, hooks, zod, admission, the study layer,
 *   the answer's validation and redaction, metrics) over a gateway that calls the gpt adapter directly,
 *   without the actors: everything the service does outside src/machines and src/actors;
 * - **B**: the whole service (`startService`), as `npm start` runs it.
 * CPU is `process.cpuUsage()` of this process per request (light-my-request's own work is in all four);
 * variants alternate over rounds, medians of per-round differences against S.
 */
import Fastify from 'fastify';
import OpenAI from 'openai';
import { assign, createActor, fromPromise, setup, toPromise } from 'xstate';
import type { Attempt, CallRecord, Gateway, GenerateInput, GenerateOutcome } from '../src/actors/types.js';
import { loadConfig } from '../src/config.js';
import { createMemoryDocumentStore } from '../src/documents/index.js';
import { buildApp } from '../src/http/app.js';
import { adaptersFromConfig, startService } from '../src/http/service.js';
import type { ProviderAnswer } from '../src/providers/index.js';
import { upstreamFetch } from '../src/providers/upstream-fetch.js';
import { buildNotesRequest } from '../src/study/prompts.js';
import { loadAverage, median, round, writeBenchSection } from './report.js';
import { setStreamPieces } from './support/emulator-control.js';
import { benchText, gptKey, serviceEnv, startEmulatorChild } from './support/index.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const requestsPerRun = Number(process.env.BENCH_REQUESTS ?? 2000);
const inFlight = 50;
const streamPieces = Number(process.env.BENCH_STREAM_PIECES ?? 20);

/**
 * The least an actor design can spend on a call: one actor per request whose only state invokes the
 * adapter's call as a promise actor (two actor lives and their start, done and stop messages), in the
 * same actor system for every request, as the gateway's runs are.
 */
const leastActor = setup({
  types: {
    input: {} as { readonly call: () => Promise<ProviderAnswer> },
    context: {} as { readonly call: () => Promise<ProviderAnswer>; readonly answer?: ProviderAnswer },
    output: {} as ProviderAnswer | null,
  },
  actors: { upstream: fromPromise<ProviderAnswer, () => Promise<ProviderAnswer>>(({ input }) => input()) },
}).createMachine({
  initial: 'calling',
  context: ({ input }) => ({ call: input.call }),
  states: {
    calling: {
      invoke: {
        src: 'upstream',
        input: ({ context }) => context.call,
        onDone: { target: 'done', actions: assign({ answer: ({ event }) => event.output }) },
        onError: 'done',
      },
    },
    done: { type: 'final' },
  },
  output: ({ context }) => context.answer ?? null,
});

/**
 * The actors left out: the chain's first provider called at once, its answer validated, the call counted
 * for the metrics. `viaLeastActor`: the call made through `leastActor` instead (the actor floor).
 */
function directGateway(adapters: ReturnType<typeof adaptersFromConfig>, viaLeastActor = false): Gateway {
  const callListeners = new Set<(record: CallRecord) => void>();
  const unused = (): never => {
    throw new Error('not used by the http-path bench');
  };
  return {
    async generate<T>(input: GenerateInput<T>): Promise<GenerateOutcome<T>> {
      const link = input.chain[0];
      if (link === undefined) throw new Error('empty chain');
      const startedAt = Date.now();
      const call = (): Promise<ProviderAnswer> =>
        adapters[link.provider].generate(
          input.request,
          link.apiKey,
          input.signal ?? new AbortController().signal,
        );
      const answer = viaLeastActor ? await callThroughLeastActor(call) : await call();
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

/** Where every `leastActor` runs: one root, as the gateway's runs share one actor system. */
const leastActorRoot = createActor(setup({}).createMachine({})).start();

async function callThroughLeastActor(call: () => Promise<ProviderAnswer>): Promise<ProviderAnswer> {
  const actor = createActor(leastActor, { input: { call }, parent: leastActorRoot });
  const done = toPromise(actor);
  actor.start();
  const answer = await done;
  if (answer === null) throw new Error('the least actor ended without an answer');
  return answer;
}

async function main(): Promise<void> {
  const emulator = await startEmulatorChild();
  await setStreamPieces(emulator.url, streamPieces);
  const env = serviceEnv(emulator, {
    PROVIDERS_DEFAULT_ORDER: 'gpt',
    MAX_INFLIGHT_GENERATIONS: '256',
    MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '256',
    RATE_LIMIT_GENERATIONS: '0',
    REQUESTS_PER_SECOND_PER_ADDRESS: '0',
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
  const leastActors = await buildApp({
    config,
    gateway: directGateway(adapters, true),
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    log: { level: 'silent' },
    processMetrics: false,
  });
  await leastActors.ready();

  /** Fastify + the `openai` SDK streamed by hand, on the given `fetch` (the SDK's default when absent). */
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
      const stream = await client.chat.completions.create(
        {
          model: config.models.gpt,
          stream: true,
          stream_options: { include_usage: true },
          max_completion_tokens: prompt.maxOutputTokens,
          messages: [
            { role: 'system', content: prompt.system },
            ...prompt.messages.map((message) => ({ role: message.role, content: message.content })),
          ],
          response_format: {
            type: 'json_schema',
            json_schema: { name: prompt.task, schema: { ...prompt.jsonSchema }, strict: false },
          },
        },
        // As the adapter asks: the service's transport then hands the body on as it arrives.
        { headers: { accept: 'text/event-stream' } },
      );
      let content = '';
      for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
      return { task: 'notes', result: JSON.parse(content) as unknown };
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
  const allVariants = [
    {
      key: 'sdk',
      label: 'S: Fastify + openai SDK streamed by hand',
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
      label: "S′: S on the service's transport",
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
      key: 'leastActor',
      label: 'HTTP path + one actor per request invoking the call (the actor floor)',
      send: () =>
        leastActors.inject({
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
  // BENCH_VARIANTS=http,service: only those (a profile of one of them: `node --cpu-prof --import tsx bench/http-path.bench.ts`).
  const chosen = process.env.BENCH_VARIANTS?.split(',');
  const variants = allVariants.filter((variant) => chosen === undefined || chosen.includes(variant.key));

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
    title: "http-path: the service's CPU outside the actors, in one process",
    settings: `\`BENCH_ROUNDS\`=${rounds}, \`BENCH_REQUESTS\`=${requestsPerRun}, \`BENCH_STREAM_PIECES\`=${streamPieces}, ${inFlight} in flight`,
    loadAtStart,
    measures:
      `Five apps in one process through \`app.inject()\`, the emulator answering at once in ${streamPieces} stream pieces: S (Fastify + \`openai\` SDK streamed by hand), S′ (S on the ` +
      "service's transport), the HTTP path (the service's app over a gateway calling the adapter directly), the actor floor (the HTTP path's call made " +
      'by one actor per request whose only state invokes it), B (the whole service); ' +
      'CPU per request, medians of alternating rounds, differences per round.',
    columns: ['variant', 'CPU µs / request', 'over S, µs', 'over S′, µs'],
    rows,
    note:
      `B − HTTP path is what the actors add: ${round(median(differences('service', 'http')), 0)} µs per request; ` +
      `the actor floor − HTTP path, what the least actor design would: ${round(median(differences('leastActor', 'http')), 0)} µs.`,
  });
  process.stdout.write(markdown);
  await Promise.all([
    service.close(),
    httpPath.close(),
    leastActors.close(),
    sdk.close(),
    sdkTransport.close(),
  ]);
  await emulator.stop();
}

await main();
