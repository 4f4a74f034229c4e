/**
 * XState's `assign` copies the whole context on every update (`Object.assign({}, context, update)`).
 * V8 copies an object of 20 or more fields through its slow dictionary path, many times dearer per
 * assign than below 20 (figures in docs/performance.md). The hot-path machines keep their contexts
 * under that bound; this pins it (a structural check, not a timing).
 */
import { describe, expect, it } from 'vitest';
import { createActor, initialTransition } from 'xstate';
import { breakerMachine } from '../../src/machines/breaker.machine.js';
import { fallbackMachine } from '../../src/machines/fallback.machine.js';
import { keyBookMachine } from '../../src/machines/key-book.machine.js';
import { providerMachine } from '../../src/machines/provider.machine.js';
import { Secret } from '../../src/security/secret.js';
import { request } from './gateway-harness.js';

const fieldBound = 20;

describe('hot-path machine contexts stay under 20 fields (V8 copies larger objects slowly)', () => {
  it('fallback run, provider, breaker, key book', () => {
    const ref = createActor(providerMachine, { input: { providerId: 'claude', model: 'm', threshold: 5, recoveryMs: 1000 } });
    const [fallback] = initialTransition(fallbackMachine, {
      runId: 'r',
      links: [{ provider: 'claude', model: 'm', apiKey: new Secret('test-claude-key-size'), keyId: 'k', ref }],
      request,
      validate: () => ({ ok: true, value: 1 }),
      policy: 'retry-then-fallback',
      retryMax: 2,
      backoffMs: [1000],
      startedAt: 0,
    });
    const sizes = {
      fallback: Object.keys(fallback.context).length,
      provider: Object.keys(ref.getSnapshot().context).length,
      breaker: Object.keys(
        createActor(breakerMachine, { input: { providerId: 'claude', threshold: 5, recoveryMs: 1000 } }).getSnapshot().context,
      ).length,
      keyBook: Object.keys(
        createActor(keyBookMachine, { input: { providerId: 'claude', quarantineMs: 1, coolingMs: 1, maxKeys: 1 } }).getSnapshot()
          .context,
      ).length,
    };
    for (const [machine, size] of Object.entries(sizes)) expect(size, machine).toBeLessThan(fieldBound);
    expect(sizes.fallback).toBe(12);
  });
});
