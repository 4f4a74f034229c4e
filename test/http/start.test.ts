/**
 * `npm start` as an operator runs it: compiled JavaScript (dist/, built by `npm install` / `npm run build`),
 * answering /healthz once it listens, refusing a bad configuration by name, and exiting cleanly on SIGTERM.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const main = `${root}dist/src/main.js`;

function run(env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, [main], { cwd: root, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
