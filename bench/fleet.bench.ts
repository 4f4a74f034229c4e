/**
 * Fleet benchmark: calls that reach a dead provider per recovery window, with 1, 2 and 4
 * instances, each breaker per process vs shared through Redis (REDIS_URL, or REDIS_TEST_URL, or
 * 127.0.0.1:6379). Every instance is its own gateway with its own Redis connections (what a worker
 * or a separate process holds), all in one Node process so the run stays short; the emulator's call
 * counter is the measure. The provider answers 500 throughout; each instance sends requests
 * continuously from two loops. Goal: with Redis, at most threshold + 1 calls per window, flat in the
 * number of instances.
 */
import { randomUUID } from 'node:crypto';
import { createGateway } from '../src/actors/gateway.js';
import type { Gateway } from '../src/actors/types.js';
import { startEmulator, type Emulator } from '../src/emulator/index.js';
import { connectFleet, type Fleet } from '../src/fleet/index.js';
import { createAdapters, type GenerationRequest } from '../src/providers/index.js';
import { median, round, writeBenchSection } from './report.js';
import { Secret } from '../src/security/secret.js';

const redisUrl = process.env.REDIS_URL ?? process.env.REDIS_TEST_URL ?? 'redis://127.0.0.1:6379';
const threshold = 5;
const recoveryMs = Number(process.env.BENCH_RECOVERY_MS ?? 250);
const windows = Number(process.env.BENCH_WINDOWS ?? 8);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const settleMs = Math.min(50, recoveryMs / 4);
const instanceCounts = (process.env.BENCH_INSTANCES ?? '1,2,4').split(',').map(Number);

const request: GenerationRequest = {
  task: 'notes',
  lang: 'en',
  system: 'bench',
  messages: [{ role: 'user', content: 'bench' }],
  jsonSchema: { type: 'object' },
  maxOutputTokens: 64,
  maxAnswerChars: 64 * 16,
};

interface Instance {
  readonly gateway: Gateway;
  readonly fleet: Fleet | undefined;
}

async function startInstance(emulator: Emulator, shared: { prefix: string } | undefined): Promise<Instance> {
  const breaker = { threshold, recoveryMs };
  const fleet =
    shared === undefined
      ? undefined
      : await connectFleet({ url: redisUrl, prefix: shared.prefix, breaker, providerTimeoutMs: 5000 });
  const gateway = createGateway({
    adapters: createAdapters({
      anthropicBaseUrl: emulator.anthropicBaseUrl,
      openaiBaseUrl: emulator.openaiBaseUrl,
      timelygptBaseUrl: emulator.timelygptBaseUrl,
      claudeModel: 'bench',
      gptModel: 'bench',
      timelygptModel: 'bench',
      timelygptTokenTtlMs: 60_000,
    }),
    breaker,
    retry: { max: 0, backoffMs: [0] },
    policy: 'retry-then-fallback',
    providerTimeoutMs: 5000,
    ...(fleet === undefined ? {} : { fleetLink: fleet.fleetLink }),
  });
  return { gateway, fleet };
}

interface Measurement {
  /** Calls that reached the provider per recovery window, the opening included. */
  readonly perWindow: number;
  /** Calls until every instance's breaker was open (threshold plus the calls already in flight). */
  readonly toOpen: number;
  /** Calls per recovery window once open everywhere: the half-open probes. */
  readonly probesPerWindow: number;
}

/** Runs `instances` instances against a dead provider for `windows` recovery windows. */
async function measure(emulator: Emulator, instances: number, sharedMode: boolean): Promise<Measurement> {
  const prefix = `study-helper-bench:${randomUUID().slice(0, 8)}:`;
  const fleet = await Promise.all(
    Array.from({ length: instances }, () => startInstance(emulator, sharedMode ? { prefix } : undefined)),
  );
  // Let every link reconcile with the (fresh) fleet state before the load starts.
  await new Promise((resolve) => setTimeout(resolve, 50));
  emulator.resetStats();
  emulator.setFault({ provider: 'claude', fault: 'http500' });
  const until = performance.now() + windows * recoveryMs;
  const loop = async (gateway: Gateway): Promise<void> => {
    while (performance.now() < until) {
      await gateway.generate({
        request,
        validate: (answer) => ({ ok: true, value: answer.text }),
        chain: [{ provider: 'claude', apiKey: new Secret('test-claude-key-bench-0001') }],
      });
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  };
  let toOpen = Number.NaN;
  let openAt = Number.NaN;
  const watch = async (): Promise<void> => {
    while (performance.now() < until) {
      if (fleet.every((instance) => instance.gateway.provider('claude').breaker.state === 'open')) {
        // The calls admitted before the opening was known still land: let them (the provider answers
        // at once), well inside the first recovery window.
        await new Promise((resolve) => setTimeout(resolve, settleMs));
        toOpen = emulator.stats().claude.calls;
        openAt = performance.now();
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  };
  await Promise.all([watch(), ...fleet.flatMap((instance) => [loop(instance.gateway), loop(instance.gateway)])]);
  const calls = emulator.stats().claude.calls;
  emulator.resetFaults();
  await Promise.all(
    fleet.map(async (instance) => {
      await instance.gateway.stop();
      await instance.fleet?.close();
    }),
  );
  return {
    perWindow: calls / windows,
    toOpen,
    probesPerWindow: (calls - toOpen) / ((until - openAt) / recoveryMs),
  };
}

const emulator = await startEmulator();
const results = new Map<string, Measurement[]>();
try {
  for (let round = 0; round < rounds; round += 1) {
    for (const instances of instanceCounts) {
      // A/B alternating: per-process, then Redis-shared, within each round.
      for (const sharedMode of [false, true]) {
        const measurement = await measure(emulator, instances, sharedMode);
        const key = `${instances}:${sharedMode ? 'redis' : 'process'}`;
        results.set(key, [...(results.get(key) ?? []), measurement]);
        process.stdout.write(
          `round ${round + 1}: ${instances} instance(s), ${sharedMode ? 'Redis-shared' : 'per-process'}: ` +
            `${measurement.perWindow.toFixed(2)} calls/window, ${measurement.toOpen} to open, ` +
            `${measurement.probesPerWindow.toFixed(2)} probes/window\n`,
        );
      }
    }
  }
} finally {
  await emulator.close();
}

const value = (instances: number, mode: string, field: keyof Measurement): number =>
  median((results.get(`${instances}:${mode}`) ?? []).map((measurement) => measurement[field]));
const rows = instanceCounts.map((instances) => [
  instances,
  ...(['process', 'redis'] as const).flatMap((mode) => [
    round(value(instances, mode, 'perWindow')),
    round(value(instances, mode, 'toOpen'), 0),
    round(value(instances, mode, 'probesPerWindow')),
  ]),
]);
const redisValues = instanceCounts.map((instances) => value(instances, 'redis', 'perWindow'));
const withinGoal = redisValues.every((perWindow) => perWindow <= threshold + 1);
const markdown = writeBenchSection({
  bench: 'fleet',
  title: 'fleet: calls reaching a dead provider per recovery window',
  settings: `threshold ${threshold}, recovery ${recoveryMs} ms, ${windows} windows, ${rounds} rounds`,
  measures:
    'Instances (each its own gateway) send from two loops to a provider answering 500 throughout, with per-process ' +
    '(1 breaker per instance) or Redis-shared breakers; "to open" = calls before every instance saw it open, then half-open probes per window.',
  columns: ['instances', 'per-process calls/window', 'to open', 'probes/window', 'Redis calls/window', 'to open', 'probes/window'],
  rows,
  goals: [
    {
      rule: `with Redis at most threshold + 1 = ${threshold + 1} calls per window, flat in the number of instances`,
      met: withinGoal,
      measured: redisValues.map((perWindow) => round(perWindow)).join(', '),
    },
  ],
});
process.stdout.write(`\n${markdown}\n`);
