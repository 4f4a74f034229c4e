import { describe, expect, it } from 'vitest';
import { addressShareKey, FairQueue } from '../../src/documents/fair-queue.js';

describe('FairQueue (the PDF wait queue)', () => {
  it('serves clients in turn, each client its own items oldest first', () => {
    const queue = new FairQueue<string>(16, 8);
    for (const item of ['a1', 'a2', 'a3']) queue.push('a', item);
    queue.push('b', 'b1');
    queue.push('c', 'c1');
    queue.push('b', 'b2');
    expect(queue.drain()).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
  });

  it('holds at most perClientMax items of one client', () => {
    const queue = new FairQueue<number>(16, 4);
    const added = [1, 2, 3, 4, 5, 6].map((item) => queue.push('flood', item).added);
    expect(added).toEqual([true, true, true, true, false, false]);
    expect(queue.size).toBe(4);
    expect(queue.push('victim', 7)).toEqual({ added: true });
  });

  it('when full, a client with fewer items takes the newest place of the largest holder', () => {
    const queue = new FairQueue<string>(4, 4);
    for (const item of ['a1', 'a2', 'a3', 'a4']) queue.push('a', item);
    expect(queue.push('b', 'b1')).toEqual({ added: true, displaced: 'a4' });
    expect(queue.push('c', 'c1')).toEqual({ added: true, displaced: 'a3' });
    // a holds 2, d holds 0: d still gets in; then nobody holds two more than a newcomer.
    expect(queue.push('d', 'd1')).toEqual({ added: true, displaced: 'a2' });
    expect(queue.push('e', 'e1')).toEqual({ added: false });
    expect(queue.size).toBe(4);
    expect(queue.drain()).toEqual(['a1', 'b1', 'c1', 'd1']);
  });

  it('refuses everything with a queue of 0', () => {
    expect(new FairQueue<number>(0, 1).push('a', 1)).toEqual({ added: false });
  });
});

describe('addressShareKey', () => {
  it('keeps an IPv4 address, also written IPv4-mapped', () => {
    expect(addressShareKey('203.0.113.7')).toBe('203.0.113.7');
    expect(addressShareKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
  });

  it('groups IPv6 addresses by /64, however they are written', () => {
    const key = '2001:db8:1:2::/64';
    for (const address of ['2001:db8:1:2::1', '2001:0db8:0001:0002:ffff:ffff:ffff:ffff', '2001:DB8:1:2:0:0:0:9', '2001:db8:1:2::1.2.3.4', '2001:db8:1:2::1%eth0']) {
      expect(addressShareKey(address)).toBe(key);
    }
    expect(addressShareKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressShareKey('::1')).toBe('0:0:0:0::/64');
  });

  it('puts requests without a usable address in one share', () => {
    expect(addressShareKey(undefined)).toBe('unknown');
    expect(addressShareKey('not an address')).toBe('unknown');
  });
});
