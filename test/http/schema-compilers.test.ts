/**
 * Every route's schemas are zod's (fastify-type-provider-zod), so the app hands Fastify zod's compilers
 * as its defaults and Fastify never loads its own, ajv and fast-json-stringify's compiler (heap
 * spent for nothing; Fastify's error serializer still uses fast-json-stringify's small runtime). Checked
 * in a fresh process (its own module cache) that starts the whole service and answers a
 * validated route.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

const child = `
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const { loadConfig } = await import('./src/config.ts');
const { startService } = await import('./src/http/service.ts');
const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent' });
const service = await startService(config, { log: { level: 'silent' } });
const invalid = await fetch(service.url + '/v1/generate', { method: 'POST', headers: { 'content-type': 'application/json', 'x-gpt-key': 'test-fake-key-0001' }, body: JSON.stringify({ task: 'essay', text: 'x' }) });
const loaded = Object.keys(require.cache).filter((path) => /node_modules\\/(ajv\\/|@fastify\\/ajv-compiler\\/|@fastify\\/fast-json-stringify-compiler\\/|fast-json-stringify\\/index\\.js)/.test(path));
await service.close();
console.log(JSON.stringify({ invalidStatus: invalid.status, loaded }));
`;

describe("Fastify's own schema compilers", () => {
  it('are never loaded: zod validates (a bad body is still a 400)', { timeout: 60_000 }, () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', child], {
      cwd: root,
      encoding: 'utf8',
      timeout: 55_000,
    });
    expect(result.stderr).toBe('');
    const report = JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') as {
      invalidStatus: number;
      loaded: string[];
    };
    expect(report.invalidStatus).toBe(400);
    expect(report.loaded).toEqual([]);
  });
});
