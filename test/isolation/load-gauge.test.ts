/**
 * The busy signal the equal shares of generation slots follow (src/http/load-gauge.ts): this
 * process's event-loop utilization, sampled every 250 ms and smoothed, busy from 45 %, idle again below 30 %.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startLoadGauge, type LoadGauge } from '../../src/http/load-gauge.js';

const gauges: LoadGauge[] = [];
afterEach(() => gauges.splice(0).forEach((gauge) => gauge.stop()));

/** Runs the loop `busyMs`, lets it rest `restMs`, and again, for `forMs`. */
async function keepBusy(busyMs: number, restMs: number, forMs: number): Promise<void> {
  const until = performance.now() + forMs;
  while (performance.now() < until) {
    const stop = performance.now() + busyMs;
    while (performance.now() < stop) {
      /* the loop is busy */
    }
    await new Promise((resolve) => setTimeout(resolve, restMs));
  }
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('load gauge', () => {
  it('is busy once the loop runs most of the time, and idle again once it rests', async () => {
    const gauge = startLoadGauge();
    gauges.push(gauge);
    await pause(600);
    expect(gauge.busy()).toBe(false);
    await keepBusy(30, 1, 1_500);
    expect(gauge.utilization()).toBeGreaterThan(0.45);
    expect(gauge.busy()).toBe(true);
    await pause(1_500);
    expect(gauge.utilization()).toBeLessThan(0.3);
    expect(gauge.busy()).toBe(false);
  });

  it('stays as it was between the two thresholds (an address held to its share does not get everything back at once)', async () => {
    const gauge = startLoadGauge({ busyAt: 0.6, idleBelow: 0.05 });
    gauges.push(gauge);
    await keepBusy(30, 1, 1_500);
    expect(gauge.busy()).toBe(true);
    // A third busy: under 60 %, above 5 %: still busy. (Wide of both thresholds, and long enough for the
    // smoothed figure to settle, so a loaded machine's late timers do not decide the test.)
    await keepBusy(5, 10, 2_500);
    expect(gauge.utilization()).toBeLessThan(0.6);
    expect(gauge.busy()).toBe(true);
  });
});
