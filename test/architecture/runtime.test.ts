import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const manifest = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as {
  devDependencies: Record<string, string>;
};

describe('the runtime', () => {
  it('is the Node.js major the project ships as a devDependency (npm scripts run node_modules/.bin/node)', () => {
    const wanted = /(\d+)/.exec(manifest.devDependencies['node'] ?? '')?.[1];
    expect(wanted).toBe('24');
    expect(process.versions.node.split('.')[0]).toBe(wanted);
  });
});
