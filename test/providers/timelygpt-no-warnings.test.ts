/**
 * A TimelyGPT call made through the gateway makes XState warn about nothing. The provider starts its
 * upstream call from inside one of its machine's actions, and XState's development build warns about any
 * `assign()` made while a custom action runs, which creating the session actor there did (its initial
 * context goes through `assign()`): 120 such lines in one CI log.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Gateway } from '../../src/actors/types.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { request } from '../core/gateway-harness.js';
import { chainOf, startGateway } from '../e2e/rig.js';

let emulator: Emulator;
let gateway: Gateway;

beforeAll(async () => {
  emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
  gateway = startGateway(emulator);
});

afterAll(async () => {
  await gateway.stop();
  await emulator.close();
});

describe('TimelyGPT through the gateway', () => {
  it('answers without a console warning (the session actor is created after the calling action)', async () => {
    const warn = vi.spyOn(console, 'warn');
    try {
      const outcome = await gateway.generate({
        request,
        validate: (answer) => ({ ok: true, value: answer.text }),
        chain: chainOf('timelygpt'),
      });
      expect(outcome.attempts.map((attempt) => [attempt.provider, attempt.outcome])).toEqual([
        ['timelygpt', 'succeeded'],
      ]);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });
});
