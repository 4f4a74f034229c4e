/**
 * `@anthropic-ai/sdk` is imported at start-up when the default provider order names Claude (it does by
 * default): imported on a request, its module evaluation stalled every other request in flight. Otherwise it
 * is imported on first use (src/providers/claude-sdk.ts): a service whose requests never name Claude never
 * loads it, and a request naming Claude has it loaded before its first provider call (so the import never runs
 * inside that call's deadline).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { anthropicSdkIfLoaded } from '../../src/providers/claude-sdk.js';
import { generateStudyTask } from '../../src/study/index.js';
import { Secret } from '../../src/security/secret.js';
import { createFakeGateway, markerResponder } from '../study/fake-gateway.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * A fresh Node process (its own module cache) that records every module URL resolved under
 * node_modules/@anthropic-ai/ while it starts the whole service, serves a gpt-only request through
 * the emulator, then serves a Claude one; prints the counts after each phase as JSON.
 */
const child = `
import { register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';
const { port1, port2 } = new MessageChannel();
const resolved = [];
port1.on('message', (url) => resolved.push(url));
port1.unref();
register('data:text/javascript,' + encodeURIComponent(\`
  let port;
  export function initialize(data) { port = data.port; }
  export async function resolve(specifier, context, next) {
    const result = await next(specifier, context);
    if (result.url.includes('/node_modules/@anthropic-ai/')) port.postMessage(result.url);
    return result;
  }\`), { data: { port: port2 }, transferList: [port2] });
const settle = () => new Promise((done) => setTimeout(done, 50));
const { startEmulator } = await import('./src/emulator/index.ts');
const { loadConfig } = await import('./src/config.ts');
const { startService } = await import('./src/http/service.ts');
const emulator = await startEmulator({ slowMs: 0 });
const order = process.env.TEST_DEFAULT_ORDER === undefined ? {} : { PROVIDERS_DEFAULT_ORDER: process.env.TEST_DEFAULT_ORDER };
const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', OPENAI_BASE_URL: emulator.openaiBaseUrl, ANTHROPIC_BASE_URL: emulator.anthropicBaseUrl, TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl, ...order });
const service = await startService(config, { log: { level: 'silent' } });
const counts = {};
const ask = async (provider, header) => {
  const response = await fetch(service.url + '/v1/generate', { method: 'POST', headers: { 'content-type': 'application/json', [header]: 'test-fake-key-0001' }, body: JSON.stringify({ task: 'notes', text: 'Photosynthesis turns light into chemical energy in the chloroplast.', providers: [provider], options: { lang: 'en' } }) });
  return response.status;
};
await settle();
counts.started = resolved.length;
counts.gptStatus = await ask('gpt', 'x-gpt-key');
await settle();
counts.afterGpt = resolved.length;
counts.claudeStatus = await ask('claude', 'x-claude-key');
await settle();
counts.afterClaude = resolved.length;
await service.close();
await emulator.close();
console.log(JSON.stringify(counts));
`;

/** Runs the child with `PROVIDERS_DEFAULT_ORDER` set to `order` (unset: the default, which names Claude first). */
function serveInChild(order: string | undefined): Record<string, number> {
  const env = { ...process.env };
  delete env['PROVIDERS_DEFAULT_ORDER'];
  if (order !== undefined) env['TEST_DEFAULT_ORDER'] = order;
  const result = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', child], {
    cwd: root,
    encoding: 'utf8',
    timeout: 55_000,
    env,
  });
  expect(result.stderr).toBe('');
  return JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, number>;
}

describe('the Anthropic SDK is loaded at start-up when the default order names Claude, else on first use', () => {
  it('a service on the default order has it loaded before it listens', { timeout: 60_000 }, () => {
    const counts = serveInChild(undefined);
    expect(counts['started']).toBeGreaterThan(0);
    expect(counts).toMatchObject({ gptStatus: 200, claudeStatus: 200 });
    // Nothing more is loaded on a request.
    expect(counts['afterClaude']).toBe(counts['started']);
  });

  it(
    'a service whose default order leaves Claude out, serving gpt-only requests, never loads it; the first Claude request does, and succeeds',
    { timeout: 60_000 },
    () => {
      const counts = serveInChild('gpt,timelygpt');
      expect(counts).toMatchObject({ started: 0, gptStatus: 200, afterGpt: 0, claudeStatus: 200 });
      expect(counts['afterClaude']).toBeGreaterThan(0);
    },
  );

  it('a study run naming Claude has the SDK loaded before its first gateway call', async () => {
    expect(anthropicSdkIfLoaded()).toBeUndefined();
    const loadedAtCall: boolean[] = [];
    const gateway = createFakeGateway((request, call) => {
      loadedAtCall.push(anthropicSdkIfLoaded() !== undefined);
      return markerResponder(request, call);
    });
    const outcome = await generateStudyTask(gateway, {
      task: 'notes',
      text: 'Photosynthesis turns light into chemical energy in the chloroplast.',
      lang: 'en',
      chain: [{ provider: 'claude', apiKey: new Secret('test-fake-key-0001') }],
    });
    expect(outcome.status).toBe('succeeded');
    expect(loadedAtCall).toEqual([true]);
  });
});
