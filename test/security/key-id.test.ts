import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createKeyIdentity, randomKeySalt } from '../../src/security/key-id.js';
import { Secret } from '../../src/security/secret.js';

/**
 * The key id is HMAC-SHA256(salt, provider ‖ NUL ‖ key), its first 32 hex characters: fleets keep their
 * key ids across a deploy only if that holds exactly. The oracle is Node's own `createHmac`.
 */
function oracle(salt: string | Uint8Array, provider: string, key: string): string {
  return createHmac('sha256', salt).update(provider).update('\0').update(key).digest('hex').slice(0, 32);
}

describe('key ids', () => {
  it("are createHmac's digest for any salt (short, a block long, longer, text or bytes) and any key", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ maxLength: 200, unit: 'binary' }),
          fc.uint8Array({ maxLength: 200 }),
          fc.constantFrom('x'.repeat(63), 'x'.repeat(64), 'x'.repeat(65), randomKeySalt()),
        ),
        fc.constantFrom('claude', 'gpt', 'timelygpt'),
        fc.string({ minLength: 1, maxLength: 300, unit: 'binary' }),
        (salt, provider, key) => {
          const identity = createKeyIdentity(salt);
          expect(identity.keyId(provider, new Secret(key))).toBe(oracle(salt, provider, key));
          // Twice: nothing of one call is left in what the next one digests.
          expect(identity.keyId(provider, new Secret(`${key}2`))).toBe(oracle(salt, provider, `${key}2`));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('differ between providers, keys and salts', () => {
    const one = createKeyIdentity('salt-one');
    const key = new Secret('test-key-0001');
    expect(one.keyId('gpt', key)).not.toBe(one.keyId('claude', key));
    expect(one.keyId('gpt', key)).not.toBe(one.keyId('gpt', new Secret('test-key-0002')));
    expect(one.keyId('gpt', key)).not.toBe(createKeyIdentity('salt-two').keyId('gpt', key));
    expect(one.keyId('gpt', key)).toMatch(/^[0-9a-f]{32}$/);
  });
});
