import type { Redis } from 'ioredis';
import type { DocumentStore, StoredDocument } from './types.js';

export interface RedisDocumentStoreOptions {
  /** A connection with short command timeouts (src/fleet `createRedisStateStore(...).client`). */
  readonly client: Redis;
  /** REDIS_PREFIX; documents live under `<prefix>document:<id>`. */
  readonly prefix: string;
  /** A document is gone this many seconds after it was put (Redis `EX`). */
  readonly ttlSeconds: number;
  /**
   * Where documents go while Redis is unreachable, and where a miss looks next: an upload never
   * fails because Redis did (the memory store; such a document is seen by this process only).
   */
  readonly fallback: DocumentStore;
}

/**
 * Documents shared by every instance through Redis, each with a TTL. A document holds the extracted
 * text and what the client was told; never a key (keys are not part of `StoredDocument`).
 */
export function createRedisDocumentStore(options: RedisDocumentStoreOptions): DocumentStore {
  const { client, fallback } = options;
  const key = (documentId: string) => `${options.prefix}document:${documentId}`;
  return {
    async put(doc) {
      try {
        await client.set(key(doc.documentId), JSON.stringify(doc), 'EX', options.ttlSeconds);
      } catch {
        await fallback.put(doc);
      }
    },
    async get(documentId) {
      try {
        const text = await client.get(key(documentId));
        if (text !== null) return parseDocument(text);
      } catch {
        // Unreachable: this process's own documents are still there.
      }
      return fallback.get(documentId);
    },
    async close() {
      await fallback.close?.();
    },
  };
}

function parseDocument(text: string): StoredDocument | undefined {
  try {
    const value = JSON.parse(text) as StoredDocument;
    return typeof value.documentId === 'string' && typeof value.text === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}
