import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { createGateway } from '../../src/actors/gateway.js';
import type { Gateway, GenerateOutcome } from '../../src/actors/types.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { connectFleet, type Fleet } from '../../src/fleet/index.js';
import { createAdapters, type GenerationRequest } from '../../src/providers/index.js';
import { createKeyIdentity, randomKeySalt } from '../../src/security/key-id.js';
import { Secret } from '../../src/security/secret.js';

/** The shared test server (`.ci/run` exports REDIS_TEST_URL; locally one answers on 6379). */
export const redisTestUrl = process.env.REDIS_TEST_URL ?? 'redis://127.0.0.1:6379';

/** Every test writes under its own prefix, so tests never see each other's breakers. */
export function uniquePrefix(name: string): string {
  return `study-helper-test:${name}:${randomUUID().slice(0, 8)}:`;
}

export const testKey = 'test-claude-key-fleet-0001';

const request: GenerationRequest = {
  task: 'notes',
  lang: 'en',
  system: 'You write study notes.',
  messages: [{ role: 'user', content: 'Photosynthesis turns light into chemical energy.' }],
  jsonSchema: { type: 'object' },
  maxOutputTokens: 256,
  maxAnswerChars: 256 * 16,
};

export interface Instance {
  readonly gateway: Gateway;
  readonly fleet: Fleet;
  call(): Promise<GenerateOutcome<string>>;
  /** One claude call with `key` (an obviously fake emulator key). */
  callWith(key: string): Promise<GenerateOutcome<string>>;
  state(): string;
  close(): Promise<void>;
}

export interface InstanceOptions {
  readonly url: string;
  readonly prefix: string;
  readonly emulator: Emulator;
  readonly threshold?: number;
  readonly recoveryMs?: number;
  /** BREAKER_MAX_RECOVERY_MS: the cap of the open period that doubles on each failed probe. */
  readonly maxRecoveryMs?: number;
  readonly syncIntervalMs?: number;
  /** KEY_QUARANTINE_MS: per-key health on, shared through the fleet (its salt and its key link). */
  readonly keyQuarantineMs?: number;
  /** The half-open probe lease's lifetime without renewal (default the fleet's, 3000). */
  readonly probeLeaseMs?: number;
}

/** One service instance in this process: its own gateway and its own Redis connections. */
export async function startInstance(options: InstanceOptions): Promise<Instance> {
  const breaker = {
    threshold: options.threshold ?? 3,
    recoveryMs: options.recoveryMs ?? 60_000,
    ...(options.maxRecoveryMs === undefined ? {} : { maxRecoveryMs: options.maxRecoveryMs }),
  };
  const fleet = await connectFleet({
    url: options.url,
    prefix: options.prefix,
    breaker,
    providerTimeoutMs: 5000,
    connectTimeoutMs: 1000,
    ...(options.syncIntervalMs === undefined ? {} : { syncIntervalMs: options.syncIntervalMs }),
    ...(options.probeLeaseMs === undefined ? {} : { probeLeaseMs: options.probeLeaseMs }),
  });
  const gateway = createGateway({
    adapters: createAdapters({
      anthropicBaseUrl: options.emulator.anthropicBaseUrl,
      openaiBaseUrl: options.emulator.openaiBaseUrl,
      timelygptBaseUrl: options.emulator.timelygptBaseUrl,
      claudeModel: 'claude-test',
      gptModel: 'gpt-test',
      timelygptModel: 'timely-test',
      timelygptTokenTtlMs: 60_000,
    }),
    breaker,
    retry: { max: 0, backoffMs: [0] },
    policy: 'retry-then-fallback',
    providerTimeoutMs: 5000,
    fleetLink: fleet.fleetLink,
    ...(options.keyQuarantineMs === undefined
      ? {}
      : {
          keyHealth: { quarantineMs: options.keyQuarantineMs, coolingMs: 30_000, maxKeys: 1000 },
          keyLink: fleet.keyLink,
          keyIdentity: createKeyIdentity((await fleet.keySalt()) ?? randomKeySalt()),
        }),
  });
  const callWith = (key: string) =>
    gateway.generate({
      request,
      validate: (answer) => ({ ok: true, value: answer.text }),
      chain: [{ provider: 'claude', apiKey: new Secret(key) }],
    });
  return {
    gateway,
    fleet,
    call: () => callWith(testKey),
    callWith,
    state: () => gateway.provider('claude').breaker.state,
    async close() {
      await gateway.stop();
      await fleet.close();
    },
  };
}

/** A service process (`src/main.ts` through tsx) on the shared Redis and one emulator. */
export interface ServiceProcess {
  readonly url: string;
  stop(): Promise<void>;
  /** Sends `signal` (SIGKILL: the instance dies mid-work); resolves with the exit code or signal once it exited. */
  kill(signal: NodeJS.Signals): Promise<number | NodeJS.Signals | null>;
}

/**
 * Starts `src/main.ts` (through tsx) in its own process on a free port, with `env` over this process's
 * (a variable given as undefined is left out); resolves once `/healthz` answers.
 */
export async function startMainProcess(env: Readonly<Record<string, string | undefined>>): Promise<ServiceProcess> {
  const port = await freePort();
  const processEnv: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    // Workers at the process's priority on the oversubscribed test machine (test/http/support.ts says why).
    WORKER_NICE: '0',
    ...env,
  };
  for (const [name, value] of Object.entries(processEnv)) if (value === undefined) delete processEnv[name];
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: processEnv,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const stop = (): Promise<void> =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) =>
    child.once('exit', (code, signal) => resolve(signal ?? code)),
  );
  const kill = (signal: NodeJS.Signals): Promise<number | NodeJS.Signals | null> => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 50_000; // tsx compiles on start: slow on a loaded machine
  for (;;) {
    try {
      if ((await fetch(`${url}/healthz`)).ok) return { url, stop, kill };
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error('service process did not start');
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A service process on the shared Redis under `prefix` and on `emulator`, plus `env`. */
function startServiceProcess(emulator: Emulator, prefix: string, env: Record<string, string>): Promise<ServiceProcess> {
  return startMainProcess({
    REDIS_URL: redisTestUrl,
    REDIS_PREFIX: prefix,
    ANTHROPIC_BASE_URL: emulator.anthropicBaseUrl,
    OPENAI_BASE_URL: emulator.openaiBaseUrl,
    TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl,
    ...env,
  });
}

/** Starts every process of `envs` at once; on any failure stops those that started, then throws. */
export async function startServiceProcesses(
  emulator: Emulator,
  prefix: string,
  envs: readonly Record<string, string>[],
): Promise<ServiceProcess[]> {
  const started = await Promise.allSettled(envs.map((env) => startServiceProcess(emulator, prefix, env)));
  const running = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const failure = started.find((result) => result.status === 'rejected');
  if (failure !== undefined) {
    await Promise.all(running.map((process) => process.stop()));
    throw failure.reason;
  }
  return running;
}

/** Polls `condition` every 5 ms until it holds or `withinMs` passed; returns how long it took. */
export async function waitFor(condition: () => boolean, withinMs: number): Promise<number> {
  const start = performance.now();
  while (!condition()) {
    if (performance.now() - start > withinMs) throw new Error(`condition not met within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return performance.now() - start;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** A redis-server of the test's own (it can be killed and restarted), without persistence. */
export interface OwnRedis {
  readonly url: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function ownRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  return {
    url,
    async start() {
      child = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        {
          stdio: 'ignore',
        },
      );
      const probe = new Redis(url, {
        lazyConnect: true,
        retryStrategy: () => 20,
        maxRetriesPerRequest: null,
      });
      probe.on('error', () => undefined);
      await probe.connect().catch(() => undefined);
      await probe.ping();
      probe.disconnect();
    },
    async stop() {
      const running = child;
      if (running === undefined || running.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        running.once('exit', () => resolve());
        running.kill('SIGKILL');
      });
      child = undefined;
    },
  };
}

/** Every key under `prefix` with its value as text (hashes as JSON), for the key-leak check. */
export async function dumpKeys(url: string, prefix: string): Promise<Map<string, string>> {
  const client = new Redis(url);
  const found = new Map<string, string>();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 100);
      cursor = next;
      for (const key of keys) {
        const type = await client.type(key);
        if (type === 'hash') found.set(key, JSON.stringify(await client.hgetall(key)));
        else if (type === 'string') found.set(key, (await client.get(key)) ?? '');
        else found.set(key, type);
      }
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
  return found;
}

/** What a fleet test file shares: one emulator for the file, and the instances each test starts. */
export interface FleetRig {
  readonly emulator: Emulator;
  /** Instances a test started: closed after each test. */
  readonly running: Instance[];
}

/**
 * Registers the file's hooks: the emulator starts before the file's tests and closes after them; after
 * each test its instances close and the emulator forgets its faults and counters.
 */
export function useFleetRig(): FleetRig {
  let emulator: Emulator | undefined;
  const running: Instance[] = [];
  beforeAll(async () => {
    emulator = await startEmulator();
  });
  afterAll(async () => {
    await emulator?.close();
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((instance) => instance.close()));
    emulator?.resetFaults();
    emulator?.resetStats();
  });
  return {
    get emulator() {
      if (emulator === undefined) throw new Error('The fleet rig starts its emulator in beforeAll');
      return emulator;
    },
    running,
  };
}
