/**
 * Whether this process is busy: the share of the last moments its event loop spent running
 * (Node's `performance.eventLoopUtilization`) or its CPU time per second of them (`process.cpuUsage`: the
 * garbage collector's threads included, which a flood of big answers keeps busy while the loop itself
 * waits), whichever is higher, capped at 1, smoothed, with hysteresis. Admission reads it: while the
 * process is busy, each address gets an equal share of the generations in flight (admission.ts), so one
 * address's requests cannot take the CPU every other client's requests wait for; while it is not, an
 * address may use what is idle.
 *
 * Why the loop's utilization and not its delay: the delay only rises once the loop is already
 * saturated (every client then waits), the utilization rises with the work itself.
 */
import { performance } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';

/** The utilization at which the process counts as busy, and the one below which it no longer does. */
export interface LoadThresholds {
  readonly busyAt: number;
  readonly idleBelow: number;
}

/**
 * Busy from 45 % (a steady client's streamed generations keep it near 25 % on 2 cores; past 45 % one more
 * address taking as much again is felt in every request's latency), idle again below 30 % (between the
 * two it stays as it was, so an address held to its share does not get everything back the moment the loop
 * eases, and take it again). Busy only ever shares the slots equally: one address alone is never held back.
 */
const defaultLoadThresholds: LoadThresholds = { busyAt: 0.45, idleBelow: 0.3 };

/** Sampled this often; each sample is weighed half against what came before. */
const sampleEveryMs = 250;

export interface LoadGauge {
  /** Whether the process counts as busy now. */
  busy(): boolean;
  /** The smoothed utilization, 0–1 (metrics, tests). */
  utilization(): number;
  /** Stops sampling. */
  stop(): void;
}

/** Starts sampling this process's event loop and CPU time (the timer does not keep the process alive). */
export function startLoadGauge(thresholds: LoadThresholds = defaultLoadThresholds): LoadGauge {
  let last = { loop: performance.eventLoopUtilization(), cpu: process.cpuUsage(), at: performance.now() };
  let smoothed = 0;
  let busy = false;
  const timer = setInterval(() => {
    const now = { loop: performance.eventLoopUtilization(), cpu: process.cpuUsage(), at: performance.now() };
    const loop = performance.eventLoopUtilization(now.loop, last.loop).utilization;
    const cpuMicros = now.cpu.user + now.cpu.system - last.cpu.user - last.cpu.system;
    const cpu = Math.min(1, cpuMicros / 1000 / Math.max(1, now.at - last.at));
    last = now;
    smoothed = (smoothed + Math.max(loop, cpu)) / 2;
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

/**
 * `/metrics`: `studyhelper_busy` (1 while the equal shares of generation slots apply, else 0) and, with a
 * gauge, `studyhelper_load` (its smoothed utilization, 0–1), both read at scrape time.
 */
export function registerLoadMetrics(registry: Registry, busy: () => boolean, gauge: LoadGauge | undefined): void {
  new Gauge({
    name: 'studyhelper_busy',
    help: 'The instance is busy: 1 while the addresses holding generation slots share them equally, else 0.',
    registers: [registry],
    collect() {
      this.set(busy() ? 1 : 0);
    },
  });
  if (gauge === undefined) return;
  new Gauge({
    name: 'studyhelper_load',
    help: "The instance's load, 0-1: its event loop's utilization or its CPU time per second, whichever is higher, smoothed.",
    registers: [registry],
    collect() {
      this.set(gauge.utilization());
    },
  });
}
