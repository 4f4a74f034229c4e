/**
 * `studyhelper_refusals_total{limit, what}`: every request or connection one of the service's bounds
 * refused (docs/operations.md "Metrics"). Under a flood it says which bound holds the line: a client's
 * share, an address's, the equal shares while busy, the instance's, a rate or the PDF queue.
 */
import { Counter, type Registry } from 'prom-client';
import type { Refusal } from './errors.js';

export interface RefusalCounter {
  count(refusal: Refusal): void;
  /** Adds the counter to the app's registry (made later than the error handler that counts). */
  register(registry: Registry): void;
}

export function createRefusalCounter(): RefusalCounter {
  const counter = new Counter({
    name: 'studyhelper_refusals_total',
    help: 'Requests and connections refused by a bound: limit (client_share, address_share, busy_share, instance, rate, queue) and what it bounds.',
    labelNames: ['limit', 'what'] as const,
    registers: [],
  });
  return {
    count: (refusal) => counter.inc({ limit: refusal.limit, what: refusal.what }),
    register: (registry) => registry.registerMetric(counter),
  };
}

/** What an address's share held back: a request head (every request, or a pipelined one), or an upload's body. */
export type Pace = 'requests' | 'pipelined' | 'upload_bytes';

export interface PaceCounter {
  count(pace: Pace): void;
  register(registry: Registry): void;
}

/**
 * `studyhelper_paced_total{pace}`: requests an address's share made wait, each counted once however long it
 * waited. A pace refuses nothing, so `studyhelper_refusals_total` never shows it: this is how an operator tells
 * an address held at its share (a flood, or a classroom behind one NAT address) from a quiet one.
 */
export function createPaceCounter(): PaceCounter {
  const counter = new Counter({
    name: 'studyhelper_paced_total',
    help: 'Requests an address share made wait, once each: pace (requests, pipelined, upload_bytes).',
    labelNames: ['pace'] as const,
    registers: [],
  });
  return {
    count: (pace) => counter.inc({ pace }),
    register: (registry) => registry.registerMetric(counter),
  };
}
