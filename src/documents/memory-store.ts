import { LRUCache } from 'lru-cache';
import type { DocumentStore, StoredDocument } from './types.js';

export interface MemoryDocumentStoreOptions {
  /** A document is gone this many seconds after it was put. */
  ttlSeconds: number;
  /** Bound on documents held; past it the least recently used one is dropped. Default 1000. */
  maxDocuments?: number;
}

/**
 * An in-process document store: bounded (LRU) with a TTL per document. Time is read from `Date.now()`
 * so that fake timers drive expiry in tests. One process only; a Redis store shares documents
 * between instances.
 */
export function createMemoryDocumentStore(options: MemoryDocumentStoreOptions): DocumentStore {
  if (!(options.ttlSeconds > 0)) throw new Error(`ttlSeconds must be positive, got ${options.ttlSeconds}`);
  const cache = new LRUCache<string, StoredDocument>({
    max: options.maxDocuments ?? 1000,
    ttl: options.ttlSeconds * 1000,
    // Expiry is checked on read (no timers to clean up); an expired entry is never returned.
    ttlAutopurge: false,
    ttlResolution: 0,
    perf: { now: () => Date.now() },
  });
  return {
    async put(doc) {
      cache.set(doc.documentId, copyOf(doc));
    },
    async get(documentId) {
      const doc = cache.get(documentId);
      return doc === undefined ? undefined : copyOf(doc);
    },
    async close() {
      cache.clear();
    },
  };
}

/** Callers get their own copy: mutating an answer must not change the stored document. */
function copyOf(doc: StoredDocument): StoredDocument {
  return { ...doc, warnings: [...doc.warnings] };
}
