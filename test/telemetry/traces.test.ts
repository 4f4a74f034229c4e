/**
 * Traces of the running service (docs/telemetry.md), exported over OTLP/HTTP to a receiver in the test,
 * once as protobuf and once as JSON: requests through the real SDKs against the emulator, with a
 * fallback, a breaker opening and a background job. The spans must sit under the caller's
 * `traceparent`, carry the GenAI attributes, and hold no key, no key fingerprint, no prompt and no answer.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJson, request, startHarness, studyText, textPdf } from '../http/blackbox-support.js';
import type { Harness } from '../http/blackbox-support.js';
import { startOtlpReceiver } from './otlp-receiver.js';
import type { AttributeValue, OtlpReceiver, ReceivedSpan } from './otlp-receiver.js';

const claudeKey = 'test-claude-key-0001-traces';
const gptKey = 'test-gpt-key-0001-traces';
const keys = { 'x-claude-key': claudeKey, 'x-gpt-key': gptKey };
const serverKind = 2;
const clientKind = 3;
const errorStatus = 2;

/** A W3C traceparent of the test's own making: the caller's trace and span. */
function callerContext(): { traceId: string; spanId: string; header: string } {
  const traceId = createHash('sha256').update(`trace ${Math.random()}`).digest('hex').slice(0, 32);
  const spanId = createHash('sha256').update(`span ${Math.random()}`).digest('hex').slice(0, 16);
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
}

async function until<T>(
  read: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Every string an exported span carries: names, attribute keys and values, events, resource, scope. */
function stringsOf(span: ReceivedSpan): string[] {
  const values = (record: Readonly<Record<string, AttributeValue>>): string[] =>
    Object.entries(record).flatMap(([key, value]) => [key, JSON.stringify(value)]);
  return [
    span.name,
    span.scope,
    ...values(span.attributes),
    ...values(span.resource),
    ...span.events.flatMap((event) => [event.name, ...values(event.attributes)]),
  ];
}

/** Every string leaf of an answer (notes, questions, options): the answer text that must not be traced. */
function answerTexts(value: unknown): string[] {
  if (typeof value === 'string') return value.length >= 12 ? [value] : [];
  if (Array.isArray(value)) return value.flatMap(answerTexts);
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap(answerTexts);
  return [];
}

/** What a key could be fingerprinted as: itself, its SHA-256 (hex, base64, base64url), its tail. */
function keyForms(key: string): string[] {
  const digest = createHash('sha256').update(key).digest();
  return [
    key,
    digest.toString('hex'),
    digest.toString('hex').slice(0, 16),
    digest.toString('base64'),
    digest.toString('base64url'),
    key.slice(-12),
  ];
}

describe.each([
  { protocol: 'http/protobuf', serviceName: undefined },
  { protocol: 'http/json', serviceName: 'study-helper-traces' },
] as const)('traces over OTLP $protocol', ({ protocol, serviceName }) => {
  let receiver: OtlpReceiver;
  let harness: Harness;
  const answers: string[] = [];

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    harness = await startHarness({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      ...(serviceName === undefined ? {} : { OTEL_SERVICE_NAME: serviceName }),
      OTEL_BSP_SCHEDULE_DELAY: '20',
      RETRY_MAX: '2',
      BREAKER_FAILURE_THRESHOLD: '3',
      BREAKER_MIN_DISTINCT_KEYS: '1',
      PROVIDER_TIMEOUT_MS: '5000',
    });
  });

  afterAll(async () => {
    await harness?.close();
    // Whatever the close flushed is scanned too.
    const forbidden = [
      ...keyForms(claudeKey),
      ...keyForms(gptKey),
      ...studyText.split('. ').map((sentence) => sentence.slice(0, 40)),
      ...answers,
    ];
    expect(receiver.spans.length).toBeGreaterThan(0);
    for (const span of receiver.spans) {
      for (const value of stringsOf(span)) {
        for (const secret of forbidden) expect(value, `span ${span.name}`).not.toContain(secret);
      }
    }
    // The raw bodies too, as sent: nothing hides in a field the decoder skipped.
    for (const { body } of receiver.bodies) {
      const raw = body.toString('latin1');
      for (const secret of forbidden)
        expect(raw.includes(secret), `a body holds ${secret.slice(0, 8)}…`).toBe(false);
    }
    await receiver?.close();
  });

  const spansOf = (traceId: string) => receiver.spans.filter((span) => span.traceId === traceId);

  it(
    'traces a request under its traceparent: a server span, attempt spans, a fallback and a breaker opening',
    { timeout: 60_000 },
    async () => {
      harness.fault({ provider: 'claude', fault: 'http500' });
      const caller = callerContext();
      const response = await postJson(
        `${harness.url}/v1/generate`,
        { task: 'notes', text: studyText, providers: ['claude', 'gpt'], options: { lang: 'en' } },
        { ...keys, traceparent: caller.header },
      );
      expect(response.status, response.text).toBe(200);
      answers.push(...answerTexts(response.body.result));
      expect(response.body.meta.fallback).toBe(true);

      const server = await until(
        () => spansOf(caller.traceId).find((span) => span.kind === serverKind),
        'the server span',
      );
      expect(server.parentSpanId).toBe(caller.spanId);
      expect(server.name).toBe('POST /v1/generate');
      expect(server.attributes['http.request.method']).toBe('POST');
      expect(server.attributes['http.route']).toBe('/v1/generate');
      expect(server.attributes['http.response.status_code']).toBe(200);
      expect(server.resource['service.name']).toBe(serviceName ?? 'study-helper');

      // Three claude attempts (a call and two retries, each a counted 500), then gpt answers.
      const attempts = await until(() => {
        const found = spansOf(caller.traceId).filter(
          (span) => span.parentSpanId === server.spanId && span.name.startsWith('chat '),
        );
        return found.length >= 4 ? found : undefined;
      }, 'four attempt spans');
      expect(attempts).toHaveLength(4);
      const claude = attempts
        .filter((span) => span.attributes['gen_ai.provider.name'] === 'anthropic')
        .sort(
          (a, b) => Number(a.attributes['studyhelper.retry']) - Number(b.attributes['studyhelper.retry']),
        );
      const gpt = attempts.filter((span) => span.attributes['gen_ai.provider.name'] === 'openai');
      expect(claude).toHaveLength(3);
      expect(gpt).toHaveLength(1);
      for (const [retry, span] of claude.entries()) {
        expect(span.kind).toBe(clientKind);
        expect(span.name).toBe(`chat ${String(span.attributes['gen_ai.request.model'])}`);
        expect(span.attributes['gen_ai.operation.name']).toBe('chat');
        expect(span.attributes['studyhelper.retry']).toBe(retry);
        expect(span.attributes['studyhelper.attempt.outcome']).toBe('failed');
        expect(span.attributes['studyhelper.breaker.counted']).toBe(true);
        // The emulator's 500 is the provider's fault: error class `server_error` (docs/errors.md).
        expect(span.attributes['error.type']).toBe('server_error');
        expect(span.statusCode).toBe(errorStatus);
      }
      // The third counted failure opened claude's breaker: the event is on that attempt's span only.
      expect(
        claude.map((span) =>
          span.events.filter((event) => event.name === 'breaker.transition').map((event) => event.attributes),
        ),
      ).toEqual([[], [], [expect.objectContaining({ from: 'closed', to: 'open' })]]);
      const answered = gpt[0];
      expect(answered?.attributes['studyhelper.attempt.outcome']).toBe('succeeded');
      expect(answered?.attributes['gen_ai.request.model']).toBe(response.body.meta.model);
      expect(answered?.attributes['error.type']).toBeUndefined();
      expect(answered?.attributes['gen_ai.usage.input_tokens']).toBe(response.body.meta.usage.inputTokens);
      expect(answered?.attributes['gen_ai.usage.output_tokens']).toBe(response.body.meta.usage.outputTokens);
      expect(Number(answered?.attributes['gen_ai.usage.output_tokens'])).toBeGreaterThan(0);
    },
  );

  it(
    'shows a provider skipped by its open breaker as a skipped attempt, and a request without traceparent as a new trace',
    { timeout: 60_000 },
    async () => {
      const response = await postJson(
        `${harness.url}/v1/generate`,
        { task: 'notes', text: studyText, providers: ['claude', 'gpt'], options: { lang: 'en' } },
        keys,
      );
      expect(response.status, response.text).toBe(200);
      answers.push(...answerTexts(response.body.result));
      const skipped = await until(
        () =>
          receiver.spans.find(
            (span) =>
              span.attributes['studyhelper.attempt.outcome'] === 'skipped' &&
              span.attributes['gen_ai.provider.name'] === 'anthropic',
          ),
        'the skipped attempt',
      );
      expect(skipped.attributes['studyhelper.attempt.skip_reason']).toBe('circuit_open');
      expect(skipped.attributes['studyhelper.breaker.counted']).toBe(false);
      const server = await until(
        () => receiver.spans.find((span) => span.spanId === skipped.parentSpanId),
        'its server span',
      );
      expect(server?.kind).toBe(serverKind);
      expect(server?.parentSpanId).toBe('');
    },
  );

  it(
    'ends the server span of a streamed answer (an event stream) when the stream closes',
    { timeout: 60_000 },
    async () => {
      const caller = callerContext();
      const response = await fetch(`${harness.url}/v1/generate`, {
        method: 'POST',
        headers: {
          ...keys,
          'content-type': 'application/json',
          accept: 'text/event-stream',
          traceparent: caller.header,
        },
        body: JSON.stringify({ task: 'notes', text: studyText, providers: ['gpt'], options: { lang: 'en' } }),
      });
      expect(response.headers.get('content-type')).toContain('text/event-stream');
      const stream = await response.text();
      expect(stream).toContain('event: done');
      const server = await until(
        () => spansOf(caller.traceId).find((span) => span.kind === serverKind),
        "the stream's server span",
      );
      expect(server.name).toBe('POST /v1/generate');
      expect(server.attributes['http.response.status_code']).toBe(200);
      const attempt = spansOf(caller.traceId).find((span) => span.parentSpanId === server.spanId);
      expect(attempt?.attributes['gen_ai.provider.name']).toBe('openai');
    },
  );

  // A job takes a while (three stages through the emulator): traced once, over protobuf.
  it.runIf(protocol === 'http/protobuf')(
    'traces a job: a span per stage under the creating request, a span per part, attempts under the parts',
    { timeout: 90_000 },
    async () => {
      harness.emulator.resetFaults();
      const pdf = await textPdf([
        'Photosynthesis converts light energy into chemical energy.',
        'Chlorophyll absorbs red and blue light.',
      ]);
      const form = new FormData();
      form.append('file', new Blob([Buffer.from(pdf)], { type: 'application/pdf' }), 'bio.pdf');
      const upload = await request(`${harness.url}/v1/documents`, { method: 'POST', body: form });
      expect(upload.status, upload.text).toBe(201);
      const caller = callerContext();
      const created = await postJson(
        `${harness.url}/v1/jobs`,
        { documentId: upload.body.documentId, providers: ['gpt'], options: { lang: 'en' } },
        { ...keys, traceparent: caller.header },
      );
      expect(created.status, created.text).toBe(202);
      const jobId = String(created.body.jobId);
      let done: { status: string; result?: unknown } | undefined;
      for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
        const polled = await request(`${harness.url}/v1/jobs/${jobId}`);
        if (['succeeded', 'failed', 'cancelled', 'interrupted'].includes(String(polled.body.status))) {
          done = polled.body as { status: string; result?: unknown };
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(done?.status).toBe('succeeded');
      answers.push(...answerTexts(done?.result));

      // The job's event stream is written on the hijacked socket: its span ends when the stream does.
      const reader = callerContext();
      const events = await fetch(`${harness.url}/v1/jobs/${jobId}/events`, {
        headers: { traceparent: reader.header },
      });
      expect(await events.text()).toContain('event: done');
      const eventsSpan = await until(
        () => spansOf(reader.traceId).find((span) => span.kind === serverKind),
        "the event stream's server span",
      );
      expect(eventsSpan.name).toBe('GET /v1/jobs/:id/events');
      expect(eventsSpan.attributes['http.response.status_code']).toBe(200);

      const stages = await until(() => {
        const found = spansOf(caller.traceId).filter((span) => span.name.startsWith('job.stage '));
        return found.length >= 3 ? found : undefined;
      }, 'three stage spans');
      const server = spansOf(caller.traceId).find((span) => span.kind === serverKind);
      expect(server?.name).toBe('POST /v1/jobs');
      expect(server?.parentSpanId).toBe(caller.spanId);
      expect(stages.map((span) => span.name).sort()).toEqual([
        'job.stage fill',
        'job.stage mcq',
        'job.stage notes',
      ]);
      for (const stage of stages) {
        expect(stage.parentSpanId).toBe(server?.spanId);
        expect(stage.attributes['studyhelper.job.id']).toBe(jobId);
        const parts = spansOf(caller.traceId).filter((span) => span.parentSpanId === stage.spanId);
        expect(parts.length).toBeGreaterThanOrEqual(1);
        for (const part of parts) {
          expect(part.name).toBe(stage.name.replace('job.stage', 'job.part'));
          const attempts = spansOf(caller.traceId).filter((span) => span.parentSpanId === part.spanId);
          expect(attempts.length).toBeGreaterThanOrEqual(1);
          for (const attempt of attempts) {
            expect(attempt.name).toMatch(/^chat /);
            expect(attempt.attributes['gen_ai.provider.name']).toBe('openai');
          }
        }
      }
    },
  );
});

describe('breaker transitions on the attempts that caused them', () => {
  let receiver: OtlpReceiver;
  let harness: Harness;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    harness = await startHarness({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '20',
      RETRY_MAX: '0',
      BREAKER_FAILURE_THRESHOLD: '1',
      BREAKER_MIN_DISTINCT_KEYS: '1',
      BREAKER_RECOVERY_MS: '300',
      PROVIDER_TIMEOUT_MS: '5000',
    });
  });

  afterAll(async () => {
    await harness?.close();
    await receiver?.close();
  });

  const transitionsOn = (span: ReceivedSpan) =>
    span.events
      .filter((event) => event.name === 'breaker.transition')
      .map((event) => `${String(event.attributes.from)}→${String(event.attributes.to)}`);

  it(
    "puts the opening on the failed attempt and the closing on the probe that succeeded, and the timer's half-open on none",
    { timeout: 60_000 },
    async () => {
      harness.fault({ provider: 'claude', fault: 'http500', count: 1 });
      const failing = callerContext();
      const first = await postJson(
        `${harness.url}/v1/generate`,
        { task: 'notes', text: studyText, providers: ['claude', 'gpt'], options: { lang: 'en' } },
        { ...keys, traceparent: failing.header },
      );
      expect(first.status, first.text).toBe(200);
      // The recovery timer moves the breaker to half-open on its own: no attempt caused that.
      await until(async () => {
        const providers = await request(`${harness.url}/v1/providers`);
        return (providers.body.providers as { id: string; breaker: { state: string } }[]).find(
          (provider) => provider.id === 'claude',
        )?.breaker.state === 'halfOpen'
          ? true
          : undefined;
      }, 'claude half-open');
      const probing = callerContext();
      const second = await postJson(
        `${harness.url}/v1/generate`,
        { task: 'notes', text: studyText, providers: ['claude', 'gpt'], options: { lang: 'en' } },
        { ...keys, traceparent: probing.header },
      );
      expect(second.status, second.text).toBe(200);
      expect(second.body.meta.provider).toBe('claude');

      const attemptsOf = (traceId: string, count: number) =>
        until(() => {
          const found = receiver.spans.filter(
            (span) => span.traceId === traceId && span.name.startsWith('chat '),
          );
          return found.length >= count ? found : undefined;
        }, `${count} attempt spans`);
      const [failed, fellBack] = await attemptsOf(failing.traceId, 2).then((spans) => [
        spans.find((span) => span.attributes['gen_ai.provider.name'] === 'anthropic'),
        spans.find((span) => span.attributes['gen_ai.provider.name'] === 'openai'),
      ]);
      expect(failed && transitionsOn(failed)).toEqual(['closed→open']);
      expect(fellBack && transitionsOn(fellBack)).toEqual([]);
      const [probe] = await attemptsOf(probing.traceId, 1);
      expect(probe?.attributes['studyhelper.attempt.outcome']).toBe('succeeded');
      expect(probe && transitionsOn(probe)).toEqual(['halfOpen→closed']);
      // Every transition an attempt caused is on exactly one span.
      const all = receiver.spans.flatMap(transitionsOn);
      expect(all.sort()).toEqual(['closed→open', 'halfOpen→closed']);
    },
  );
});
