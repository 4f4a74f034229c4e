import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DocumentStoreWriteError } from './errors.js';
import { createMemoryDocumentStore } from './memory-store.js';
import type { DocumentStore, StoredDocument } from './types.js';

export interface FileDocumentStoreOptions {
  /** The directory of the documents, one `<documentId>.json` each (created if missing). */
  directory: string;
  /** A document is gone this many seconds after it was put (DOCUMENT_TTL_SECONDS). */
  ttlSeconds: number;
  /** Most documents kept, on disk as in memory; past it the oldest file goes. Default 1000. */
  maxDocuments?: number;
  /** Told each file write's outcome: nothing when it succeeded, the error (ENOSPC, EROFS, EACCES…) when not. */
  onWrite?: (error?: unknown) => void;
  /** Writes a file (default `fs.writeFile`, mode 0600); tests inject a failing one (a full disk). */
  writeFile?: (path: string, text: string) => Promise<void>;
}

/** A document id that may name a file: what `randomUUID` makes. */
const fileSafeId = /^[A-Za-z0-9-]{1,64}$/u;

/**
 * Documents for one process without Redis that survive its restart (JOBS_DIR, docs/jobs.md "Without
 * Redis"): the in-process store (memory-store.ts) in front, each document also written to
 * `<directory>/<documentId>.json` and read from there when memory does not hold it (after a restart), so
 * a job found interrupted at start-up can be resumed on the text it was created on. Same TTL and bound as
 * the memory store; expired files are removed at start-up and when read. A document the disk refuses (full,
 * read-only) is not kept at all: `put` rejects with `DocumentStoreWriteError` (503 `STORAGE_UNAVAILABLE`),
 * never a 201 for a document a restart would not have.
 */
export function createFileDocumentStore(options: FileDocumentStoreOptions): DocumentStore {
  const { directory } = options;
  const ttlMs = options.ttlSeconds * 1000;
  const maxDocuments = options.maxDocuments ?? 1000;
  const memory = createMemoryDocumentStore({ ttlSeconds: options.ttlSeconds, maxDocuments });
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  // The files on disk by write time, oldest first (a Map keeps insertion order): the bound's order.
  const onDisk = new Map<string, number>();
  const found: { id: string; at: number }[] = [];
  for (const name of readdirSync(directory)) {
    const id = name.endsWith('.json') ? name.slice(0, -'.json'.length) : '';
    const at = fileSafeId.test(id) ? statSync(join(directory, name)).mtimeMs : 0;
    if (at + ttlMs <= Date.now()) rmSync(join(directory, name), { force: true });
    else found.push({ id, at });
  }
  for (const { id, at } of found.sort((a, b) => a.at - b.at)) onDisk.set(id, at);
  const fileOf = (documentId: string): string => join(directory, `${documentId}.json`);

  async function remove(documentId: string): Promise<void> {
    onDisk.delete(documentId);
    await rm(fileOf(documentId), { force: true });
  }

  const report = options.onWrite ?? (() => undefined);
  const writeText = options.writeFile ?? ((path: string, text: string) => writeFile(path, text, { mode: 0o600 }));

  return {
    async put(doc) {
      if (!fileSafeId.test(doc.documentId)) return memory.put(doc);
      const temporary = `${fileOf(doc.documentId)}.${process.pid}.tmp`;
      try {
        await writeText(temporary, JSON.stringify(doc));
        await rename(temporary, fileOf(doc.documentId));
      } catch (error) {
        await rm(temporary, { force: true }).catch(() => undefined);
        report(error);
        throw new DocumentStoreWriteError(error);
      }
      report();
      await memory.put(doc);
      onDisk.delete(doc.documentId);
      onDisk.set(doc.documentId, Date.now());
      for (const oldest of onDisk.keys()) {
        if (onDisk.size <= maxDocuments) break;
        await remove(oldest);
      }
    },
    async get(documentId) {
      const held = await memory.get(documentId);
      if (held !== undefined || !onDisk.has(documentId)) return held;
      try {
        const doc = JSON.parse(await readFile(fileOf(documentId), 'utf8')) as StoredDocument;
        if (doc.documentId !== documentId || !(doc.createdAt + ttlMs > Date.now())) {
          await remove(documentId);
          return undefined;
        }
        return doc;
      } catch {
        await remove(documentId);
        return undefined;
      }
    },
    async close() {
      await memory.close?.();
    },
  };
}
