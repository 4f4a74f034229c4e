/**
 * The key each failed call used, held only as long as the error object lives, so that the pure
 * classifier can scrub the exact key out of the message too (src/security/redact.ts `scrubSecrets`, the
 * one scrubber) without the key travelling on the error. The key stays a `Secret` here.
 */
import type { ApiKey } from '../machines/types.js';

const keysOfErrors = new WeakMap<object, ApiKey>();

export function rememberKeyOf(error: unknown, apiKey: ApiKey): void {
  if (typeof error === 'object' && error !== null) keysOfErrors.set(error, apiKey);
}

/** The key `error`'s call used, for the scrubber. */
export function knownKeysOf(error: unknown): readonly ApiKey[] {
  const key = typeof error === 'object' && error !== null ? keysOfErrors.get(error) : undefined;
  return key === undefined ? [] : [key];
}
