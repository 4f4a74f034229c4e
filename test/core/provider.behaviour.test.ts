/**
 * The breaker's half-open rules as behaviour through the gateway's public API (docs/errors.md "Rules that
 * matter most", docs/errors.md "Resilience rules"), with fake timers and scripted upstreams:
 * - a probe that ends user-side, with invalid output, or aborted proves nothing: the slot is freed
 *   and the next call probes (the provider does not refuse every call until a reset);
 * - time lives in the data: once the clock passes `retryAt` a call is admitted as the probe even if
 *   no timer fired, and not one millisecond before;
 * - the probe's counted failure re-opens from that failure for a doubled open period (2 × recovery).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ProviderId } from '../../src/providers/index.js';
import { settle, startRig, t0, type Call, type Rig } from './behaviour-support.js';

const recoveryMs = 1000;
let rig: Rig | undefined;

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(t0);
});

afterEach(async () => {
  await rig?.gateway.stop();
  rig = undefined;
  vi.useRealTimers();
});

/** A gateway whose Claude breaker opened at t0 (threshold 1), then plays `calls`. */
async function openedAtT0(...calls: Call[]): Promise<Rig> {
  rig = startRig({
    scripts: { claude: [{ failure: 'server_error' }, ...calls] },
    breaker: { threshold: 1, recoveryMs },
  });
  const first = rig.generate(['claude']);
  await settle();
  expect((await first).status).toBe('failed');
  expect(rig.gateway.provider('claude').breaker.state).toBe('open');
  return rig;
}

const state = (r: Rig, provider: ProviderId = 'claude') => r.gateway.provider(provider).breaker.state;

/** Runs one request to Claude alone and lets it finish. */
async function request(r: Rig) {
  const pending = r.generate(['claude']);
  await settle();
  return pending;
}

describe('half-open: a probe that proves nothing frees the slot', () => {
  it.each(['auth', 'rate_limited', 'quota_exhausted', 'bad_request'] as const)(
    'a probe ending in %s leaves the breaker half-open, and the next call is admitted as the probe',
    async (errorClass) => {
      const r = await openedAtT0({ failure: errorClass }, { answer: 'valid' });
      await vi.advanceTimersByTimeAsync(recoveryMs);
      expect(state(r)).toBe('halfOpen');
      expect((await request(r)).status).toBe('failed');
      expect(state(r)).toBe('halfOpen');
      const next = await request(r);
      expect(next.status).toBe('succeeded');
      expect(r.upstreams.claude.calledAt).toHaveLength(3);
      expect(state(r)).toBe('closed');
    },
  );

  it('a probe answering invalid output frees the slot: its re-ask is admitted and closes the breaker', async () => {
    const r = await openedAtT0({ answer: 'invalid' }, { answer: 'valid' });
    await vi.advanceTimersByTimeAsync(recoveryMs);
    const outcome = await request(r);
    expect(outcome.status).toBe('succeeded');
    expect(r.upstreams.claude.calledAt).toHaveLength(3);
    expect(state(r)).toBe('closed');
  });

  it('a probe the caller aborts frees the slot: the next call is admitted as the probe', async () => {
    const r = await openedAtT0({ hang: true }, { answer: 'valid' });
    await vi.advanceTimersByTimeAsync(recoveryMs);
    const controller = new AbortController();
    const aborted = r.generate(['claude'], controller.signal);
    await settle();
    expect(r.upstreams.claude.calledAt).toHaveLength(2);
    controller.abort();
    await settle();
    expect((await aborted).status).toBe('aborted');
    expect(state(r)).toBe('halfOpen');
    expect((await request(r)).status).toBe('succeeded');
    expect(r.upstreams.claude.calledAt).toHaveLength(3);
    expect(state(r)).toBe('closed');
  });

  it('while the probe is in flight every other call is refused without reaching the provider', async () => {
    const r = await openedAtT0({ hang: true });
    await vi.advanceTimersByTimeAsync(recoveryMs);
    void r.generate(['claude']);
    await settle();
    const refused = await request(r);
    expect(refused.status).toBe('failed');
    expect(refused.attempts).toMatchObject([
      { provider: 'claude', outcome: 'skipped', reason: 'circuit_open' },
    ]);
    expect(r.upstreams.claude.calledAt).toHaveLength(2);
  });
});

describe('time lives in the data: retryAt admits the probe even if no timer fired', () => {
  it('admits a probe at retryAt with the timer not fired, and it closes the breaker', async () => {
    const r = await openedAtT0({ answer: 'valid' });
    // The clock moves, the timers do not (a busy event loop, a state restored from elsewhere).
    vi.setSystemTime(t0 + recoveryMs);
    expect(state(r)).toBe('open');
    const outcome = await request(r);
    expect(outcome.status).toBe('succeeded');
    expect(r.upstreams.claude.calledAt).toEqual([0, recoveryMs]);
    expect(state(r)).toBe('closed');
  });

  it('refuses a call one millisecond before retryAt, without reaching the provider', async () => {
    const r = await openedAtT0({ answer: 'valid' });
    vi.setSystemTime(t0 + recoveryMs - 1);
    const outcome = await request(r);
    expect(outcome.attempts).toMatchObject([{ outcome: 'skipped', reason: 'circuit_open' }]);
    expect(r.upstreams.claude.calledAt).toEqual([0]);
    expect(state(r)).toBe('open');
  });
});

describe("the probe's counted failure re-opens for a whole recovery time from that failure", () => {
  it('re-opens on a server_error probe, refuses until 2000 ms (the doubled period) after it, then probes again', async () => {
    const r = await openedAtT0({ failure: 'server_error' }, { answer: 'valid' });
    await vi.advanceTimersByTimeAsync(recoveryMs + 500);
    expect((await request(r)).status).toBe('failed');
    expect(state(r)).toBe('open');
    await vi.advanceTimersByTimeAsync(2000 - 1);
    expect(state(r)).toBe('open');
    expect((await request(r)).attempts).toMatchObject([{ reason: 'circuit_open' }]);
    await vi.advanceTimersByTimeAsync(1);
    expect(state(r)).toBe('halfOpen');
    expect((await request(r)).status).toBe('succeeded');
    expect(r.upstreams.claude.calledAt).toEqual([0, 1500, 3500]);
    expect(state(r)).toBe('closed');
  });
});
