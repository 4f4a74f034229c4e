/**
 * A per-address share of the JSON body bytes the main thread reads and parses: each address (IPv6: its
 * /64, client-address.ts) has a token bucket of bytes, `burstBytes` deep, refilled at `bytesPerSecond`
 * (JSON_BODY_BURST_MB, JSON_BODY_MB_PER_SECOND). A body takes its bytes from its address's bucket before it
 * is read: one declared by `content-length` is refused on that declaration alone when the bucket holds
 * less; one sent chunked (no length) is counted as it streams and refused the moment it is over. A refusal
 * is 429 `TOO_MANY_REQUESTS` with `Retry-After` (when the bucket will hold the body again), held by
 * REFUSAL_DELAY_MS like every refusal of the client's own doing, and its unread body is not read
 * (app.ts answers `Connection: close`).
 *
 * Why bytes and not requests: reading, decoding and scanning a body, then `JSON.parse` and the schema,
 * cost the event loop by its size, and one address sending 1.4 MB bodies that are refused 400 once read
 * (130 000 unknown fields, 20 000 concepts of notes: past the scan's count of values) kept the loop on
 * ~90 MB/s of them within its request rate, and every other client's latency rose with it. The request rates (rate-limit.ts) and the generation slots (admission.ts) cannot see this:
 * such requests are cheap to refuse only before their bodies are read.
 *
 * Why always, and not only while the process is busy (the generation slots' equal shares): the load gauge
 * lags by a few of its 250 ms samples, so a bucket that opened whenever the loop eased would hand an
 * attacker its full rate back each time, and the other clients' slowest requests are made of those
 * moments. The bucket's defaults are far above what one honest client can use (docs/operations.md).
 *
 * Per instance, never shared through Redis: what it protects is this process's event loop. The buckets
 * (address-buckets.ts) are forgotten once refilled; at most 10 000 addresses are held, the least recently
 * seen forgotten first.
 */
import { Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createAddressBuckets } from './address-buckets.js';
import { shareAddress } from './client-address.js';
import { ApiError } from './errors.js';
import { mebibyte } from '../units.js';

export interface BodyShareOptions {
  /** Bytes an address's bucket refills per second; 0 turns the share off. */
  readonly bytesPerSecond: number;
  /** Bytes the bucket holds when full: what an address may send at once after a pause. */
  readonly burstBytes: number;
  /** The clock, in milliseconds (tests); `performance.now` when absent. */
  readonly now?: () => number;
}

/** The buckets of every address, and what they answer. */
export interface BodyShare {
  /**
   * Takes `bytes` from the bucket of `address` when it holds them all, and answers 0; otherwise takes
   * nothing and answers the seconds until it will (at least 1).
   */
  take(address: string, bytes: number): number;
  /** Takes up to `bytes` from the bucket; answers the seconds until it is full again when it held less (the rest of the chunk is refused). */
  takeStreamed(address: string, bytes: number): number;
  /** Addresses held now (tests). */
  size(): number;
}

/** The buckets (no HTTP here: `registerBodyShare` wires them to the requests). */
export function createBodyShare(options: BodyShareOptions): BodyShare {
  const { bytesPerSecond, burstBytes } = options;
  // Never below 0 here: a body the bucket cannot cover is refused, not let into debt.
  const buckets = createAddressBuckets(options);
  const secondsFor = (bytes: number): number => Math.max(1, Math.ceil(bytes / bytesPerSecond));
  return {
    take(address, bytes) {
      const bucket = buckets.bucketOf(address);
      if (bytes <= bucket.tokens) {
        bucket.tokens -= bytes;
        return 0;
      }
      return secondsFor(bytes - bucket.tokens);
    },
    takeStreamed(address, bytes) {
      const bucket = buckets.bucketOf(address);
      const held = bucket.tokens;
      bucket.tokens = Math.max(0, held - bytes);
      return bytes <= held ? 0 : secondsFor(burstBytes);
    },
    size: () => buckets.size(),
  };
}

/** `content-length` as a number; undefined when absent (a chunked body) or not a plain decimal. */
function declaredLength(request: FastifyRequest): number | undefined {
  const header = request.headers['content-length'];
  if (header === undefined || !/^\d+$/u.test(header)) return undefined;
  return Number(header);
}

/** The refusal of a body over its address's share. */
function overShare(options: BodyShareOptions, retryAfterSeconds: number): ApiError {
  const perSecond = options.bytesPerSecond / mebibyte;
  const burst = options.burstBytes / mebibyte;
  return new ApiError(
    'TOO_MANY_REQUESTS',
    `This address sent more JSON body bytes than its share: ${formatMb(burst)} MB at once, then ${formatMb(perSecond)} MB a second (JSON_BODY_BURST_MB, JSON_BODY_MB_PER_SECOND); retry in ${retryAfterSeconds} s.`,
    { retryAfterSeconds },
    { limit: 'rate', what: 'json_body_bytes' },
  );
}

function formatMb(mb: number): string {
  return String(Math.round(mb * 100) / 100);
}

/**
 * Counts the bytes of a body sent without a length through `share`, failing the body (Fastify answers
 * the error) on the first chunk the address's bucket cannot cover.
 */
function countingStream(share: BodyShare, address: string, options: BodyShareOptions): Transform {
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      const retryAfterSeconds = share.takeStreamed(address, chunk.length);
      if (retryAfterSeconds > 0) callback(overShare(options, retryAfterSeconds));
      else callback(null, chunk);
    },
  });
  // Fastify stops listening once it has answered (a body over its route's limit gets its 413 first), and
  // chunks parsed in the same read still reach the counter; `pipe` re-throws a destination's error nobody
  // listens to, which would take the process down. The request is answered either way.
  counter.on('error', () => {});
  return counter;
}

/**
 * Every request body but a PDF upload takes its bytes from its address's share, in `preParsing`: after
 * every `onRequest` check (a request refused there, for a rate or a generation slot, takes nothing), before
 * a byte is parsed. Uploads (multipart, `POST /v1/documents`, which refuses any other type before this)
 * are streamed to disk and parsed in the PDF workers, bounded by their own rate and queue; any other
 * route refuses multipart unread. A body declared over its route's `bodyLimit` is left to Fastify's 413.
 * Does nothing when `bytesPerSecond` is 0.
 */
export function registerBodyShare(app: FastifyInstance, options: BodyShareOptions): void {
  if (options.bytesPerSecond <= 0) return;
  const share = createBodyShare(options);
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const declared = declaredLength(request);
    const chunked = declared === undefined && request.headers['transfer-encoding'] !== undefined;
    if ((declared === undefined && !chunked) || declared === 0 || /^multipart\//iu.test(request.headers['content-type'] ?? '')) {
      done(null, payload);
      return;
    }
    const address = shareAddress(request.ip);
    if (declared === undefined) {
      done(null, payload.pipe(countingStream(share, address, options)));
      return;
    }
    if (declared > request.routeOptions.bodyLimit) {
      done(null, payload);
      return;
    }
    const retryAfterSeconds = share.take(address, declared);
    done(retryAfterSeconds > 0 ? overShare(options, retryAfterSeconds) : null, payload);
  });
}
