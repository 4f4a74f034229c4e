/**
 * Open connections, bounded per address and per instance: 22,000 half-sent POSTs from one
 * address exhausted the process's file descriptors and every other client's new connection was reset.
 * A connection over either cap is destroyed the moment it is accepted, before a byte of it is read; the
 * other addresses keep connecting. Counted by share address (IPv6 by /64, client-address.ts); a trusted
 * proxy's own connections carry many clients and are bounded only by the instance cap.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { shareAddress } from './client-address.js';

export interface ConnectionLimits {
  /** Connections open at once in this instance (MAX_CONNECTIONS). */
  readonly maxConnections: number;
  /** Connections one address may hold open at once (MAX_CONNECTIONS_PER_ADDRESS). */
  readonly maxPerAddress: number;
  /** A peer whose connections are not counted per address (a trusted proxy, trust-proxy.ts). */
  readonly exempt?: (address: string) => boolean;
  /** Told of each connection refused: over the address's cap, or over the instance's (Node's `drop`). */
  readonly onRefused?: (limit: 'address_share' | 'instance') => void;
}

/** Puts the limits on `server`; call before it listens. */
export function limitConnections(server: Server, limits: ConnectionLimits): void {
  // Node itself destroys a connection past `maxConnections` as it is accepted.
  server.maxConnections = limits.maxConnections;
  server.on('drop', () => limits.onRefused?.('instance'));
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress ?? '';
    if (limits.exempt?.(peer) === true) return;
    const address = shareAddress(peer);
    const held = open.get(address) ?? 0;
    if (held >= limits.maxPerAddress) {
      limits.onRefused?.('address_share');
      socket.destroy();
      return;
    }
    open.set(address, held + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
}
