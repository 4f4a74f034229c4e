/**
 * A span per provider attempt, on the OpenTelemetry GenAI conventions, observed where the metrics and
 * `meta.attempts` observe them: the gateway's attempt records, call records and breaker transitions.
 * The machines know nothing of it.
 *
 * Each `generate` runs in an AsyncLocalStorage scope of its own. The actors work synchronously inside
 * the caller's turn or in promise and timer callbacks begun there, so a breaker transition or call
 * record the gateway reports inside that scope belongs to that run: the transition goes on the span of
 * the run's next attempt at that provider (the attempt whose result moved the breaker, or the probe the
 * breaker admitted), and the call's token usage on the attempt recorded just before it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { context, SpanKind, SpanStatusCode, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type { Attempt, BreakerTransition, Gateway, GenerateInput } from '../actors/types.js';
import type { ProviderId } from '../machines/types.js';

/** `gen_ai.provider.name` of each provider (the conventions' names; TimelyGPT has none, so its own). */
const genAiProviderNames: Readonly<Record<ProviderId, string>> = {
  claude: 'anthropic',
  gpt: 'openai',
  timelygpt: 'timelygpt',
};

/** One `generate` as the tracing follows it. */
interface RunTrace {
  readonly parent: Context;
  readonly task: string;
  /** Breaker transitions seen in this run's scope, not yet on an attempt's span. */
  readonly transitions: BreakerTransition[];
  /** Attempt spans recorded in the current turn, still open for the call's usage; ended in a microtask. */
  readonly recent: Map<ProviderId, Span>;
}

/** Wraps `gateway` so that each attempt of each run is a span under the context active at `generate`. */
export function traceGateway(gateway: Gateway, tracer: Tracer): Gateway {
  const runs = new AsyncLocalStorage<RunTrace>();

  gateway.onBreakerTransition((transition) => {
    runs.getStore()?.transitions.push(transition);
  });
  gateway.onCall((record) => {
    const span = runs.getStore()?.recent.get(record.provider);
    if (span === undefined || record.usage === undefined) return;
    const { inputTokens, outputTokens } = record.usage;
    if (typeof inputTokens === 'number') span.setAttribute('gen_ai.usage.input_tokens', inputTokens);
    if (typeof outputTokens === 'number') span.setAttribute('gen_ai.usage.output_tokens', outputTokens);
  });

  function recordAttempt(run: RunTrace, attempt: Attempt): void {
    const end = Date.now();
    const span = tracer.startSpan(
      `chat ${attempt.model}`,
      {
        kind: SpanKind.CLIENT,
        startTime: end - attempt.durationMs,
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': genAiProviderNames[attempt.provider],
          'gen_ai.request.model': attempt.model,
          'studyhelper.provider': attempt.provider,
          'studyhelper.task': run.task,
          'studyhelper.attempt.outcome': attempt.outcome,
          'studyhelper.breaker.counted': attempt.countedByBreaker,
          'studyhelper.retry': attempt.retry,
          ...(attempt.outcome === 'failed' && attempt.errorClass !== undefined
            ? { 'error.type': attempt.errorClass }
            : {}),
          ...(attempt.reason === undefined ? {} : { 'studyhelper.attempt.skip_reason': attempt.reason }),
          ...(attempt.httpStatus === undefined ? {} : { 'http.response.status_code': attempt.httpStatus }),
          ...(attempt.continuation === true ? { 'studyhelper.attempt.continuation': true } : {}),
        },
      },
      run.parent,
    );
    if (attempt.outcome === 'failed')
      span.setStatus({ code: SpanStatusCode.ERROR, message: attempt.errorClass ?? 'failed' });
    // This attempt's breaker transitions: the ones the result caused (this turn) or its probe admission.
    for (let index = 0; index < run.transitions.length;) {
      const transition = run.transitions[index];
      if (transition?.provider !== attempt.provider) {
        index += 1;
        continue;
      }
      span.addEvent(
        'breaker.transition',
        { from: transition.from, to: transition.to, 'studyhelper.provider': transition.provider },
        transition.at,
      );
      run.transitions.splice(index, 1);
    }
    run.recent.set(attempt.provider, span);
    // The call's record (its token usage) follows the attempt in the same turn; then the span ends.
    queueMicrotask(() => {
      if (run.recent.get(attempt.provider) === span) run.recent.delete(attempt.provider);
      span.end(end);
    });
  }

  return {
    ...gateway,
    generate<T>(input: GenerateInput<T>) {
      const run: RunTrace = {
        parent: context.active(),
        task: input.request.task,
        transitions: [],
        recent: new Map(),
      };
      const onAttempt = input.onAttempt;
      const traced: GenerateInput<T> = {
        ...input,
        onAttempt: (attempt) => {
          recordAttempt(run, attempt);
          onAttempt?.(attempt);
        },
      };
      return runs.run(run, () => gateway.generate(traced));
    },
  };
}
