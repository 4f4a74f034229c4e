import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { errorCodes } from '../../src/http/errors.js';

const documented = new Map<string, number>();
for (const line of readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8').split('\n')) {
  const match = /^\| `([A-Z_]+)` \| (\d{3}) \|/.exec(line);
  if (match?.[1] !== undefined && match[2] !== undefined) documented.set(match[1], Number(match[2]));
}

describe('docs/errors.md', () => {
  it('lists every code of the registry with its status', () => {
    const registry = Object.entries(errorCodes).map(([code, { status }]) => [code, status] as const);
    for (const [code, status] of registry) {
      expect(documented.get(code), `docs/errors.md row for ${code}`).toBe(status);
    }
  });

  it('lists no code the registry does not have', () => {
    expect([...documented.keys()].filter((code) => !Object.hasOwn(errorCodes, code))).toEqual([]);
  });
});
