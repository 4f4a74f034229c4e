/**
 * Prometheus metrics of the actor system (docs/api.md "Metrics", names fixed). Counters are fed by the
 * gateway's events; the breaker state gauge is read from the live breaker actors at scrape time, so it
 * can never drift from what `GET /v1/providers` shows. Labels hold provider ids, states and error classes
 * only: never a key or a key fingerprint.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { BreakerStateName, Gateway, ProviderStatus } from '../actors/types.js';

const breakerStateValue: Readonly<Record<BreakerStateName, number>> = { closed: 0, open: 1, halfOpen: 2 };

export interface ProviderMetrics {
  readonly registry: Registry;
  /** The Prometheus text exposition. */
  render(): Promise<string>;
  readonly contentType: string;
  /** Unsubscribes from the gateway. */
  stop(): void;
}

export interface ProviderMetricsOptions {
  /** Process metrics (CPU, memory, event loop lag) next to the service's own; on by default. */
  readonly processMetrics?: boolean;
}

export function createProviderMetrics(gateway: Gateway, options: ProviderMetricsOptions = {}): ProviderMetrics {
  const registry = new Registry();
  // prom-client's default metrics are already named process_* and nodejs_*: the prefix is only ours.
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'studyhelper_' });

  /** A gauge with one value per provider, read from the live provider status at scrape time. */
  const providerGauge = (name: string, help: string, read: (status: ProviderStatus) => number): void => {
    new Gauge({
      name,
      help,
      labelNames: ['provider'] as const,
      registers: [registry],
      collect() {
        for (const status of gateway.providers()) this.set({ provider: status.id }, read(status));
      },
    });
  };

  providerGauge(
    'studyhelper_breaker_state',
    'Breaker state per provider: 0 closed, 1 open, 2 halfOpen.',
    (status) => breakerStateValue[status.breaker.state],
  );
  new Gauge({
    name: 'studyhelper_keys_refused',
    help: "Callers' keys a provider refuses now (per-key health), by state: quarantined or cooling. Counts only: no key, no fingerprint.",
    labelNames: ['provider', 'state'] as const,
    registers: [registry],
    collect() {
      for (const status of gateway.providers()) {
        this.set({ provider: status.id, state: 'quarantined' }, status.keys.quarantined);
        this.set({ provider: status.id, state: 'cooling' }, status.keys.cooling);
      }
    },
  });
  providerGauge(
    'studyhelper_breaker_streak_keys',
    "Distinct callers' keys among the current failure streak's counted failures, counted up to the quorum (a count only: never which keys).",
    (status) => status.breaker.distinctKeys,
  );
  providerGauge(
    'studyhelper_breaker_quorum_keys',
    'Distinct keys a failure streak needs before the provider breaker opens (BREAKER_MIN_DISTINCT_KEYS).',
    (status) => status.breaker.minDistinctKeys,
  );
  const transitions = new Counter({
    name: 'studyhelper_breaker_transitions_total',
    help: 'Breaker state transitions per provider.',
    labelNames: ['provider', 'from', 'to'] as const,
    registers: [registry],
  });
  const calls = new Counter({
    name: 'studyhelper_provider_calls_total',
    help: "Upstream calls per provider by outcome (succeeded, failed, rejected by the breaker, skipped for the caller's refused key, aborted by the caller) and error class.",
    labelNames: ['provider', 'outcome', 'error_class'] as const,
    registers: [registry],
  });
  const fallbacks = new Counter({
    name: 'studyhelper_fallbacks_total',
    help: 'Fallbacks from one provider to the next.',
    labelNames: ['from', 'to'] as const,
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'studyhelper_attempt_duration_seconds',
    help: 'Duration of upstream generation calls per provider.',
    labelNames: ['provider'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120],
    registers: [registry],
  });
  const tokens = new Counter({
    name: 'studyhelper_tokens_total',
    help: 'Tokens reported by the providers, by direction (input, output).',
    labelNames: ['provider', 'direction'] as const,
    registers: [registry],
  });

  const cost = new Counter({
    name: 'studyhelper_cost_usd_total',
    help: "USD the users' keys paid for calls, by provider and the model that answered (reported usage at the price table's price; calls without usage or price are not counted).",
    labelNames: ['provider', 'model'] as const,
    registers: [registry],
  });

  const unsubscribers = [
    gateway.onCost((call) => {
      if (call.usd > 0) cost.inc({ provider: call.provider, model: call.model }, call.usd);
    }),
    gateway.onBreakerTransition((transition) => {
      transitions.inc({ provider: transition.provider, from: transition.from, to: transition.to });
    }),
    gateway.onCall((record) => {
      calls.inc({ provider: record.provider, outcome: record.outcome, error_class: record.errorClass ?? 'none' });
      // A call the breaker rejected or a refused key skipped never went out, an aborted one was cut short: no duration worth a bucket.
      if (record.outcome === 'succeeded' || record.outcome === 'failed') durations.observe({ provider: record.provider }, record.durationMs / 1000);
      const input = record.usage?.inputTokens;
      const output = record.usage?.outputTokens;
      if (typeof input === 'number' && input > 0) tokens.inc({ provider: record.provider, direction: 'input' }, input);
      if (typeof output === 'number' && output > 0) tokens.inc({ provider: record.provider, direction: 'output' }, output);
    }),
    gateway.onFallback((from, to) => {
      fallbacks.inc({ from, to });
    }),
  ];

  return {
    registry,
    contentType: registry.contentType,
    render: () => registry.metrics(),
    stop() {
      for (const unsubscribe of unsubscribers) unsubscribe();
    },
  };
}
