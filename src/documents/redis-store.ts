import type { Redis } from 'ioredis';
import { DocumentStoreUnavailableError } from './errors.js';
import type { DocumentStore, StoredDocument } from './types.js';

/** Retry-After of a read that found Redis unreachable: about one reconnect of the client. */
const defaultRetryAfterSeconds = 2;

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
  /** The Retry-After hint when a read finds Redis unreachable (default 2 s). */
  readonly retryAfterSeconds?: number;
}

/**
 * Documents shared by every instance through Redis, each with a TTL. A document holds the extracted
 * text and what the client was told; never a key (keys are not part of `StoredDocument`). A read
 * that cannot reach Redis answers this process's own copy, or throws `DocumentStoreUnavailableError`
 * (HTTP 503 `DOCUMENT_STORE_UNAVAILABLE`): the document is not known to be missing.
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
      let text: string | null;
      try {
        text = await client.get(key(documentId));
      } catch {
        // Unreachable: this process's own documents are still there; any other may exist in Redis.
        const local = await fallback.get(documentId);
        if (local !== undefined) return local;
        throw new DocumentStoreUnavailableError(options.retryAfterSeconds ?? defaultRetryAfterSeconds);
      }
      if (text !== null) return parseDocument(text);
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
