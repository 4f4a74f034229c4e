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
  /** Tells when Redis is reachable again, so the documents held meanwhile are written back at once. */
  readonly onAvailability?: (listener: (up: boolean) => void) => () => void;
  /** Told each write's outcome: nothing when Redis took it, the error when not (unreachable, refusing). */
  readonly onWrite?: (error?: unknown) => void;
  /** Most documents held for writing back (default 1000, the memory store's bound); past it the oldest goes. */
  readonly maxPending?: number;
}

/**
 * Documents shared by every instance through Redis, each with a TTL. A document holds the extracted
 * text and what the client was told; never a key (keys are not part of `StoredDocument`). A read
 * that cannot reach Redis answers this process's own copy, or throws `DocumentStoreUnavailableError`
 * (HTTP 503 `DOCUMENT_STORE_UNAVAILABLE`): the document is not known to be missing.
 *
 * A document uploaded while Redis cannot take it (unreachable, or refusing writes) is kept in this
 * process (`fallback`) and held for writing back: as soon as Redis is reachable again, and before the next
 * upload's write, it is written with the TTL it has left, so the other instances find it afterwards.
 */
export function createRedisDocumentStore(options: RedisDocumentStoreOptions): DocumentStore {
  const { client, fallback } = options;
  const key = (documentId: string) => `${options.prefix}document:${documentId}`;
  const report = options.onWrite ?? (() => undefined);
  const maxPending = options.maxPending ?? 1000;
  const pending = new Map<string, StoredDocument>();
  let flushing: Promise<void> | undefined;

  /** Writes `doc` with the TTL it has left (none left: nothing to write). */
  async function write(doc: StoredDocument): Promise<void> {
    const leftSeconds = Math.ceil(options.ttlSeconds - (Date.now() - doc.createdAt) / 1000);
    // Expired while held: nothing left to store (and nothing left failing).
    if (leftSeconds <= 0) return report();
    await client.set(key(doc.documentId), JSON.stringify(doc), 'EX', Math.min(options.ttlSeconds, leftSeconds));
    report();
  }

  function flush(): Promise<void> {
    flushing ??= (async () => {
      try {
        for (const [documentId, doc] of [...pending]) {
          await write(doc);
          pending.delete(documentId);
        }
      } catch (error) {
        // Still not taken: the next return (or upload) tries again.
        report(error);
      } finally {
        flushing = undefined;
      }
    })();
    return flushing;
  }

  const unwatch = options.onAvailability?.((up) => {
    if (up) void flush();
  });

  return {
    async put(doc) {
      if (pending.size > 0) await flush();
      try {
        await write(doc);
      } catch (error) {
        report(error);
        await fallback.put(doc);
        pending.delete(doc.documentId);
        pending.set(doc.documentId, doc);
        for (const oldest of pending.keys()) {
          if (pending.size <= maxPending) break;
          pending.delete(oldest);
        }
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
      unwatch?.();
      // A last attempt to write back what is held.
      if (pending.size > 0) await flush();
      pending.clear();
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
