/**
 * Model-based test of the running service's per-key health. The model is
 * key-health.model.ts (one key's machine as the service shows it from outside); every path of its edge
 * cover drives the real service over HTTP with a key of its own — the provider's own 401, quota and
 * 429 bodies and its 500 as the emulator's `respond` / `http500` faults, a streak of 500s from the key
 * alone for the breaker's key trip, the `until` the service shows for time passing — and after every
 * step checks `GET /v1/keys/status` against the model's state: healthy, or refused with the class that
 * refused it and an `until` one period after the failure; a refused key is skipped without an upstream
 * call, and while its probe is out every other call with it is skipped too. Each user-side failure is
 * also checked to be no FAILURE: its attempt says `countedByBreaker: false`, the breaker stays closed
 * with the count it had. All three providers are walked at once, on one instance alone and again on one
 * with REDIS_URL (key health shared through the real Redis).
 */
import { describe, expect, it } from 'vitest';
import { keyHealthMachine } from '../../src/machines/key-health.machine.js';
import type { ProviderId } from '../../src/providers/index.js';
import {
  coolingClasses,
  keyHealthModel,
  modelErrorClasses,
  quarantineClasses,
  type KeyHealthModelEvent,
  type ModelErrorClass,
} from './key-health.model.js';
import { statePaths, transitionLines } from './machine-edges.js';
import {
  attemptsOf,
  controlBreaker,
  eventually,
  freshKey,
  generate,
  keyStatus,
  pastTime,
  providerItem,
  modeEnv,
  startModelService,
  upstreamCalls,
  walkEachProvider,
  wireFault,
  type Harness,
  type HttpResult,
  type WireFailure,
} from './service-rig.js';
import { edgeCover, expectComplete } from './walk.js';

/** The production lines the model leaves out, and why. */
const leftOut = {
  /** One instance without Redis never hears another's record. */
  fleet: [
    '(root) --key.synced--> cooling',
    '(root) --key.synced--> healthy',
    '(root) --key.synced--> quarantined',
    'cooling --key.synced--> (stays)',
    'cooling.probing --key.synced--> cooling.waiting',
    'cooling.waiting --key.synced--> cooling.waiting',
    'healthy --key.synced--> (stays)',
    'quarantined --key.synced--> (stays)',
    'quarantined.probing --key.synced--> quarantined.waiting',
    'quarantined.waiting --key.synced--> quarantined.waiting',
  ],
  /**
   * A failure or a trip of a key that is refused: only from a call already in flight when the key was
   * refused (the service makes no call with a refused key, and the probe's own results are modelled).
   */
  inFlightWhileRefused: [
    'cooling --key.failed--> quarantined',
    'cooling --key.tripped--> quarantined',
    'cooling.waiting --key.failed--> (stays)',
    'quarantined.probing --key.tripped--> quarantined.waiting',
    'quarantined.waiting --key.failed--> (stays)',
    'quarantined.waiting --key.tripped--> (stays)',
  ],
  /**
   * The key's answer to `key.admit` (admitted, or refused while it waits before `until` or probes),
   * which changes no state: the model observes it in each step instead (a call served, or skipped
   * without an upstream call), and the probe itself is `key.called`.
   */
  admissionAnswers: [
    'cooling.probing --key.admit--> (stays)',
    'cooling.waiting --key.admit--> (stays)',
    'healthy --key.admit--> (stays)',
    'quarantined.probing --key.admit--> (stays)',
    'quarantined.waiting --key.admit--> (stays)',
  ],
};

describe('the key-health model mirrors src/machines/key-health.machine.ts', () => {
  it('has the same state nodes', () => {
    expect(statePaths(keyHealthModel)).toEqual(statePaths(keyHealthMachine));
  });

  it('has the same transitions (event and target per state), but those only the fleet or a call in flight can cause, and the admissions answered without a change of state', () => {
    const production = transitionLines(keyHealthMachine);
    const excluded = [...leftOut.fleet, ...leftOut.inFlightWhileRefused, ...leftOut.admissionAnswers];
    expect(production.filter((line) => excluded.includes(line))).toEqual([...excluded].sort());
    expect(transitionLines(keyHealthModel)).toEqual(production.filter((line) => !excluded.includes(line)));
  });
});

const quarantineMs = 800;
const coolingMs = 800;
/** How much of a refusal must be left for its skip to be checked (a loaded machine admits slowly). */
const skipMarginMs = 400;
const slowProbeMs = 200;
/** Two counted failures of one key trip it (the breaker's quorum of 2 keys is not met). */
const threshold = 2;

const allEvents = (): KeyHealthModelEvent[] => [
  { type: 'key.called' },
  { type: 'key.answered' },
  { type: 'key.tripped' },
  ...modelErrorClasses.map((errorClass) => ({ type: 'key.failed' as const, errorClass })),
];

const cover = edgeCover(keyHealthModel, allEvents);

it('covers 5 states and 17 edges (4 classes from healthy and from each probe), one path per edge', () => {
  expect(cover.vertices).toBe(5);
  expect(cover.edges).toBe(17);
  expect(cover.paths).toHaveLength(17);
});

let harness: Harness;

const wireFailureOf: Partial<Record<ModelErrorClass, WireFailure>> = {
  auth: 'auth',
  quota_exhausted: 'quota',
  rate_limited: 'rateLimit',
};

function expectOneAttempt(result: HttpResult, expected: Record<string, unknown>): void {
  const attempts = attemptsOf(result);
  expect(attempts, result.text.slice(0, 400)).toHaveLength(1);
  expect(attempts[0]).toMatchObject(expected);
}

/** What the key's refusal should look like: its class and the time its period started from. */
interface Refusal {
  readonly state: 'quarantined' | 'cooling';
  readonly errorClass: string;
  /** Wall clock just before the failure was caused: `until` is at least one period after it. */
  readonly since: number;
  readonly periodMs: number;
}

/** Walks one path of the model with a fresh key of `provider`. */
async function walk(provider: ProviderId, path: (typeof cover.paths)[number]): Promise<void> {
  await controlBreaker(harness, provider, 'reset');
  const key = freshKey(provider);
  const send = (signal?: AbortSignal) => generate(harness, [{ provider, key }], signal);
  let refusal: Refusal | undefined;
  /** A probe whose failure proved nothing leaves the old, passed `until`: the next call probes. */
  let probeDue = false;
  let held: Promise<HttpResult> | undefined;

  const fail = async (errorClass: ModelErrorClass): Promise<void> => {
    const wireFailure = wireFailureOf[errorClass];
    const before = (await providerItem(harness, provider)).breaker;
    const since = Date.now();
    if (wireFailure === undefined) {
      harness.fault({ provider, fault: 'http500', count: 1 });
    } else {
      // TimelyGPT re-authenticates once after a 401 from llm-completion: the second 401 is the failure.
      harness.fault(wireFault(provider, wireFailure, provider === 'timelygpt' && wireFailure === 'auth' ? 2 : 1));
    }
    const result = await send();
    const counted = wireFailure === undefined;
    // Out to the provider (a probe, if the key was refused), never skipped.
    expectOneAttempt(result, { provider, outcome: 'failed', errorClass, countedByBreaker: counted });
    const after = (await providerItem(harness, provider)).breaker;
    if (counted) {
      // Keep the streak from tripping the key later in the path (a trip is its own event).
      await controlBreaker(harness, provider, 'reset');
    } else {
      // A user-side failure is no FAILURE: the breaker stays as it was.
      expect(after).toMatchObject({ state: 'closed', consecutiveFailures: before.consecutiveFailures, distinctKeys: before.distinctKeys });
    }
    if ((quarantineClasses as readonly string[]).includes(errorClass)) {
      refusal = { state: 'quarantined', errorClass, since, periodMs: quarantineMs };
      probeDue = false;
    } else if ((coolingClasses as readonly string[]).includes(errorClass)) {
      refusal = { state: 'cooling', errorClass, since, periodMs: coolingMs };
      probeDue = false;
    } else if (refusal !== undefined) {
      probeDue = true;
    }
  };

  const events = {
    'key.failed': (step: { event: KeyHealthModelEvent }) => fail((step.event as { errorClass: ModelErrorClass }).errorClass),
    'key.tripped': async () => {
      const since = Date.now();
      harness.fault({ provider, fault: 'http500', count: threshold });
      for (let call = 0; call < threshold; call += 1)
        expectOneAttempt(await send(), { provider, outcome: 'failed', errorClass: 'server_error', countedByBreaker: true });
      // The streak came from one key: the provider stays closed, the key gets a circuit of its own.
      expect((await providerItem(harness, provider)).breaker).toMatchObject({ state: 'closed', distinctKeys: 1 });
      await eventually(() => keyStatus(harness, provider, key), (item) => item.state === 'quarantined', 'the key to be tripped');
      await controlBreaker(harness, provider, 'reset');
      refusal = { state: 'quarantined', errorClass: 'server_error', since, periodMs: quarantineMs };
    },
    'key.called': async (step: unknown) => {
      const status = await keyStatus(harness, provider, key);
      if (status.state !== 'healthy') await pastTime(status.until);
      const next = path.steps[path.steps.indexOf(step as never) + 1]?.event.type;
      // A probe that answers is held in flight, so the key can be seen with its probe out; a probe that
      // fails is the next event's own call (its answer comes at once: nothing to see in between).
      if (next !== 'key.answered') return;
      harness.fault({ provider, fault: 'slow', ms: slowProbeMs, count: 1 });
      const calls = upstreamCalls(harness, provider);
      held = send();
      await eventually(() => upstreamCalls(harness, provider), (count) => count > calls, 'the probe to reach the provider');
    },
    'key.answered': async () => {
      if (held === undefined) throw new Error('no probe in flight');
      const result = await held;
      held = undefined;
      expect(result.status, result.text).toBe(200);
      expectOneAttempt(result, { provider, outcome: 'succeeded' });
      refusal = undefined;
    },
  };

  /** A refused key: shown with its class and `until`, and skipped without an upstream call. */
  const expectRefused = async (state: 'quarantined' | 'cooling') => {
    if (probeDue) {
      // The refusal's `until` has passed and no probe is out: the next call goes out.
      expect(await keyStatus(harness, provider, key)).toEqual({ provider, state: 'healthy' });
      return;
    }
    if (refusal === undefined) throw new Error('refused without a refusing event');
    expect(refusal.state).toBe(state);
    const status = await keyStatus(harness, provider, key);
    const now = Date.now();
    if (status.state === 'healthy') {
      // Read after `until` had passed (a slow machine): then it must be at least one period later.
      expect(now).toBeGreaterThanOrEqual(refusal.since + refusal.periodMs);
      return;
    }
    expect(status).toMatchObject({ state, errorClass: refusal.errorClass });
    const until = Date.parse(status.until ?? '');
    expect(until).toBeGreaterThanOrEqual(refusal.since + refusal.periodMs);
    expect(until).toBeLessThanOrEqual(now + refusal.periodMs);
    if (until - Date.now() > skipMarginMs) {
      const calls = upstreamCalls(harness, provider);
      const skipped = await send();
      expectOneAttempt(skipped, {
        provider,
        outcome: 'skipped',
        reason: state === 'quarantined' ? 'key_quarantined' : 'key_cooling',
        errorClass: refusal.errorClass,
        countedByBreaker: false,
      });
      expect(upstreamCalls(harness, provider)).toBe(calls);
    }
  };

  /** The key's probe: held out (every other call skipped), or the next event's call (the key reads healthy). */
  const expectProbing = async (state: 'quarantined' | 'cooling') => {
    const status = await keyStatus(harness, provider, key);
    if (held === undefined) {
      expect(status).toEqual({ provider, state: 'healthy' });
      return;
    }
    expect(status).toMatchObject({ state, errorClass: refusal?.errorClass });
    const calls = upstreamCalls(harness, provider);
    const skipped = await send();
    expectOneAttempt(skipped, { provider, outcome: 'skipped', reason: state === 'quarantined' ? 'key_quarantined' : 'key_cooling' });
    expect(upstreamCalls(harness, provider)).toBe(calls);
  };

  const states = {
    healthy: async () => {
      expect(await keyStatus(harness, provider, key)).toEqual({ provider, state: 'healthy' });
    },
    'quarantined.waiting': () => expectRefused('quarantined'),
    'quarantined.probing': () => expectProbing('quarantined'),
    'cooling.waiting': () => expectRefused('cooling'),
    'cooling.probing': () => expectProbing('cooling'),
  };

  expectComplete([path as never], events, states);
  try {
    await path.test({ events: events as never, states: states as never });
  } finally {
    await held?.catch(() => undefined);
  }
}

walkEachProvider('the running service follows the key-health model on every edge', {
  start: async (mode) => {
    harness = await startModelService({
      BREAKER_FAILURE_THRESHOLD: String(threshold),
      BREAKER_MIN_DISTINCT_KEYS: '2',
      KEY_QUARANTINE_MS: String(quarantineMs),
      KEY_COOLING_MS: String(coolingMs),
      PROVIDER_TIMEOUT_MS: '5000',
      ...modeEnv(mode, 'key-health-model'),
    });
  },
  stop: () => harness.close(),
  walk: async (provider) => {
    for (const path of cover.paths) await walk(provider, path);
  },
});
