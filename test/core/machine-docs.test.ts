import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot, renderMachineDocs } from '../../scripts/generate-machine-docs.js';

describe('generated machine docs (npm run docs:machines)', async () => {
  const files = await renderMachineDocs();

  it('documents the core machines', () => {
    for (const name of ['gateway', 'provider', 'breaker', 'fallback']) {
      expect(files.has(`docs/machines/${name}.json`)).toBe(true);
      expect(files.has(`docs/machines/${name}.mmd`)).toBe(true);
    }
  });

  it.each([...files.keys()])('%s is committed and up to date (run npm run docs:machines)', (path) => {
    expect(readFileSync(join(projectRoot, path), 'utf8')).toBe(files.get(path));
  });

  it('writes plain JSON data, without functions', () => {
    for (const [path, content] of files) {
      if (!path.endsWith('.json')) continue;
      expect(JSON.stringify(JSON.parse(content), null, 2)).toBe(content.trimEnd());
    }
  });

  it('draws guards, delayed and eventless transitions', () => {
    const breaker = files.get('docs/machines/breaker.mmd') ?? '';
    expect(breaker).toContain('closed --> open : call.failed [isQuorumReached]');
    expect(breaker).toContain('open --> halfOpen : after recoveryTimeout');
    expect(breaker).toContain('halfOpen_probing --> halfOpen_awaitingProbe : call.ignored [isProbeResult]');
    const fallback = files.get('docs/machines/fallback.mmd') ?? '';
    expect(fallback).toContain('deciding --> backingOff : always [isRetryDue]');
    expect(fallback).toContain('backingOff --> calling : after retryBackoff');
    expect(fallback).toContain('failed --> [*]');
  });

  it('renders the same files on every run', async () => {
    expect(await renderMachineDocs()).toEqual(files);
  });
});
