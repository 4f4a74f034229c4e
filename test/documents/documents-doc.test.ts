/**
 * docs/documents.md names every document store src/documents has (a doc that says a store
 * "can be added" while one exists misleads its reader). The stores are found in the source, not listed here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const sourceDirectory = new URL('../../src/documents/', import.meta.url);
const documentation = readFileSync(new URL('../../docs/documents.md', import.meta.url), 'utf8');

/** `export function create…DocumentStore(` in each src/documents/*-store.ts, with its file name. */
const stores = readdirSync(sourceDirectory)
  .filter((file) => file.endsWith('-store.ts'))
  .flatMap((file) =>
    [...readFileSync(new URL(file, sourceDirectory), 'utf8').matchAll(/^export function (create\w*DocumentStore)\(/gm)].map((match) => ({
      file,
      factory: match[1] ?? '',
    })),
  );

describe('docs/documents.md', () => {
  it('the source has the memory and the Redis document store', () => {
    expect(stores.map((store) => store.factory).sort()).toEqual(expect.arrayContaining(['createMemoryDocumentStore', 'createRedisDocumentStore']));
  });

  it.each(stores)('describes $factory ($file)', ({ file, factory }) => {
    expect(documentation).toContain(factory);
    expect(documentation).toContain(`src/documents/${file}`);
  });

  it('does not call an existing store something that "can be added"', () => {
    expect(documentation).not.toMatch(/can be added/i);
  });
});
