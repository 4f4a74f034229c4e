import { describe, expect, it } from 'vitest';
import { scrubSecrets } from '../../src/security/redact.js';
import { Secret } from '../../src/security/secret.js';

/** Built at run time so the tree never holds a literal that looks like a real key. */
const anthropicShaped = ['sk', 'ant', 'api03', 'AbCdEfGhIjKlMnOpQrStUvWxYz0123456789'].join('-');

describe('scrubSecrets', () => {
  it.each([
    ['OpenAI masked key echo', 'Incorrect API key provided: sk-proj-ab***************wxyz. You can find your API key', ['sk-proj-ab', 'wxyz']],
    ['OpenAI masked emulator key', '401 Incorrect API key provided: emu-bad-********0001. You can find', ['emu-bad-', '0001']],
    ['Anthropic key', `key ${anthropicShaped} rejected`, ['sk-ant-api03', 'AbCdEf']],
    ['OpenAI key', 'bad key sk-proj-0123456789abcdefABCDEF here', ['sk-proj-0123']],
    ['Bearer token', 'header Authorization: Bearer abc.def-123 was refused', ['abc.def-123']],
    ['JWT', 'token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl expired', ['eyJhbGciOiJIUzI1NiJ9', 'c2lnbmF0dXJl']],
    ['x-api-key header', 'x-api-key: my-secret-value-1 is invalid', ['my-secret-value-1']],
    ['long opaque token', 'session 9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc was dropped', ['9f8e7d6c5b4a3928']],
  ])('%s', (_label, text, fragments) => {
    const scrubbed = scrubSecrets(text);
    for (const fragment of fragments) expect(scrubbed).not.toContain(fragment);
    expect(scrubbed).toContain('[redacted]');
  });

  it('removes a known key wherever it appears, and its long fragments', () => {
    const key = 'test-claude-key-0001-abcdefgh';
    const scrubbed = scrubSecrets(`got ${key} and later ${key.slice(0, 10)}… and …${key.slice(-9)}`, [key]);
    expect(scrubbed).not.toContain(key);
    expect(scrubbed).not.toContain(key.slice(0, 8));
    expect(scrubbed).not.toContain(key.slice(-8));
  });

  it('leaves ordinary messages alone', () => {
    const text = '429 Rate limit reached for requests in organization org-emulator. Please try again in 7s.';
    expect(scrubSecrets(text)).toBe(text);
  });
});

describe('scrubSecrets over Secrets', () => {
  it('takes the request keys as Secrets, the way they travel', () => {
    const key = new Secret('test-gpt-key-Wq5Jd8Mz3Kc1');
    expect(scrubSecrets('upstream said test-gpt-key-Wq5Jd8Mz3Kc1 is wrong', [key])).toBe('upstream said [redacted] is wrong');
  });

  it('leaves the service\'s own ids (UUIDs) readable, but not a long opaque token', () => {
    const id = '3f2a9c41-7b6d-4e8f-a1b2-c3d4e5f60718';
    expect(scrubSecrets(`No document "${id}": it is unknown or has expired.`)).toContain(id);
    expect(scrubSecrets('token 3f2a9c417b6d4e8fa1b2c3d4e5f60718abcd')).toBe('token [redacted]');
  });
});
