/**
 * The key becomes a `Secret` at the header parser and stays one: the chain that reaches the gateway, the
 * request log's fingerprint and the one scrubber (src/security/redact.ts) all work on the same `Secret`.
 */
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { buildChain, readProviderKeys, secretsOf } from '../../src/http/keys.js';
import { scrubSecrets } from '../../src/security/redact.js';
import { Secret } from '../../src/security/secret.js';

const claudeKey = 'test-claude-key-Hd4Rw8Kp2Zm6';
const gptKey = 'test-gpt-key-Vn3Qc7Lx1Bt5';
const headers = { 'x-claude-key': ` ${claudeKey} `, 'x-gpt-key': gptKey, authorization: `Bearer ${gptKey}` };

describe('keys from the header parser on', () => {
  it('wraps every key in a Secret at once: the chain shows fingerprints only', () => {
    const keys = readProviderKeys(headers);
    const chain = buildChain(['gpt', 'timelygpt', 'claude'], keys);
    expect(chain.map((link) => link.provider)).toEqual(['gpt', 'claude']);
    for (const link of chain) expect(link.apiKey).toBeInstanceOf(Secret);
    expect(chain.map((link) => link.apiKey.reveal())).toEqual([gptKey, claudeKey]);
    for (const text of [JSON.stringify(chain), inspect(chain, { depth: 5 }), String(chain[0]?.apiKey)]) {
      expect(text).not.toContain(claudeKey);
      expect(text).not.toContain(gptKey);
      expect(text).toMatch(/\[secret [0-9a-f]{10}\]/);
    }
  });

  it('gives the same key the same fingerprint (the one the request log carries)', () => {
    expect(readProviderKeys(headers).claude?.fingerprint).toBe(new Secret(claudeKey).fingerprint);
    expect(new Secret(claudeKey).fingerprint).not.toBe(new Secret(gptKey).fingerprint);
  });

  it('hands every secret header to the one scrubber, bearer tokens unwrapped', () => {
    const secrets = secretsOf(headers);
    const text = `echo ${claudeKey} and ${gptKey.toUpperCase()} and ${encodeURIComponent(gptKey)}`;
    const scrubbed = scrubSecrets(text, secrets);
    expect(scrubbed).not.toContain('Hd4Rw8Kp');
    expect(scrubbed.toLowerCase()).not.toContain('vn3qc7lx');
    expect(scrubbed).toContain('[redacted]');
  });
});
