import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryDocumentStore, type StoredDocument } from '../../src/documents/index.js';

function documentNamed(documentId: string): StoredDocument {
  return {
    documentId,
    sha256: 'a'.repeat(64),
    fileName: `${documentId}.pdf`,
    pageCount: 1,
    pagesUsed: 1,
    wordCount: 2,
    charCount: 10,
    warnings: [],
    text: 'hello world',
    createdAt: Date.now(),
  };
}

describe('createMemoryDocumentStore', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('returns a document it holds and undefined for an unknown id', async () => {
    const store = createMemoryDocumentStore({ ttlSeconds: 60 });
    await store.put(documentNamed('doc-1'));
    expect((await store.get('doc-1'))?.text).toBe('hello world');
    expect(await store.get('doc-unknown')).toBeUndefined();
  });

  it('forgets a document once its TTL has passed', async () => {
    const store = createMemoryDocumentStore({ ttlSeconds: 7200 });
    await store.put(documentNamed('doc-1'));
    vi.advanceTimersByTime(7200 * 1000 - 1);
    expect(await store.get('doc-1')).toBeDefined();
    vi.advanceTimersByTime(2);
    expect(await store.get('doc-1')).toBeUndefined();
  });

  it('counts the TTL from each put, not from the store creation', async () => {
    const store = createMemoryDocumentStore({ ttlSeconds: 10 });
    await store.put(documentNamed('early'));
    vi.advanceTimersByTime(6000);
    await store.put(documentNamed('late'));
    vi.advanceTimersByTime(6000);
    expect(await store.get('early')).toBeUndefined();
    expect(await store.get('late')).toBeDefined();
  });

  it('holds at most maxDocuments, dropping the least recently used', async () => {
    const store = createMemoryDocumentStore({ ttlSeconds: 60, maxDocuments: 2 });
    await store.put(documentNamed('a'));
    await store.put(documentNamed('b'));
    await store.get('a');
    await store.put(documentNamed('c'));
    expect(await store.get('b')).toBeUndefined();
    expect(await store.get('a')).toBeDefined();
    expect(await store.get('c')).toBeDefined();
  });

  it('hands out copies: changing an answer does not change the stored document', async () => {
    const store = createMemoryDocumentStore({ ttlSeconds: 60 });
    await store.put(documentNamed('doc-1'));
    const first = await store.get('doc-1');
    first?.warnings.push('changed');
    expect((await store.get('doc-1'))?.warnings).toEqual([]);
  });

  it('refuses a TTL that is not positive', () => {
    expect(() => createMemoryDocumentStore({ ttlSeconds: 0 })).toThrow(/ttlSeconds/);
  });
});
