/**
 * Who counts as one client for the fair shares. A client is its key set, but keys cost nothing
 * to invent: one address that sent a new key per job came first every time (the scheduler prefers the
 * client running the fewest jobs, and each invented key ran none), and a victim's job from another
 * address waited over a minute. Once one address holds more than `addressKeysAsOneClient` distinct key
 * sets at once, all of them count as one client, the address: its share is one client's.
 */

/** Distinct key sets one address may hold at once before they count as one client (a household, a small office). */
const addressKeysAsOneClient = 4;

/** The key sets each address holds now, and the client each of them counts as. */
export interface AddressClients {
  /** Records one holding (a live job, a generation in flight) of `clientId` from `address`. */
  add(clientId: string, address: string): void;
  /** Gives one back. */
  remove(clientId: string, address: string): void;
  /** The client `clientId` from `address` counts as now: itself, or its address once that holds too many key sets. */
  shareOf(clientId: string, address: string): string;
}

export function createAddressClients(limit: number = addressKeysAsOneClient): AddressClients {
  const held = new Map<string, Map<string, number>>();
  return {
    add(clientId, address) {
      let clients = held.get(address);
      if (clients === undefined) {
        clients = new Map();
        held.set(address, clients);
      }
      clients.set(clientId, (clients.get(clientId) ?? 0) + 1);
    },
    remove(clientId, address) {
      const clients = held.get(address);
      const count = clients?.get(clientId);
      if (clients === undefined || count === undefined) return;
      if (count > 1) clients.set(clientId, count - 1);
      else clients.delete(clientId);
      if (clients.size === 0) held.delete(address);
    },
    shareOf(clientId, address) {
      return (held.get(address)?.size ?? 0) > limit ? `address-share:${address}` : clientId;
    },
  };
}
