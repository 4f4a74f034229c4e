import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configVariableNames } from '../../src/config.js';

const text = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

/** The variables named in the first column of the table under `## heading` (up to the next heading). */
function tableOf(heading: string): string[] {
  const start = text.indexOf(`\n## ${heading}\n`);
  expect(start, `docs/configuration.md has a "## ${heading}" section`).toBeGreaterThanOrEqual(0);
  const rest = text.slice(start + heading.length + 5);
  const section = rest.slice(0, rest.search(/\n## /u) === -1 ? undefined : rest.search(/\n## /u));
  return [...section.matchAll(/^\| `([A-Z_]+)` \|/gmu)].map((match) => match[1] ?? '');
}

describe('docs/configuration.md', () => {
  const operator = tableOf('Operator settings');
  const advanced = tableOf('Advanced');

  it('puts at most 25 variables in the first table, the operator settings', () => {
    expect(operator.length).toBeGreaterThan(0);
    expect(operator.length).toBeLessThanOrEqual(25);
  });

  it('documents every variable loadConfig reads in one of the two tables, once, and no other', () => {
    const both = [...operator, ...advanced];
    expect(new Set(both).size).toBe(both.length);
    // WORKERS is read by src/main.ts before loadConfig, to fork the workers that each load it.
    expect(both.sort()).toEqual([...configVariableNames, 'WORKERS'].sort());
  });

  it('gives every advanced variable a default and a case for touching it', () => {
    const start = text.indexOf('\n## Advanced\n');
    const rows = text.slice(start).split('\n## ')[1]?.split('\n').filter((line) => /^\| `[A-Z_]+` \|/u.test(line)) ?? [];
    expect(rows).toHaveLength(advanced.length);
    for (const row of rows) {
      const cells = row.split(' | ');
      expect(cells, row).toHaveLength(4);
      expect(cells.at(-1)?.replace(/\s*\|$/u, '').trim().length, row).toBeGreaterThan(3);
    }
  });
});
