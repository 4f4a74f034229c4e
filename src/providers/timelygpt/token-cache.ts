/**
 * TimelyGPT access tokens, cached per key for `ttlMs` (docs/providers.md: 55 minutes).
 * The cache key is a salted HMAC of the API key, never the key; the cache is LRU-bounded.
 * Concurrent requests with the same key share one exchange; different keys never wait on each other.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';

export interface TokenCacheOptions {
  readonly ttlMs: number;
  /** Most keys held at once (least recently used dropped first). Default 10,000. */
  readonly maxEntries?: number;
  /** Injected clock (tests). Default `Date.now`. */
  readonly now?: () => number;
}

interface CachedToken {
  readonly token: string;
  readonly expiresAt: number;
}

/** Exchanges a key for a token; receives its own signal, not any one caller's. */
export type TokenExchange = (signal: AbortSignal) => Promise<string>;

/** How long a shared exchange may take before it gives up for everyone waiting on it. */
const exchangeTimeoutMs = 30_000;

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/** `promise`, or a rejection as soon as `signal` fires (the promise itself keeps running for others). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

export class TokenCache {
  readonly #salt = randomBytes(32);
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #tokens: LRUCache<string, CachedToken>;
  readonly #inFlight = new Map<string, Promise<string>>();
  #exchanges = 0;

  constructor(options: TokenCacheOptions) {
    this.#ttlMs = options.ttlMs;
    this.#now = options.now ?? Date.now;
    this.#tokens = new LRUCache({ max: options.maxEntries ?? 10_000 });
  }

  #cacheKey(apiKey: string): string {
    return createHmac('sha256', this.#salt).update(apiKey).digest('base64url');
  }

  /** Token exchanges started so far (tests and metrics). */
  get exchanges(): number {
    return this.#exchanges;
  }

  get size(): number {
    return this.#tokens.size;
  }

  /** A valid cached token, or one from an exchange shared with every concurrent caller for the same key. */
  acquire(apiKey: string, exchange: TokenExchange, signal: AbortSignal): Promise<string> {
    const cacheKey = this.#cacheKey(apiKey);
    const cached = this.#tokens.get(cacheKey);
    if (cached && cached.expiresAt > this.#now()) return Promise.resolve(cached.token);
    if (cached) this.#tokens.delete(cacheKey);
    let shared = this.#inFlight.get(cacheKey);
    if (!shared) {
      this.#exchanges += 1;
      shared = exchange(AbortSignal.timeout(exchangeTimeoutMs))
        .then((token) => {
          this.#tokens.set(cacheKey, { token, expiresAt: this.#now() + this.#ttlMs });
          return token;
        })
        .finally(() => this.#inFlight.delete(cacheKey));
      this.#inFlight.set(cacheKey, shared);
    }
    return untilAborted(shared, signal);
  }

  /** Drops the key's token if it is still `token` (a fresher one fetched meanwhile by another call is kept). */
  evict(apiKey: string, token: string): void {
    const cacheKey = this.#cacheKey(apiKey);
    if (this.#tokens.get(cacheKey)?.token === token) this.#tokens.delete(cacheKey);
  }
}
