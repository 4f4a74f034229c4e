/**
 * stryker.config.mjs names, per mutation group, the files to mutate and the tests that judge them
 * (docs/testing.md "Groups"). A name that matches nothing is silently skipped by Stryker: a group would
 * then mutate less, or be judged by fewer tests, than the table says. Every name must find a file.
 */
import { existsSync, globSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// A plain JavaScript config (no types): imported by a path the compiler does not resolve.
const configPath = '../../stryker.config.mjs';
const { mutationGroups } = (await import(configPath)) as { mutationGroups: Record<string, { mutate: string[]; tests: string[] }> };
const groups = Object.entries(mutationGroups);

describe('the mutation groups', () => {
  it.each(groups)('%s names only test files that exist', (_name, group) => {
    expect(group.tests.length).toBeGreaterThan(0);
    expect(group.tests.filter((file) => !existsSync(file))).toEqual([]);
  });

  it.each(groups)('%s mutates files that exist: every pattern matches one', (_name, group) => {
    // A line range (`file:12-40`) names its file; a `!` pattern only narrows the others.
    const patterns = group.mutate.filter((pattern) => !pattern.startsWith('!')).map((pattern) => pattern.replace(/:\d+-\d+$/u, ''));
    expect(patterns.filter((pattern) => globSync(pattern).length === 0)).toEqual([]);
  });
});
