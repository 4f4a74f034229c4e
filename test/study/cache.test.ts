import { describe, expect, it } from 'vitest';
import type { ChainLink } from '../../src/actors/types.js';
import { createResultCache, generateStudyTask, studyCacheKey, studyCacheScope, validateStudyValue, type NotesResult } from '../../src/study/index.js';
import { createFakeGateway, markerResponder } from './fake-gateway.js';
import { Secret } from '../../src/security/secret.js';

const chain: readonly ChainLink[] = [{ provider: 'gpt', apiKey: new Secret('test-gpt-key-0001') }];
const notes: NotesResult = { keyConcepts: [{ id: 'c1', term: 'Deadlock', definition: 'Circular waiting', importance: 'high' }], sections: [], glossary: [] };
const entry = { task: 'notes' as const, value: notes, provider: 'gpt' as const, model: 'm', fallback: false, usage: { inputTokens: 1, outputTokens: 1 } };
const acceptNotes = (cached: { value: unknown }) => validateStudyValue('notes', cached.value);

describe('result cache', () => {
  it('expires entries after the TTL', () => {
    let now = 50_000;
    const cache = createResultCache({ ttlMs: 1000, now: () => now });
    cache.set('k', entry);
    now = 50_999;
    expect(cache.get('k', acceptNotes)?.value).toEqual(notes);
    now = 51_001;
    expect(cache.get('k', acceptNotes)).toBeUndefined();
  });

  it('keeps at most maxEntries, evicting the least recently used', () => {
    const cache = createResultCache({ maxEntries: 2 });
    cache.set('a', entry);
    cache.set('b', entry);
    cache.get('a', acceptNotes);
    cache.set('c', entry);
    expect(cache.get('b', acceptNotes)).toBeUndefined();
    expect(cache.get('a', acceptNotes)).toBeDefined();
    expect(cache.size).toBe(2);
  });

  it('re-validates a hit and evicts one that no longer passes', () => {
    const cache = createResultCache();
    cache.set('bad', { ...entry, value: { keyConcepts: [], sections: [], glossary: [] } });
    expect(cache.get('bad', acceptNotes)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('keys by scope (provider and key), document, task, language, count and notes', () => {
    const base = { scope: 'gpt:digest-1', source: 'sha-1', task: 'mcq' as const, lang: 'en' as const, count: 5, notes };
    const keys = new Set([
      studyCacheKey(base),
      studyCacheKey({ ...base, source: 'sha-2' }),
      studyCacheKey({ ...base, task: 'fill' }),
      studyCacheKey({ ...base, lang: 'ko' }),
      studyCacheKey({ ...base, count: 6 }),
      studyCacheKey({ ...base, notes: { ...notes, glossary: [{ term: 'x', definition: 'y' }] } }),
      studyCacheKey({ ...base, scope: 'gpt:digest-2' }),
      studyCacheKey({ ...base, scope: 'claude:digest-1' }),
    ]);
    expect(keys.size).toBe(8);
    expect(studyCacheKey({ ...base, notes: { glossary: [], sections: [], keyConcepts: notes.keyConcepts } })).toBe(studyCacheKey(base));
  });

  it('serves a second identical request without a provider call', async () => {
    const cache = createResultCache();
    const gateway = createFakeGateway(markerResponder);
    const input = { task: 'mcq' as const, text: 'Deadlock needs four conditions.', lang: 'en' as const, count: 3, chain, cache, cacheKey: 'doc-sha-1' };
    const first = await generateStudyTask(gateway, input);
    const calls = gateway.requests.length;
    const second = await generateStudyTask(gateway, input);
    expect(first.status).toBe('succeeded');
    expect(second).toMatchObject({ status: 'succeeded', cached: true, attempts: [], provider: 'gpt' });
    expect(gateway.requests).toHaveLength(calls);
    if (first.status === 'succeeded' && second.status === 'succeeded') expect(second.value).toEqual(first.value);
    // The notes generated for grounding were cached too: fill on the same document needs no notes call.
    await generateStudyTask(gateway, { ...input, task: 'fill' });
    expect(gateway.requests.slice(calls).map((request) => request.task)).toEqual(['fill']);
  });

  it('serves a result only to a request holding the provider key that produced it', async () => {
    const cache = createResultCache();
    const gateway = createFakeGateway(markerResponder);
    const paid = { task: 'notes' as const, text: 'Deadlock needs four conditions.', lang: 'en' as const, chain, cache, cacheKey: 'doc-sha-2' };
    expect((await generateStudyTask(gateway, paid)).status).toBe('succeeded');
    const calls = gateway.requests.length;
    // Same document, same task, another gpt key: not a hit, the provider is called with that key.
    const other = await generateStudyTask(gateway, { ...paid, chain: [{ provider: 'gpt', apiKey: new Secret('test-gpt-key-0002') }] });
    expect(other).not.toMatchObject({ cached: true });
    expect(gateway.requests.length).toBeGreaterThan(calls);
    // Same key under another provider's name: not a hit either (the scope is provider and key).
    const renamed = await generateStudyTask(gateway, { ...paid, chain: [{ provider: 'claude', apiKey: new Secret('test-gpt-key-0001') }] });
    expect(renamed).not.toMatchObject({ cached: true });
    // The paying key, anywhere in the chain: a hit.
    const again = await generateStudyTask(gateway, { ...paid, chain: [{ provider: 'claude', apiKey: new Secret('test-claude-key-0009') }, ...chain] });
    expect(again).toMatchObject({ status: 'succeeded', cached: true, provider: 'gpt' });
  });

  it('keeps no key in an entry or a cache key', () => {
    const key = studyCacheKey({ scope: studyCacheScope('gpt', new Secret('test-gpt-key-0001')), source: 's', task: 'notes', lang: 'en' });
    expect(studyCacheScope('gpt', new Secret('test-gpt-key-0001'))).not.toContain('test-gpt-key-0001');
    expect(studyCacheScope('gpt', new Secret('test-gpt-key-0001'))).toMatch(/^gpt:[0-9a-f]{64}$/);
    expect(key).toMatch(/^[0-9a-f]{64}$/);
  });
});
