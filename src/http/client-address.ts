/**
 * Where a request comes from, as the per-address shares and rates count it. An IPv4 address
 * is itself; an IPv6 address counts by its /64 (one host is routinely given a whole /64, so counting the
 * full address would give one host 2^64 shares); an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is its
 * IPv4 address. The gateway hears of a request's origin only as a salted hash of that address.
 */
import { isIPv6 } from 'node:net';
import { createKeyIdentity, randomKeySalt } from '../security/key-id.js';

/** The address a share is counted on: the IPv4 address, or the IPv6 /64 written `2001:db8:1:2::/64`. */
export function shareAddress(ip: string | undefined): string {
  if (ip === undefined || ip === '') return 'unknown';
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/iu.exec(ip);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (!isIPv6(ip)) return ip;
  return `${ipv6Groups(ip).slice(0, 4).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, lowercase, without leading zeros (a zone id dropped). */
function ipv6Groups(ip: string): string[] {
  const bare = ip.split('%')[0] ?? ip;
  const [head = '', tail] = bare.split('::');
  const part = (text: string): string[] => (text === '' ? [] : text.split(':').flatMap(expandDotted));
  const front = part(head);
  const back = tail === undefined ? [] : part(tail);
  const missing = Math.max(0, 8 - front.length - back.length);
  return [...front, ...Array.from({ length: missing }, () => '0'), ...back].map((group) => Number.parseInt(group, 16).toString(16));
}

/** An embedded dotted IPv4 tail (`::1.2.3.4`) as its two groups. */
function expandDotted(group: string): string[] {
  if (!group.includes('.')) return [group];
  const [a = 0, b = 0, c = 0, d = 0] = group.split('.').map(Number);
  return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
}

/**
 * Makes the origin ids handed to the gateway (`GenerateInput.origin`): a salted HMAC of the share
 * address (src/security/key-id.ts), the same for one address on every instance of a fleet when the
 * fleet's salt is given, never the address itself.
 */
export function createOriginOf(salt: string = randomKeySalt()): (ip: string | undefined) => string {
  const identity = createKeyIdentity(salt);
  return (ip) => {
    const address = shareAddress(ip);
    return identity.keyId('origin', { reveal: () => address });
  };
}
