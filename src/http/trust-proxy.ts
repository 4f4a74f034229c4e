/**
 * TRUST_PROXY as Fastify's `trustProxy` and as the connection limits see it: X-Forwarded-For
 * is believed only on requests whose peer is a trusted proxy. Named addresses and CIDR ranges trust those;
 * a hop count `n` trusts the nearest `n` hops only where each is on loopback, link-local or a private
 * range (10/8, 172.16/12, 192.168/16, fc00::/7): a client on a public address that sends its own
 * X-Forwarded-For is not a proxy, and keeps its own address (a bare hop count believed any peer before).
 * A proxy on a public address is named by its address.
 */
import proxyAddr from '@fastify/proxy-addr';
import type { Config } from '../config.js';

type TrustProxySetting = Config['server']['trustProxy'];

/** Whether an address is on loopback, link-local or a private range (proxy-addr's presets). */
const isPrivateAddress = proxyAddr.compile(['loopback', 'linklocal', 'uniquelocal']);

/** What Fastify's `trustProxy` gets for TRUST_PROXY: false, true, or the function deciding each hop. */
export function fastifyTrustProxy(setting: TrustProxySetting): boolean | ((address: string, hop: number) => boolean) {
  if (typeof setting === 'boolean') return setting;
  if (typeof setting === 'number') return (address, hop) => hop < setting && isPrivateAddress(address, hop);
  return proxyAddr.compile([...setting]);
}

/**
 * Whether a socket's peer is a trusted proxy: its connections carry many clients, so the per-address
 * connection cap does not apply to it (the clients behind it are counted by their forwarded address).
 */
export function trustedPeer(setting: TrustProxySetting): (address: string) => boolean {
  const trust = fastifyTrustProxy(setting);
  if (typeof trust === 'boolean') return () => trust;
  return (address) => trust(address, 0);
}
