import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { keyDigest } from '../security/secret.js';
import type { ApiKey } from '../machines/types.js';
import type { Validation } from '../actors/types.js';
import type { ProviderId, Task, TokenUsage } from '../providers/index.js';
import type { NotesResult, StudyLang } from './schemas.js';

/**
 * Finished study results, so the same document is not paid for twice: a bounded LRU (lru-cache)
 * with a TTL, keyed by what determines the result — the document, the task, the language and the
 * options (count, the grounding notes, the part budget) — and by who produced it: the provider that
 * answered and a salted digest of the key it was called with (`scope`). A hit therefore needs the
 * same provider key that paid for the result: a request holding other keys (or a refused one) never
 * gets it: no user is served a result another user's key paid for. A hit is re-validated by the caller's
 * check (schema + quality) before it is
 * served; one that fails is evicted.
 */

export interface CachedStudyResult {
  readonly task: Task;
  readonly value: unknown;
  readonly provider: ProviderId;
  readonly model: string;
  readonly fallback: boolean;
  readonly usage: TokenUsage;
  /** The notes concept ids the questions were grounded on (mcq/fill), for re-validation. */
  readonly conceptIds?: readonly string[];
  readonly storedAt: number;
}

export interface ResultCache {
  /** The entry if present, fresh, and accepted by `revalidate`; a rejected entry is evicted. */
  get<T>(key: string, revalidate: (entry: CachedStudyResult) => Validation<T>): { readonly entry: CachedStudyResult; readonly value: T } | undefined;
  set(key: string, entry: Omit<CachedStudyResult, 'storedAt'>): void;
  delete(key: string): void;
  readonly size: number;
  clear(): void;
}

export interface ResultCacheOptions {
  /** Most entries kept (least recently used go first). Default 500. */
  readonly maxEntries?: number;
  /** Entry lifetime. Default one hour. */
  readonly ttlMs?: number;
  /** Monotonic clock in ms, for tests (must be > 0: lru-cache reads a start time of 0 as unset). Default `performance.now`. */
  readonly now?: () => number;
}

export function createResultCache(options: ResultCacheOptions = {}): ResultCache {
  const now = options.now ?? (() => performance.now());
  const cache = new LRUCache<string, CachedStudyResult>({
    max: Math.max(1, options.maxEntries ?? 500),
    ttl: Math.max(1, options.ttlMs ?? 3_600_000),
    ttlResolution: 0,
    perf: { now },
  });
  return {
    get(key, revalidate) {
      const entry = cache.get(key);
      if (entry === undefined) return undefined;
      const checked = revalidate(entry);
      if (!checked.ok) {
        cache.delete(key);
        return undefined;
      }
      return { entry, value: checked.value };
    },
    set(key, entry) {
      cache.set(key, { ...entry, storedAt: Date.now() });
    },
    delete(key) {
      cache.delete(key);
    },
    get size() {
      return cache.size;
    },
    clear() {
      cache.clear();
    },
  };
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** JSON with object keys sorted, so equal values hash equally whatever their key order. */
function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${stableJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export interface StudyCacheKeyParts {
  /** Who produced the result: `studyCacheScope(provider, key)` of the provider that answered. */
  readonly scope: string;
  /** The document's identity: its sha256 (uploads) or a hash of the text. */
  readonly source: string;
  readonly task: Task;
  readonly lang: StudyLang;
  readonly count?: number;
  readonly notes?: NotesResult;
  readonly budgetTokens?: number;
}

/**
 * The scope of a result produced by `provider` called with `apiKey`: the provider and a salted digest
 * of the key (src/security/secret.ts), never the key.
 */
export function studyCacheScope(provider: ProviderId, apiKey: ApiKey): string {
  return `${provider}:${keyDigest(apiKey.reveal())}`;
}

/** The cache key of one result: a sha256 over the parts that determine it and its scope. */
export function studyCacheKey(parts: StudyCacheKeyParts): string {
  return sha256Hex(
    stableJson({
      v: 2,
      scope: parts.scope,
      source: parts.source,
      task: parts.task,
      lang: parts.lang,
      count: parts.task === 'notes' ? undefined : parts.count,
      notes: parts.notes === undefined || parts.task === 'notes' ? undefined : sha256Hex(stableJson(parts.notes)),
      budgetTokens: parts.budgetTokens,
    }),
  );
}
