/**
 * `npm start` as an operator runs it: compiled JavaScript (dist/, built by `npm install` / `npm run build`),
 * answering /healthz once it listens, refusing a bad configuration by name, and exiting cleanly on SIGTERM.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const main = `${root}dist/src/main.js`;
const scripts = (JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts;

/** The npm script's command line (`node <flags> <entry>`), run with this Node so no npm sits in between. */
function run(env: NodeJS.ProcessEnv, script: 'start' | 'demo' = 'start') {
  const [, ...args] = (scripts[script] ?? '').split(' ');
  const child = spawn(process.execPath, args, { cwd: root, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, out: () => stdout, err: () => stderr };
}

describe('npm start (node dist/src/main.js)', () => {
  it('is built', () => {
    expect(existsSync(main), 'run `npm run build` first (npm install does it)').toBe(true);
  });

  // How fast it starts is a benchmark's business (a loaded machine takes 9 s where an idle one takes 1.5 s);
  // here a generous bound only tells a hang from a start.
  it('answers /healthz once it listens and exits 0 on SIGTERM', { timeout: 60_000 }, async () => {
    const service = run({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' });
    try {
      await expect.poll(() => /Server listening at (http:\/\/[\d.:]+)/.exec(service.out())?.[1], { timeout: 45_000, interval: 20 }).toBeDefined();
      const url = /Server listening at (http:\/\/[\d.:]+)/.exec(service.out())?.[1];
      const response = await fetch(`${url}/healthz`);
      expect(response.status).toBe(200);
    } finally {
      service.child.kill('SIGTERM');
    }
    expect(await service.exited).toBe(0);
    expect(service.out()).toContain('shutting down');
  });

  it('refuses a bad configuration with a message naming the variable and exit code 1', async () => {
    const service = run({ BREAKER_FAILURE_THRESHOLD: 'many' });
    expect(await service.exited).toBe(1);
    expect(service.err()).toContain('BREAKER_FAILURE_THRESHOLD');
    expect(service.err().split('\n').filter((line) => line.trim() !== '')).toHaveLength(1);
  });
});

describe('npm run demo (node dist/src/demo.js)', () => {
  // The README's promise: with the page's one set of keys, a provider's breaker opens after 3 failures.
  it('opens a provider breaker after 3 failures of the one demo key, as the README says', { timeout: 60_000 }, async () => {
    const service = run({ PORT: '0', HOST: '127.0.0.1' }, 'demo');
    try {
      const printed = (pattern: RegExp) => pattern.exec(service.out())?.[1];
      await expect.poll(() => printed(/Providers emulated at (http:\/\/[\d.:]+)/), { timeout: 45_000, interval: 20 }).toBeDefined();
      const emulatorUrl = printed(/Providers emulated at (http:\/\/[\d.:]+)/);
      const url = printed(/API docs: +(http:\/\/[\d.:]+)\/docs/);
      const fault = await fetch(`${emulatorUrl}/_emulator/faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ provider: 'claude', fault: 'http503' }),
      });
      expect(fault.status).toBe(200);
      for (let call = 0; call < 3; call += 1) {
        const response = await fetch(`${url}/v1/generate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-claude-key': 'demo-claude-key-0001', 'x-gpt-key': 'demo-gpt-key-0001' },
          body: JSON.stringify({ task: 'notes', text: `Photosynthesis stores light energy in glucose (${call}).`, options: { lang: 'en' } }),
        });
        expect(response.status).toBe(200);
        expect(((await response.json()) as { meta: { provider: string } }).meta.provider).toBe('gpt');
      }
      const providers = (await (await fetch(`${url}/v1/providers`)).json()) as { providers: { id: string; breaker: { state: string } }[] };
      expect(providers.providers.find((provider) => provider.id === 'claude')?.breaker.state).toBe('open');
    } finally {
      service.child.kill('SIGTERM');
    }
    await service.exited;
  });
});
