/**
 * The user's provider keys as they travel in request headers (API.md "Providers and keys"). A key lives in
 * memory for the request only: it is never logged (only a short salted fingerprint), echoed, put in a
 * metric label or stored.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { ChainLink } from '../actors/types.js';
import { redactSecrets } from '../security/redact.js';
import { providerIds } from '../providers/index.js';
import type { ProviderId } from '../providers/index.js';

export const keyHeaders: Readonly<Record<ProviderId, string>> = {
  claude: 'x-claude-key',
  gpt: 'x-gpt-key',
  timelygpt: 'x-timelygpt-key',
};

/** Every header that can carry a secret; the logger redacts them all. */
export const secretHeaders: readonly string[] = [...Object.values(keyHeaders), 'authorization', 'x-timely-api', 'x-api-key'];

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const raw = headers[name];
  const value = Array.isArray(raw) ? raw[0] : raw;
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : trimmed;
}

/** The keys present in the request, by provider. */
export function readProviderKeys(headers: IncomingHttpHeaders): Partial<Record<ProviderId, string>> {
  const keys: Partial<Record<ProviderId, string>> = {};
  for (const id of providerIds) {
    const key = headerValue(headers, keyHeaders[id]);
    if (key !== undefined) keys[id] = key;
  }
  return keys;
}

/** The requested order, with every provider that has no key left out. */
export function buildChain(order: readonly ProviderId[], keys: Partial<Record<ProviderId, string>>): ChainLink[] {
  const chain: ChainLink[] = [];
  for (const provider of order) {
    const apiKey = keys[provider];
    if (apiKey !== undefined) chain.push({ provider, apiKey });
  }
  return chain;
}

/** Per-process salt: fingerprints correlate requests in one process's logs and nothing more. */
const fingerprintSalt = randomBytes(16);

/** A short salted fingerprint of a key (8 hex characters), safe for logs; never for metric labels. */
export function fingerprint(key: string): string {
  return createHash('sha256').update(fingerprintSalt).update(key).digest('hex').slice(0, 8);
}

/**
 * Replaces every echo of a key in `text`: any piece of 8+ characters, also percent-encoded, spaced or
 * punctuated, in base64 or hex (src/security/redact.ts). The last line of defence for error messages, and
 * the filter of success bodies (a model can echo the key it was called with).
 */
export function redactKeys(text: string, keys: readonly string[]): string {
  return redactSecrets(text, keys);
}

/** Every secret header value in a request, for `redactKeys`. */
export function secretsOf(headers: IncomingHttpHeaders): string[] {
  const secrets: string[] = [];
  for (const name of secretHeaders) {
    const value = headerValue(headers, name);
    if (value === undefined) continue;
    secrets.push(value);
    const bearer = /^bearer\s+(.+)$/i.exec(value)?.[1];
    if (bearer !== undefined) secrets.push(bearer);
  }
  return secrets;
}
