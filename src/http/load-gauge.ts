/**
 * Whether this process's event loop is busy (issue 28): the share of the last moments it spent running
 * (Node's `performance.eventLoopUtilization`), smoothed, with hysteresis. Admission reads it: while the
 * loop is busy, each address gets an equal share of the generations in flight (admission.ts), so one
 * address's requests cannot take the CPU every other client's requests wait for; while it is not, an
 * address may use what is idle.
 *
 * Why the loop's utilization and not its delay: the delay only rises once the loop is already
 * saturated (every client then waits), the utilization rises with the work itself.
 */
import { performance } from 'node:perf_hooks';

/** The utilization at which the loop counts as busy, and the one below which it no longer does. */
export interface LoadThresholds {
  readonly busyAt: number;
  readonly idleBelow: number;
}

/**
 * Busy from 60 % (a steady client's streamed generations keep it near 30 % on 2 cores; with another address
 * taking as much again, every request already waits for the loop), idle again below 40 % (between the
 * two it stays as it was, so an address held to its share does not get everything back the moment the loop
 * eases, and take it again).
 */
const defaultLoadThresholds: LoadThresholds = { busyAt: 0.6, idleBelow: 0.4 };

/** The loop is sampled this often; each sample is weighed half against what came before. */
const sampleEveryMs = 250;

export interface LoadGauge {
  /** Whether the loop counts as busy now. */
  busy(): boolean;
  /** The smoothed utilization, 0–1 (metrics, tests). */
  utilization(): number;
  /** Stops sampling. */
  stop(): void;
}

/** Starts sampling this process's event loop (the timer does not keep the process alive). */
export function startLoadGauge(thresholds: LoadThresholds = defaultLoadThresholds): LoadGauge {
  let last = performance.eventLoopUtilization();
  let smoothed = 0;
  let busy = false;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const sample = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    smoothed = (smoothed + sample) / 2;
    if (smoothed >= thresholds.busyAt) busy = true;
    else if (smoothed < thresholds.idleBelow) busy = false;
  }, sampleEveryMs);
  timer.unref();
  return {
    busy: () => busy,
    utilization: () => smoothed,
    stop: () => clearInterval(timer),
  };
}
