/**
 * The user's provider keys as they travel in request headers (docs/api.md "Providers and keys"). A key becomes
 * a `Secret` (src/security/secret.ts) right here, the header parser, and stays one up to the adapter that
 * sends it upstream: logs, snapshots and JSON see only its fingerprint. It lives in memory for the request
 * only: never logged, echoed, put in a metric label or stored. Every text that leaves the service is
 * scrubbed of it by the one scrubber, src/security/redact.ts.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ChainLink } from '../actors/types.js';
import { Secret } from '../security/secret.js';
import { ApiError } from './errors.js';
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

/** The keys present in the request, by provider, each wrapped in a `Secret` at once. */
export function readProviderKeys(headers: IncomingHttpHeaders): Partial<Record<ProviderId, Secret>> {
  const keys: Partial<Record<ProviderId, Secret>> = {};
  for (const id of providerIds) {
    const key = headerValue(headers, keyHeaders[id]);
    if (key !== undefined) keys[id] = new Secret(key);
  }
  return keys;
}

/** The requested order, with every provider that has no key left out. */
export function buildChain(order: readonly ProviderId[], keys: Partial<Record<ProviderId, Secret>>): ChainLink[] {
  const chain: ChainLink[] = [];
  for (const provider of order) {
    const apiKey = keys[provider];
    if (apiKey !== undefined) chain.push({ provider, apiKey });
  }
  return chain;
}

/** `buildChain` for a new generation or job: a chain with no provider is 400 NO_PROVIDER_KEY naming the headers to send. */
export function requireChain(order: readonly ProviderId[], keys: Partial<Record<ProviderId, Secret>>): ChainLink[] {
  const chain = buildChain(order, keys);
  if (chain.length === 0) {
    const wanted = order.map((id) => keyHeaders[id]).join(', ');
    throw new ApiError('NO_PROVIDER_KEY', `No requested provider has a key: send one of the headers ${wanted}.`);
  }
  return chain;
}

/** Every secret header value in a request as `Secret`s, for the scrubber (`scrubSecrets`). */
export function secretsOf(headers: IncomingHttpHeaders): Secret[] {
  const secrets: Secret[] = [];
  for (const name of secretHeaders) {
    const value = headerValue(headers, name);
    if (value === undefined) continue;
    secrets.push(new Secret(value));
    const bearer = /^bearer\s+(.+)$/i.exec(value)?.[1];
    if (bearer !== undefined) secrets.push(new Secret(bearer));
  }
  return secrets;
}
