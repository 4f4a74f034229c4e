/**
 * Admission control (issue 12): a bounded number of `POST /v1/generate` runs in flight per instance,
 * and a per-client share of them, so one client cannot take every slot. A refusal is an `ApiError`
 * carrying `retryAfterSeconds`; the route sets the `Retry-After` header from it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { providerIds } from '../providers/index.js';
import type { ApiKey, ProviderId } from '../providers/index.js';
import { ApiError } from './errors.js';

/** Per-process salt: a client id says nothing about the keys behind it, and means nothing elsewhere. */
const clientSalt = randomBytes(16);

/**
 * Who is asking, for the per-client shares: a salted hash of the set of provider keys the request
 * carries (the same keys in any order are the same client), or of the remote address when it carries
 * none. Never the key itself; the id is only compared, never logged.
 */
export function clientIdOf(keys: Partial<Record<ProviderId, ApiKey>>, remoteAddress: string | undefined): string {
  const hash = createHash('sha256').update(clientSalt);
  const present = providerIds.filter((id) => keys[id] !== undefined);
  if (present.length === 0) return `address:${hash.update(remoteAddress ?? 'unknown').digest('hex').slice(0, 24)}`;
  for (const id of present) hash.update(`${id}\u0000${keys[id]?.reveal() ?? ''}\u0000`);
  return `keys:${hash.digest('hex').slice(0, 24)}`;
}

export interface AdmissionOptions {
  /** Runs in flight at once in this instance (MAX_INFLIGHT_GENERATIONS). */
  readonly maxInFlight: number;
  /** Runs one client may have in flight at once (MAX_INFLIGHT_GENERATIONS_PER_CLIENT). */
  readonly maxPerClient: number;
  /** What `Retry-After` says on a refusal (ADMISSION_RETRY_AFTER_SECONDS). */
  readonly retryAfterSeconds: number;
}

export interface Admission {
  /** Takes a slot for `clientId`, or throws 503 `SERVER_BUSY` / 429 `TOO_MANY_REQUESTS`. Call the returned release once. */
  enter(clientId: string): () => void;
  /** Runs in flight now, in all and by client (metrics, tests). */
  inFlight(): { readonly total: number; readonly clients: number };
}

/** The `/v1/generate` slots of one instance. */
export function createAdmission(options: AdmissionOptions): Admission {
  const byClient = new Map<string, number>();
  let total = 0;
  const refusal = { retryAfterSeconds: options.retryAfterSeconds };
  return {
    enter(clientId) {
      const mine = byClient.get(clientId) ?? 0;
      if (mine >= options.maxPerClient) {
        throw new ApiError(
          'TOO_MANY_REQUESTS',
          `This client already has ${mine} generations in flight (at most ${options.maxPerClient}, MAX_INFLIGHT_GENERATIONS_PER_CLIENT); retry when one has finished.`,
          refusal,
        );
      }
      if (total >= options.maxInFlight) {
        throw new ApiError(
          'SERVER_BUSY',
          `Every generation slot of this instance is taken (${options.maxInFlight}, MAX_INFLIGHT_GENERATIONS); retry shortly.`,
          refusal,
        );
      }
      total += 1;
      byClient.set(clientId, mine + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        total -= 1;
        const left = (byClient.get(clientId) ?? 1) - 1;
        if (left <= 0) byClient.delete(clientId);
        else byClient.set(clientId, left);
      };
    },
    inFlight() {
      return { total, clients: byClient.size };
    },
  };
}
