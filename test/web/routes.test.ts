import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startService } from '../../src/http/service.js';
import type { Service } from '../../src/http/service.js';
import { findProjectRoot, webPaths } from '../../src/web/assets.js';
import { parseStateDiagram } from '../../src/web/machine-diagram.js';
import type { DiagramState, MachineDiagram } from '../../src/web/machine-diagram.js';
import type { DrawnMachine } from '../../src/web/machine-layout.js';
import { readEvents, startDemo } from './support.js';
import type { Demo } from './support.js';

const flatPaths = (states: readonly DiagramState[]): string[] => states.flatMap((state) => [state.path, ...flatPaths(state.children)]);

describe('web routes (demo mode, real emulator)', () => {
  let demo: Demo;
  beforeAll(async () => {
    demo = await startDemo({
      BREAKER_FAILURE_THRESHOLD: '1',
      BREAKER_MIN_DISTINCT_KEYS: '1',
      RETRY_MAX: '0',
      BREAKER_RECOVERY_MS: '60000',
    });
  });
  afterAll(async () => {
    await demo?.close();
  });

  it('serves the page with a same-origin-only content security policy', async () => {
    const response = await fetch(`${demo.url}/`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(response.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await response.text();
    expect(html).toContain('<script type="module" src="/web/app.js"></script>');
    expect(html).not.toMatch(/https?:\/\//);
  });

  it('serves the listed assets and nothing else from disk', async () => {
    const script = await fetch(`${demo.url}/web/app.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(await script.text()).not.toMatch(/from ['"]https?:/);
    expect((await fetch(`${demo.url}/web/style.css`)).status).toBe(200);
    for (const path of ['/web/..%2fassets.ts', '/web/%2e%2e%2f%2e%2e%2fpackage.json', '/web/index.ts', '/web/README.md']) {
      const response = await fetch(`${demo.url}${path}`);
      expect(response.status, path).toBe(404);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    }
  });

  it('answers 404 NOT_FOUND for names that live on Object.prototype (a plain-object lookup would find them)', async () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']) {
      const response = await fetch(`${demo.url}/web/${name}`);
      expect(response.status, name).toBe(404);
      expect(((await response.json()) as { error: { code: string } }).error.code, name).toBe('NOT_FOUND');
    }
  });

  it('gives the page every generated machine diagram, titled and laid out', async () => {
    const response = await fetch(`${demo.url}/web/machines.json`);
    expect(response.headers.get('cache-control')).toBe('no-cache');
    const body = (await response.json()) as { machines: (MachineDiagram & { title: string; drawing: DrawnMachine })[] };
    const names = body.machines.map((machine) => machine.name);
    const files = (await readdir(webPaths().machinesDirectory)).filter((file) => file.endsWith('.mmd')).map((file) => file.slice(0, -4));
    expect([...names].sort()).toEqual([...files].sort());
    expect(names).toEqual(expect.arrayContaining(['gateway', 'provider', 'breaker', 'fallback']));
    // In the README's order, with its titles.
    const readme = await readFile(join(webPaths().machinesDirectory, 'README.md'), 'utf8');
    const listed = [...readme.matchAll(/\[([a-z0-9-]+)\.mmd\]/g)].map((match) => match[1]);
    expect(names).toEqual(listed.filter((name) => names.includes(name!)));
    expect(readme).toContain(`| ${body.machines.find((machine) => machine.name === 'breaker')?.title} |`);
    for (const machine of body.machines) {
      expect(machine.drawing.name).toBe(machine.name);
      expect(machine.drawing.width).toBeGreaterThan(0);
      expect(machine.drawing.states.map((state) => state.path).sort()).toEqual(flatPaths(machine.states).sort());
    }
    const breaker = body.machines.find((machine) => machine.name === 'breaker');
    const paths = JSON.stringify(breaker?.states);
    for (const state of ['closed', 'open', 'forcedOpen', 'halfOpen.awaitingProbe', 'halfOpen.probing']) expect(paths).toContain(`"path":"${state}"`);
    expect(breaker?.edges).toContainEqual({ from: 'closed', to: 'open', label: 'call.failed [isQuorumReached]' });
    expect(breaker?.edges).toContainEqual({ from: '*', to: 'forcedOpen', label: 'breaker.forceOpen' });
  });

  it('prefills the emulator keys in demo mode', async () => {
    const config = (await (await fetch(`${demo.url}/demo/config`)).json()) as { demo: boolean; keys: Record<string, string> };
    expect(config.demo).toBe(true);
    expect(Object.keys(config.keys).sort()).toEqual(['claude', 'gpt', 'timelygpt']);
  });

  it('streams breaker state: a snapshot at once, a transition when a breaker opens', async () => {
    const first = await readEvents(`${demo.url}/v1/providers/events`, (event) => event.event === 'snapshot');
    const snapshot = first.at(-1)?.data as { providers: { id: string; breaker: { state: string } }[] };
    expect(snapshot.providers.map((provider) => provider.id)).toEqual(['claude', 'gpt', 'timelygpt']);
    expect(snapshot.providers.every((provider) => provider.breaker.state === 'closed')).toBe(true);

    const opened = readEvents(`${demo.url}/v1/providers/events`, (event) => event.event === 'transition');
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Through the page's proxy: GPT answers 500 until reset; one counted failure opens it (threshold 1).
    const fault = await fetch(`${demo.url}/demo/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ provider: 'gpt', fault: 'http500' }),
    });
    expect(fault.status).toBe(200);
    const generated = await fetch(`${demo.url}/v1/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gpt-key': 'demo-gpt-key-0001', 'x-claude-key': 'demo-claude-key-0001' },
      body: JSON.stringify({ task: 'notes', text: 'Photosynthesis turns light into chemical energy.', providers: ['gpt', 'claude'], options: { lang: 'en' } }),
    });
    expect(generated.status).toBe(200);
    const events = await opened;
    expect(events.at(-1)?.data).toMatchObject({ provider: 'gpt', from: 'closed', to: 'open' });
    expect((await fetch(`${demo.url}/demo/faults`, { method: 'DELETE' })).status).toBe(200);
  });

  it('refuses a fault the panel does not offer', async () => {
    const response = await fetch(`${demo.url}/demo/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ provider: 'claude', fault: 'respond', status: 200 }),
    });
    expect(response.status).toBe(400);
  });
});

describe('web routes outside demo mode', () => {
  let service: Service;
  beforeAll(async () => {
    service = await startService(loadConfig({ LOG_LEVEL: 'silent', PORT: '0', HOST: '127.0.0.1' }), { log: { level: 'silent' } });
  });
  afterAll(async () => {
    await service?.close();
  });

  it('has no fault proxy and no prefilled keys', async () => {
    expect(await (await fetch(`${service.url}/demo/config`)).json()).toEqual({ demo: false });
    const response = await fetch(`${service.url}/demo/faults`, { method: 'DELETE' });
    expect(response.status).toBe(404);
  });

  it('ends open breaker streams on shutdown instead of waiting for them', async () => {
    const response = await fetch(`${service.url}/v1/providers/events`);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const started = Date.now();
    await service.close();
    expect(Date.now() - started).toBeLessThan(3000);
    await response.body?.cancel().catch(() => undefined);
  });
});

describe('page files', () => {
  it('are found beside the module: src/web/public and docs/machines from the sources (dist/ in the build: test/packaging)', async () => {
    const root = findProjectRoot();
    expect(findProjectRoot(join(root, 'dist', 'src', 'web'))).toBe(root);
    const paths = webPaths();
    expect(paths).toEqual({ publicDirectory: join(root, 'src', 'web', 'public'), machinesDirectory: join(root, 'docs', 'machines') });
    await expect(readFile(join(paths.publicDirectory, 'index.html'), 'utf8')).resolves.toContain('study-helper');
  });

  it('parse every generated diagram', async () => {
    const { machinesDirectory } = webPaths();
    const text = await readFile(join(machinesDirectory, 'fallback.mmd'), 'utf8');
    const diagram = parseStateDiagram('fallback', text);
    expect(diagram.states.find((state) => state.name === 'budgeting')?.initial).toBe(true);
    expect(diagram.states.filter((state) => state.final).map((state) => state.name)).toEqual(['succeeded', 'failed', 'overBudget', 'aborted']);
    expect(diagram.edges).toContainEqual({
      from: 'calling',
      to: 'succeeded',
      label: 'provider.succeeded [(isCurrentCall and isAnswerValid)]',
    });
  });
});
