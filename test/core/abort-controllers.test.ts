import { describe, expect, it } from 'vitest';
import { createAbortControllers } from '../../src/actors/abort-controllers.js';

/**
 * The generate route reuses its requests' abort controllers (src/actors/abort-controllers.ts): a controller comes back
 * only as good as new, so a reused signal fires for its new call alone.
 */
describe('abort controllers kept for reuse', () => {
  it('hands back a controller that never aborted and that nobody listens to', () => {
    const pool = createAbortControllers();
    const first = pool.take();
    const listener = (): void => undefined;
    first.signal.addEventListener('abort', listener);
    first.signal.removeEventListener('abort', listener);
    pool.giveBack(first);
    expect(pool.size).toBe(1);
    expect(pool.take()).toBe(first);
    expect(pool.size).toBe(0);
  });

  it('drops a controller that aborted, or whose signal someone still listens to', () => {
    const pool = createAbortControllers();
    const aborted = pool.take();
    aborted.abort();
    const listened = pool.take();
    listened.signal.addEventListener('abort', () => undefined);
    const handled = pool.take();
    handled.signal.onabort = () => undefined;
    for (const controller of [aborted, listened, handled]) pool.giveBack(controller);
    expect(pool.size).toBe(0);
    const fresh = pool.take();
    expect([aborted, listened, handled]).not.toContain(fresh);
    expect(fresh.signal.aborted).toBe(false);
  });

  it('keeps at most its limit', () => {
    const pool = createAbortControllers(2);
    for (let index = 0; index < 5; index += 1) pool.giveBack(new AbortController());
    expect(pool.size).toBe(2);
  });
});
