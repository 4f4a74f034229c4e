import { createHmac, randomBytes } from 'node:crypto';

/**
 * Salted key fingerprints for per-key health (docs/api.md "key health"): what the gateway, the fleet store
 * and `GET /v1/keys/status` know a key by. HMAC-SHA256 of the provider and the key under a salt: the
 * same on every instance of a fleet (the salt is shared through Redis, or KEY_FINGERPRINT_SALT), never
 * reversible without the salt, and never the key.
 */
export interface KeyIdentity {
  /** Reads the key (a `Secret`) only to digest it, here in src/security; the digest alone leaves. */
  keyId(provider: string, key: { reveal(): string }): string;
}

/** 128 bits of the digest: collisions are out of reach, and nothing of the key is recoverable. */
const keyIdHexChars = 32;

export function createKeyIdentity(salt: string | Uint8Array): KeyIdentity {
  return {
    keyId: (provider, key) =>
      createHmac('sha256', salt)
        .update(provider)
        .update('\0')
        .update(key.reveal())
        .digest('hex')
        .slice(0, keyIdHexChars),
  };
}

/** A fresh random salt (a process alone, or the first instance of a fleet to ask). */
export function randomKeySalt(): string {
  return randomBytes(32).toString('hex');
}
