/**
 * The wait queue of the PDF extract pool, shared fairly between clients: one address that
 * sends many slow PDFs would fill the one worker and its whole queue, so every other address would get 503
 * for a minute. Here each client (an address, IPv6 by /64: `addressShareKey`) holds at most
 * `perClientMax` waiting items (the pool allows the whole queue while nobody else waits), items leave in
 * round-robin order between clients (not first in, first out), and when the queue is full a client
 * holding fewer items than the largest holder takes the largest holder's newest place (that item is
 * refused instead). So an upload from an address that has
 * nothing waiting always gets in while another address holds two places or more, and waits for at most
 * one item of each other client.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** Items waiting, per client, with a round-robin order between clients. */
export class FairQueue<T> {
  private readonly byClient = new Map<string, T[]>();
  /** Clients with items, in the order they are served next; the head is served, then goes to the back. */
  private readonly turn: string[] = [];
  private count = 0;

  /**
   * @param max items waiting at most (16 per worker in the service)
   * @param perClientMax items one client may have waiting at most
   */
  constructor(
    private readonly max: number,
    private readonly perClientMax: number,
  ) {}

  get size(): number {
    return this.count;
  }

  /** Items `client` has waiting. */
  waitingOf(client: string): number {
    return this.byClient.get(client)?.length ?? 0;
  }

  /**
   * Adds `item` for `client`. Returns `{ added: false }` when the client's share or the queue is full
   * and no other client holds more; `{ added: true, displaced }` with the item that lost its place, if any.
   */
  push(client: string, item: T): { added: boolean; displaced?: T } {
    const own = this.waitingOf(client);
    if (own >= this.perClientMax) return { added: false };
    let displaced: T | undefined;
    if (this.count >= this.max) {
      const largest = this.largestHolder();
      if (largest === undefined || this.waitingOf(largest) <= own + 1) return { added: false };
      displaced = this.popNewest(largest);
    }
    this.add(client, item);
    return displaced === undefined ? { added: true } : { added: true, displaced };
  }

  /** Adds `item` for `client` whatever the queue holds (its place was held before, extract-pool.ts). */
  add(client: string, item: T): void {
    const items = this.byClient.get(client);
    if (items === undefined) {
      this.byClient.set(client, [item]);
      this.turn.push(client);
    } else items.push(item);
    this.count += 1;
  }

  /** Clients with items waiting. */
  clients(): IterableIterator<string> {
    return this.byClient.keys();
  }

  /** The newest item of `client`, left in place. */
  newestOf(client: string): T | undefined {
    return this.byClient.get(client)?.at(-1);
  }

  /** The next item: the oldest of the client whose turn it is; that client then goes to the back. */
  shift(): T | undefined {
    const client = this.turn.shift();
    if (client === undefined) return undefined;
    const items = this.byClient.get(client) ?? [];
    const item = items.shift();
    if (items.length > 0) this.turn.push(client);
    else this.byClient.delete(client);
    this.count -= 1;
    return item;
  }

  /** Removes and returns every item. */
  drain(): T[] {
    const all: T[] = [];
    for (let item = this.shift(); item !== undefined; item = this.shift()) all.push(item);
    return all;
  }

  private largestHolder(): string | undefined {
    let largest: string | undefined;
    for (const [client, items] of this.byClient) if (largest === undefined || items.length > this.waitingOf(largest)) largest = client;
    return largest;
  }

  /** Removes and returns the newest item of `client`. */
  popNewest(client: string): T | undefined {
    const items = this.byClient.get(client);
    const item = items?.pop();
    if (items !== undefined && items.length === 0) {
      this.byClient.delete(client);
      this.turn.splice(this.turn.indexOf(client), 1);
    }
    if (item !== undefined) this.count -= 1;
    return item;
  }
}

/**
 * The share a client address stands for: an IPv4 address itself (also when written IPv4-mapped,
 * `::ffff:192.0.2.1`), an IPv6 address by its /64 (one subscriber is routinely given a whole /64,
 * 2^64 addresses). Anything else (no address) shares one key.
 */
export function addressShareKey(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/iu.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return 'unknown';
  const groups = expandIPv6(address.split('%')[0] ?? address);
  return `${groups.slice(0, 4).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, lower-case hex without leading zeros. */
function expandIPv6(address: string): string[] {
  const [head = '', tail] = address.split('::');
  const parse = (part: string): string[] => (part === '' ? [] : part.split(':'));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  // An embedded IPv4 tail (::1.2.3.4) is two groups.
  const last = right.length > 0 ? right : left;
  const dotted = last[last.length - 1];
  if (dotted?.includes('.') === true) {
    const bytes = dotted.split('.').map(Number);
    last.splice(last.length - 1, 1, (((bytes[0] ?? 0) << 8) | (bytes[1] ?? 0)).toString(16), (((bytes[2] ?? 0) << 8) | (bytes[3] ?? 0)).toString(16));
  }
  const missing = 8 - left.length - right.length;
  const groups = tail === undefined ? left : [...left, ...Array.from({ length: missing }, () => '0'), ...right];
  return groups.map((group) => Number.parseInt(group, 16).toString(16));
}
