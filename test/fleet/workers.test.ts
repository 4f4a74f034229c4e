import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { freePort, redisTestUrl, testKey, uniquePrefix } from './support.js';

/** `WORKERS=2 npm start`: node:cluster workers on one port, sharing breakers through REDIS_URL. */
let emulator: Emulator;
let primary: ChildProcess;
let url: string;

/** One request on a fresh connection, so the cluster may hand it to any worker. */
function call(
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = httpRequest(
      `${url}${path}`,
      {
        method,
        agent: false,
        headers: {
          connection: 'close',
          'x-claude-key': testKey,
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, json: JSON.parse(text) as unknown }),
        );
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

beforeAll(async () => {
  emulator = await startEmulator();
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  primary = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: {
      ...process.env,
      WORKERS: '2',
      PORT: String(port),
      HOST: '127.0.0.1',
      REDIS_URL: redisTestUrl,
      REDIS_PREFIX: uniquePrefix('workers'),
      ANTHROPIC_BASE_URL: emulator.anthropicBaseUrl,
      OPENAI_BASE_URL: emulator.openaiBaseUrl,
      TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl,
      BREAKER_FAILURE_THRESHOLD: '3',
      // One test key, the same fingerprint on both workers (the fleet's salt): a quorum of one opens.
      BREAKER_MIN_DISTINCT_KEYS: '1',
      RETRY_MAX: '0',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  // Both workers listening: two different pids have answered /healthz.
  const pids = new Set<number>();
  const deadline = Date.now() + 50_000; // tsx compiles on start: slow on a loaded machine
  while (pids.size < 2) {
    try {
      const { json } = await call('GET', '/healthz');
      pids.add((json as { pid: number }).pid);
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error(`workers did not start (pids seen: ${[...pids].join(', ')})`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}, 120_000);

afterAll(async () => {
  if (primary.exitCode === null) {
    await new Promise<void>((resolve) => {
      primary.once('exit', () => resolve());
      primary.kill('SIGKILL');
    });
  }
  await emulator.close();
});

describe('WORKERS=2 with one REDIS_URL', () => {
  it('serves from two worker processes that share every breaker', async () => {
    emulator.setFault({ provider: 'claude', fault: 'http500' });
    const generate = {
      task: 'notes',
      text: 'Cells divide by mitosis.',
      providers: ['claude'],
      options: { lang: 'en' },
    };
    for (let i = 0; i < 3; i += 1) expect((await call('POST', '/v1/generate', generate)).status).toBe(503);
    expect(emulator.stats().claude.calls).toBe(3);

    // Every worker reads the breaker open, whichever got the failures. The other worker hears of it
    // through pub/sub (milliseconds) or, if that message is late or lost, its once-a-second re-read
    // (docs/fleet.md): on a loaded machine the first read may come before either, so the rule is that
    // within a few re-read periods every worker reads open, and from then on keeps reading it.
    // (Both endpoints in one loop would pair each with the same worker under round-robin.)
    const pids = new Set<number>();
    for (let i = 0; i < 6; i += 1) pids.add(((await call('GET', '/healthz')).json as { pid: number }).pid);
    expect(pids.size).toBe(2);
    const claudeState = async (): Promise<string | undefined> => {
      const { json } = await call('GET', '/v1/providers');
      const providers = (json as { providers: { id: string; breaker: { state: string } }[] }).providers;
      return providers.find((p) => p.id === 'claude')?.breaker.state;
    };
    const settleBy = Date.now() + 5_000;
    let openInARow = 0;
    while (openInARow < 4 && Date.now() < settleBy) {
      openInARow = (await claudeState()) === 'open' ? openInARow + 1 : 0;
      if (openInARow === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (let i = 0; i < 10; i += 1) expect(await claudeState()).toBe('open');
    // Refused without touching the provider, on whichever worker answers.
    for (let i = 0; i < 4; i += 1) expect((await call('POST', '/v1/generate', generate)).status).toBe(503);
    expect(emulator.stats().claude.calls).toBe(3);
  });

  it('stops on SIGTERM: the workers finish and the primary exits 0', async () => {
    const exited = new Promise<number | null>((resolve) => primary.once('exit', (code) => resolve(code)));
    primary.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
