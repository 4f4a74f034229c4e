import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configVariableNames } from '../../src/config.js';

const documented = new Set(
  [...readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8').matchAll(/^\| `([A-Z_]+)` \|/gm)].map((match) => match[1]),
);

describe('docs/configuration.md', () => {
  it('documents every variable loadConfig reads, and no other', () => {
    // WORKERS is read by src/main.ts before loadConfig, to fork the workers that each load it.
    expect([...documented].sort()).toEqual([...configVariableNames, 'WORKERS'].sort());
  });
});
