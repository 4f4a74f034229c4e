import { createHash, createHmac, randomBytes } from 'node:crypto';

/** Salt for this process's key fingerprints: a fingerprint cannot be compared across runs or reversed offline. */
const processSalt = randomBytes(16);

/** A short salted fingerprint of a key, safe for logs (never for metric labels). */
function fingerprint(value: string): string {
  return createHash('sha256').update(processSalt).update(value).digest('hex').slice(0, 10);
}

/**
 * A full-length salted digest of a key (HMAC-SHA256 with this process's salt): what a store may keep to
 * recognise the same key later in this process (the result cache's scope), never reversible offline.
 */
export function keyDigest(value: string): string {
  return createHmac('sha256', processSalt).update(value).digest('hex');
}

/**
 * A user's API key as it travels through the actor system. The value sits in a private field, so
 * snapshots and events sent to an inspector, a logger or `JSON.stringify` show only the fingerprint.
 */
export class Secret {
  readonly #value: string;
  #fingerprint: string | undefined;

  constructor(value: string) {
    this.#value = value;
  }

  /** Computed on first use (a log line, JSON): a request that logs nothing hashes nothing here. */
  get fingerprint(): string {
    this.#fingerprint ??= fingerprint(this.#value);
    return this.#fingerprint;
  }

  /** The key itself, for the one place that needs it: the adapter's upstream call. */
  reveal(): string {
    return this.#value;
  }

  toJSON(): string {
    return `[secret ${this.fingerprint}]`;
  }

  toString(): string {
    return this.toJSON();
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return this.toJSON();
  }
}
