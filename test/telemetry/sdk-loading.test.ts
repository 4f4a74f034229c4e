/**
 * Tracing off costs nothing: without an OTLP endpoint the service (`npm start`, the compiled process)
 * never loads the OpenTelemetry SDK, its exporters or `@fastify/otel`, even while it serves requests.
 * With an endpoint it does (which also shows the recording sees them). The process records every module
 * it loads through Node's module hooks (fixtures/record-loads.mjs).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const recorder = fileURLToPath(new URL('./fixtures/record-loads.mjs', import.meta.url));

/** The tracing SDK's own modules (the OpenTelemetry API alone is loaded by the Anthropic SDK anyway). */
const sdkModules = [
  /\/@opentelemetry\/sdk-trace-/,
  /\/@opentelemetry\/exporter-trace-otlp-/,
  /\/@fastify\/otel\//,
  /\/dist\/src\/telemetry\/sdk\.js$/,
];

/** Starts the service with `env`, asks /healthz and /v1/providers, stops it; returns the modules it loaded. */
async function modulesLoaded(env: NodeJS.ProcessEnv): Promise<string[]> {
  const file = join(mkdtempSync(join(tmpdir(), 'study-helper-loads-')), 'loaded.txt');
  const child = spawn(process.execPath, ['--import', recorder, `${root}dist/src/main.js`], {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      JOBS_DIR: 'off',
      LOADED_MODULES_FILE: file,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    await expect
      .poll(() => /Server listening at (http:\/\/[\d.:]+)/.exec(stdout)?.[1], {
        timeout: 45_000,
        interval: 20,
      })
      .toBeDefined();
    const url = /Server listening at (http:\/\/[\d.:]+)/.exec(stdout)?.[1];
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/v1/providers`)).status).toBe(200);
  } finally {
    child.kill('SIGTERM');
  }
  expect(await exited, stderr + stdout.slice(-2000)).toBe(0);
  return readFileSync(file, 'utf8').split('\n');
}

describe('the tracing SDK is loaded only when traces are exported', () => {
  it('is never loaded without an OTLP endpoint', { timeout: 60_000 }, async () => {
    const loaded = await modulesLoaded({});
    expect(loaded.some((url) => url.includes('/dist/src/http/app.js'))).toBe(true);
    expect(loaded.filter((url) => sdkModules.some((pattern) => pattern.test(url)))).toEqual([]);
  });

  it('is loaded with one', { timeout: 60_000 }, async () => {
    // Nothing listens there: the batch is simply not delivered when the service stops.
    const loaded = await modulesLoaded({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
      OTEL_EXPORTER_OTLP_TIMEOUT: '200',
    });
    for (const pattern of sdkModules)
      expect(
        loaded.some((url) => pattern.test(url)),
        String(pattern),
      ).toBe(true);
  });
});
