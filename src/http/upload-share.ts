/**
 * Each address's share of the upload body bytes this instance reads (UPLOAD_MB_PER_SECOND, UPLOAD_BURST_MB):
 * a token bucket of bytes per address (IPv6 by /64, address-buckets.ts), `burstBytes` deep, refilled at
 * `bytesPerSecond`. Unlike the JSON body share (body-share.ts), an upload over its share is not refused: it is
 * slowed. Every body byte of an admitted upload is taken from its address's bucket as it is handed to Node's
 * parser (pipelining.ts feeds the parser and asks `pacer` first), and the bucket may run into debt by one
 * socket read; while it is in debt, no more of that address's uploads is parsed and their sockets are paused,
 * so the kernel's buffers fill and the clients stop sending until the bucket has refilled. An address's
 * uploads together then cost the main thread (multipart split, SHA-256, the spool file's writes) at most
 * `bytesPerSecond` plus one burst, whatever their number, and the other addresses' requests and uploads are
 * served meanwhile: their buckets are their own.
 *
 * Why slowed and not refused: an honest client's upload is one large body, sent once; refusing it halfway
 * would waste what it sent, and the client could not know how fast to send. Why always, not only while busy:
 * the same reason as the JSON share (the load gauge lags; an attacker would get its full speed back in every
 * lull).
 *
 * The bound on the wait: an upload must arrive whole within its request deadline (REQUEST_TIMEOUT_MS; Node
 * answers 408 past it). So one is admitted only if, at this share, the bytes its address still owes (what
 * its uploads in flight have yet to send, and this one's) can arrive before the earliest deadline among them;
 * otherwise it is refused at once, before a byte of it is read, 429 `TOO_MANY_REQUESTS` with `Retry-After`
 * (when it would fit). An upload of unknown length (chunked) is counted at the largest the route takes. The
 * deadline is counted from admission minus the headers' own deadline (the headers may have taken that long):
 * an admitted upload whose client sends at least as fast as its share always arrives in time.
 */
import type { IncomingMessage } from 'node:http';
import { createAddressBuckets } from './address-buckets.js';
import { ApiError } from './errors.js';
import type { BodyPacer } from './pipelining.js';
import { mebibyte } from '../units.js';

export interface UploadShareOptions {
  /** Bytes an address's bucket refills per second (above 0). */
  readonly bytesPerSecond: number;
  /** Bytes the bucket holds when full: what an address's uploads may send at full speed after a pause. */
  readonly burstBytes: number;
  /** Buckets held at once (default 10 000: address-buckets.ts). */
  readonly maxAddresses?: number;
  /** The clock, in milliseconds (tests); `performance.now` when absent. */
  readonly now?: () => number;
}

/** An admitted upload, while its body arrives. */
interface Upload {
  readonly address: string;
  /** Bytes it has yet to send, as declared (or the route's largest, when not declared). */
  remaining: number;
  /** When it must have arrived (the clock's milliseconds). */
  readonly deadlineAt: number;
}

export interface UploadShare {
  /**
   * Admits `request`, an upload of `expectedBytes` body bytes from `address` (a share address) that must
   * arrive within `timeLeftMs`, and paces its body from now on; or throws 429 `TOO_MANY_REQUESTS` when, at
   * this share, it or one of the address's uploads in flight could not arrive in time. Returns the release
   * (also called when the request closes): once its body is read, or abandoned.
   */
  admit(request: IncomingMessage, address: string, expectedBytes: number, timeLeftMs: number): () => void;
  /** What the parser's feeding asks before and after each piece of a body (pipelining.ts). */
  readonly pacer: BodyPacer;
  /** Addresses held now (tests). */
  size(): number;
}

export function createUploadShare(options: UploadShareOptions): UploadShare {
  const { bytesPerSecond } = options;
  const buckets = createAddressBuckets<Upload>(options);
  const uploads = new WeakMap<IncomingMessage, Upload>();
  // Body bytes parsed before a request was admitted (Node parses one read of the body before the route's
  // handler runs): taken from the bucket on admission, so that no byte of an upload is free.
  const early = new WeakMap<IncomingMessage, number>();
  const refuse = (retryAfterSeconds: number, expectedBytes: number): ApiError =>
    new ApiError(
      'TOO_MANY_REQUESTS',
      `This address's uploads in flight, with this one (${formatMb(expectedBytes / mebibyte)} MB), could not arrive within the request deadline (REQUEST_TIMEOUT_MS) at its share of ${formatMb(bytesPerSecond / mebibyte)} MB a second (UPLOAD_MB_PER_SECOND); retry in ${retryAfterSeconds} s.`,
      { retryAfterSeconds },
      { limit: 'rate', what: 'upload_bytes' },
    );
  return {
    admit(request, address, expectedBytes, timeLeftMs) {
      const bucket = buckets.bucketOf(address);
      const at = buckets.now();
      const holders = (bucket.holders ??= new Set());
      const deadlineAt = at + timeLeftMs;
      let owed = expectedBytes;
      let earliestHeld = Number.POSITIVE_INFINITY;
      for (const held of holders) {
        owed += held.remaining;
        earliestHeld = Math.min(earliestHeld, held.deadlineAt);
      }
      // Shared fairly, the address's uploads have all arrived once the bucket has refilled what they owe.
      const arrivedAt = (bytes: number): number => at + (Math.max(0, bytes - bucket.tokens) / bytesPerSecond) * 1000;
      const allArrivedAt = arrivedAt(owed);
      if (allArrivedAt > Math.min(deadlineAt, earliestHeld)) {
        // Retried later, this upload fits once its own deadline is far enough (the backlog drains meanwhile)
        // and, when it would make one of them late, the uploads in flight have arrived.
        const waitMs = Math.max(allArrivedAt - deadlineAt, allArrivedAt > earliestHeld ? arrivedAt(owed - expectedBytes) - at : 0);
        throw refuse(Math.max(1, Math.ceil(waitMs / 1000)), expectedBytes);
      }
      const fedBefore = early.get(request) ?? 0;
      early.delete(request);
      bucket.tokens -= fedBefore;
      const upload: Upload = { address, remaining: Math.max(0, expectedBytes - fedBefore), deadlineAt };
      holders.add(upload);
      uploads.set(request, upload);
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        holders.delete(upload);
        uploads.delete(request);
      };
      request.once('close', release);
      return release;
    },
    pacer: {
      waitMs(request) {
        const upload = uploads.get(request);
        if (upload === undefined) return 0;
        const { tokens } = buckets.bucketOf(upload.address);
        return tokens >= 0 ? 0 : Math.max(1, Math.ceil((-tokens / bytesPerSecond) * 1000));
      },
      fed(request, bytes) {
        const upload = uploads.get(request);
        if (upload === undefined) {
          early.set(request, (early.get(request) ?? 0) + bytes);
          return;
        }
        buckets.bucketOf(upload.address).tokens -= bytes;
        upload.remaining = Math.max(0, upload.remaining - bytes);
      },
    },
    size: () => buckets.size(),
  };
}

function formatMb(mb: number): string {
  return String(Math.round(mb * 100) / 100);
}
