/**
 * Token buckets of bytes, one per address (a share address: IPv6 by /64, client-address.ts), the state under
 * the per-address byte shares: the JSON body share (body-share.ts), which refuses a body its bucket cannot
 * cover, and the upload share (upload-share.ts), which lets its bucket run into debt and holds the upload's
 * socket until it has refilled. The request pacing (pipelining.ts) keeps its buckets here too, a token (a
 * "byte") a request.
 *
 * Per instance, never shared through Redis: what the shares protect is this process's event loop. A bucket
 * is forgotten once it has refilled and no body draws on it any more (a full bucket and none are the same);
 * at most `maxAddresses` are held, the least recently seen forgotten first, whatever they hold: memory is
 * bounded first (past that many addresses at once, an address forgotten while in debt starts again full).
 */

/** Addresses whose buckets are held at once by default: about a megabyte of state at most. */
const defaultMaxAddresses = 10_000;

export interface AddressBucketsOptions {
  /** Bytes a bucket refills per second (above 0). */
  readonly bytesPerSecond: number;
  /** Bytes a bucket holds when full: what an address may send at once after a pause. */
  readonly burstBytes: number;
  /** Buckets held at once (default 10 000). */
  readonly maxAddresses?: number;
  /** The clock, in milliseconds (tests); `performance.now` when absent. */
  readonly now?: () => number;
}

/** One address's bucket, refilled up to the moment it was handed out. */
interface AddressBucket<Holder> {
  /** Bytes it holds; below 0 when a share lets it run into debt. */
  tokens: number;
  /** When `tokens` was last brought up to date (the clock's milliseconds). */
  at: number;
  /** What still draws on it (the uploads arriving): kept while any is; created by the share that needs it. */
  holders?: Set<Holder>;
}

export interface AddressBuckets<Holder> {
  /** The bucket of `address`, refilled to now and made the most recently seen (a new one is full). */
  bucketOf(address: string): AddressBucket<Holder>;
  /** The clock the buckets are kept on, in milliseconds. */
  now(): number;
  /** Addresses held now (tests). */
  size(): number;
}

export function createAddressBuckets<Holder = never>(options: AddressBucketsOptions): AddressBuckets<Holder> {
  const { bytesPerSecond, burstBytes } = options;
  const maxAddresses = options.maxAddresses ?? defaultMaxAddresses;
  const now = options.now ?? (() => performance.now());
  // Insertion order is recency: a bucket is moved to the end each time it is touched.
  const buckets = new Map<string, AddressBucket<Holder>>();
  const refilled = (bucket: AddressBucket<Holder>, at: number): boolean =>
    (bucket.holders === undefined || bucket.holders.size === 0) && bucket.tokens + ((at - bucket.at) / 1000) * bytesPerSecond >= burstBytes;
  // From the least recently seen: forgotten while there is no room for one more or while refilled; the first
  // that is neither ends the sweep (what follows was seen later), so each call does little. The bucket being
  // handed out is taken out first, so that a fresh full one is never swept.
  const forget = (at: number): void => {
    for (const [address, bucket] of buckets) {
      if (buckets.size < maxAddresses && !refilled(bucket, at)) break;
      buckets.delete(address);
    }
  };
  return {
    bucketOf(address) {
      const at = now();
      const held = buckets.get(address);
      if (held !== undefined) buckets.delete(address);
      forget(at);
      const bucket = held ?? { tokens: burstBytes, at };
      bucket.tokens = Math.min(burstBytes, bucket.tokens + ((at - bucket.at) / 1000) * bytesPerSecond);
      bucket.at = at;
      buckets.set(address, bucket);
      return bucket;
    },
    now,
    size: () => buckets.size,
  };
}
