/**
 * Model-based test of the running service's circuit breaker. The model is
 * breaker.model.ts (the production breaker machine as the service shows it from outside); every path of
 * its edge cover drives the real service over HTTP — the real SDKs against the emulator, its faults as
 * the events, the operator's route for the controls, the service's own `retryAt` for time passing —
 * and after every step checks what `GET /v1/providers` shows against the model's state: the breaker's
 * state, its count, `forced`, `retryAt − openedAt`, the number of openings, and that an open breaker
 * refuses at once without an upstream call. In `closed` and half-open the checks also make the
 * provider's user-side failures happen (401, 429, quota; TimelyGPT's 401 from `authenticate` and its
 * twice-answered 401 from `llm-completion`) and require that none is a FAILURE: the attempt says
 * `countedByBreaker: false` and the breaker's state and count stay as they were. All three providers
 * are walked at once, each on its own breaker. The whole walk runs twice: on one instance alone, and on one
 * with REDIS_URL, where the fleet decides (see `settled`).
 */
import { describe, expect, it } from 'vitest';
import { serializeSnapshot } from 'xstate/graph';
import { breakerMachine } from '../../src/machines/breaker.machine.js';
import { providerIds, type ProviderId } from '../../src/providers/index.js';
import { breakerModel, modelThreshold } from './breaker.model.js';
import { statePaths, transitionLines } from './machine-edges.js';
import {
  attemptsOf,
  controlBreaker,
  eventually,
  freshKey,
  generate,
  pastTime,
  providerItem,
  modeEnv,
  startModelService,
  walkEachProvider,
  type ServiceMode,
  upstreamCalls,
  userSideFailures,
  type BreakerItem,
  type Harness,
  type HttpResult,
} from './service-rig.js';
import { edgeCover, expectComplete } from './walk.js';

/** The production lines the model leaves out: a single instance without Redis never hears the fleet. */
const fleetOnly = [
  '(root) --breaker.synced--> closed',
  '(root) --breaker.synced--> forcedOpen',
  '(root) --breaker.synced--> halfOpen',
  '(root) --breaker.synced--> open',
  '(root) --breaker.unshared--> (stays)',
  'closed --breaker.synced--> (stays)',
  'forcedOpen --breaker.synced--> (stays)',
  'halfOpen --breaker.synced--> (stays)',
  'open --breaker.synced--> open',
];

/**
 * Production lines the model leaves out: an admission asked of a breaker that answers without moving
 * (granted while closed, refused while open or forced open or while another probe runs). The walks see
 * each of these as an observation of a step (a call served, or refused without an upstream call).
 */
const admissionAnswers = [
  'closed --breaker.admit--> (stays)',
  'forcedOpen --breaker.admit--> (stays)',
  'halfOpen.awaitingProbe --breaker.admit--> (stays)',
  'halfOpen.probing --breaker.admit--> (stays)',
  'open --breaker.admit--> (stays)',
];

/**
 * Production lines the model leaves out: a question about the next admission (`breaker.status`, asked by
 * a call's attempt after a failure), answered without moving. The walks see its answer as a retry that
 * goes at once rather than after a backoff.
 */
const statusAnswers = [
  '(root) --breaker.status--> (stays)',
  'closed --breaker.status--> (stays)',
  'halfOpen.awaitingProbe --breaker.status--> (stays)',
];

describe('the breaker model mirrors src/machines/breaker.machine.ts', () => {
  it('has the same state nodes', () => {
    expect(statePaths(breakerModel)).toEqual(statePaths(breakerMachine));
  });

  it("has the same transitions (event and target per state), the fleet's left out and `after` as a time event", () => {
    const production = transitionLines(breakerMachine);
    expect(production.filter((line) => fleetOnly.includes(line))).toEqual(fleetOnly);
    expect(production.filter((line) => admissionAnswers.includes(line))).toEqual(admissionAnswers);
    expect(production.filter((line) => statusAnswers.includes(line))).toEqual(statusAnswers);
    const leftOut = [...fleetOnly, ...admissionAnswers, ...statusAnswers];
    expect(transitionLines(breakerModel)).toEqual(production.filter((line) => !leftOut.includes(line)));
  });
});

const recoveryMs = 600;
/**
 * A held probe that fails does so by this timeout (the emulator's `hang`); long enough that no answer
 * of a loaded machine reaches it.
 */
const providerTimeoutMs = 2000;
/** A held probe that succeeds answers after this (the emulator's `slow`). */
const slowProbeMs = 200;

/** How much of the open period must be left for the open breaker's refusal to be checked. */
const refusalMarginMs = 350;

const cover = edgeCover(breakerModel);

it('covers 8 vertices (states with their count) and 34 edges, one path per edge', () => {
  expect(cover.vertices).toBe(8);
  expect(cover.edges).toBe(34);
  expect(cover.paths).toHaveLength(34);
});


let harness: Harness;

/**
 * How the walk runs: one instance on its own (the breaker decides before the call's reply), or one with
 * REDIS_URL, where the breaker's decision is the fleet's (the breaker machine applied to the record in
 * Redis, src/fleet/fleet-breaker.ts) and reaches the instance as `breaker.synced` a store round trip
 * after the call's reply. With Redis every state check first waits, at most `fleetSettleMs`, for the
 * service to show the model's state; then the same checks as alone.
 */
let mode: ServiceMode = 'alone';
const fleetSettleMs = 2000;

function startFor(walkMode: ServiceMode): Promise<Harness> {
  return startModelService({
    BREAKER_FAILURE_THRESHOLD: String(modelThreshold),
    BREAKER_MIN_DISTINCT_KEYS: '1',
    BREAKER_RECOVERY_MS: String(recoveryMs),
    // The open period does not grow here (its doubling is test/http/open-period.test.ts's).
    BREAKER_MAX_RECOVERY_MS: String(recoveryMs),
    PROVIDER_TIMEOUT_MS: String(providerTimeoutMs),
    ...modeEnv(walkMode, 'breaker-model'),
  });
}

/** The provider as the service shows it, once it shows `expected` (with Redis: within `fleetSettleMs`). */
function settled(provider: ProviderId, expected: (breaker: BreakerItem) => boolean, what: string): Promise<ProviderView> {
  if (mode === 'alone') return providerItem(harness, provider);
  return eventually(() => providerItem(harness, provider), (item) => expected(item.breaker), `${provider} to show ${what}`, fleetSettleMs);
}

type ProviderView = Awaited<ReturnType<typeof providerItem>>;

function expectOneAttempt(result: HttpResult, expected: Record<string, unknown>): void {
  const attempts = attemptsOf(result);
  expect(attempts, result.text.slice(0, 400)).toHaveLength(1);
  expect(attempts[0]).toMatchObject(expected);
}

/** What of the breaker a user-side failure must leave as it is. */
function breakerRecord(breaker: BreakerItem): unknown {
  const { state, consecutiveFailures, distinctKeys, openedAt, retryAt, forced } = breaker;
  return { state, consecutiveFailures, distinctKeys, openedAt, retryAt, forced };
}

/** The vertices (state and count) where a provider's user-side failures were already made to happen. */
const userSideChecked = new Map<ProviderId, Set<string>>(providerIds.map((id) => [id, new Set<string>()]));

/** True the first time `provider`'s walk reaches this vertex of the model (the heavy checks run once each). */
function firstVisit(provider: ProviderId, snapshot: Parameters<typeof serializeSnapshot>[0]): boolean {
  const seen = userSideChecked.get(provider) ?? new Set<string>();
  const key = serializeSnapshot(snapshot);
  if (seen.has(key)) return false;
  seen.add(key);
  return true;
}

/** Each user-side failure of the provider goes upstream and is no FAILURE: nothing of the breaker moves. */
async function expectUserSideFailuresUncounted(provider: ProviderId): Promise<void> {
  for (const failure of userSideFailures(provider)) {
    const before = (await providerItem(harness, provider)).breaker;
    const result = await failure.run(harness);
    expectOneAttempt(result, { provider, outcome: 'failed', errorClass: failure.errorClass, countedByBreaker: false });
    const after = (await providerItem(harness, provider)).breaker;
    expect(breakerRecord(after), `${provider} ${failure.name}`).toEqual(breakerRecord(before));
  }
}

/** A request now is refused by the breaker at once: a `circuit_open` skip, no upstream call. */
async function expectRefused(provider: ProviderId, key: string): Promise<void> {
  const calls = upstreamCalls(harness, provider);
  const result = await generate(harness, [{ provider, key }]);
  expect(result.status, result.text).toBe(503);
  expectOneAttempt(result, { provider, outcome: 'skipped', reason: 'circuit_open', countedByBreaker: false });
  expect(upstreamCalls(harness, provider)).toBe(calls);
}

type Snapshot = Parameters<typeof serializeSnapshot>[0] & { context: { failures: number } };

interface HeldProbe {
  readonly controller: AbortController;
  readonly response: Promise<HttpResult | Error>;
}

/** Walks one path of the model on `provider`'s breaker, from a reset breaker. */
async function walk(provider: ProviderId, path: (typeof cover.paths)[number]): Promise<void> {
  await controlBreaker(harness, provider, 'reset');
  const key = freshKey(provider);
  let opens = (await providerItem(harness, provider)).stats.opens;
  let held: HeldProbe | undefined;
  const send = (signal?: AbortSignal) => generate(harness, [{ provider, key }], signal);

  /** The held probe's answer (the probe is no longer held). */
  const settleHeld = async (): Promise<HttpResult> => {
    if (held === undefined) throw new Error('no probe in flight');
    const result = await held.response;
    held = undefined;
    if (result instanceof Error) throw result;
    return result;
  };
  /** The caller of the held probe goes away: an abort, which the breaker hears as `call.ignored`. */
  const abandonHeld = async (): Promise<void> => {
    if (held === undefined) return;
    const ignored = (await providerItem(harness, provider)).stats.ignored;
    held.controller.abort();
    await held.response;
    held = undefined;
    await eventually(() => providerItem(harness, provider), (item) => item.stats.ignored > ignored, 'the abort to reach the breaker');
  };
  const control = (action: 'reset' | 'release' | 'forceOpen') => async () => {
    await controlBreaker(harness, provider, action);
    if (action === 'forceOpen') opens += 1;
    // A probe still in flight ends as an abort: `call.ignored` changes nothing in closed or forced open.
    await abandonHeld();
  };

  const events = {
    'call.failed': async (step: { state: { matches(value: string): boolean } }) => {
      if (held !== undefined) {
        // The held probe (`hang`) fails by the provider timeout: a provider-side class, counted.
        expectOneAttempt(await settleHeld(), { provider, outcome: 'failed', errorClass: 'timeout', countedByBreaker: true });
      } else {
        harness.fault({ provider, fault: 'http500', count: 1 });
        expectOneAttempt(await send(), { provider, outcome: 'failed', errorClass: 'server_error', countedByBreaker: true });
      }
      if (step.state.matches('open')) opens += 1;
    },
    'call.succeeded': async () => {
      const result = held === undefined ? await send() : await settleHeld();
      expect(result.status, result.text).toBe(200);
      expectOneAttempt(result, { provider, outcome: 'succeeded', countedByBreaker: false });
    },
    'call.ignored': abandonHeld,
    'breaker.admit': async (step: unknown) => {
      const item = await providerItem(harness, provider);
      if (item.breaker.state === 'open') await pastTime(item.breaker.retryAt);
      // The probe is held in flight, so the service can be seen half-open with a probe out: it answers
      // after a while if the path's next event is its success, else never (a timeout, or an abort).
      const next = path.steps[path.steps.indexOf(step as never) + 1]?.event.type;
      harness.fault(
        next === 'call.succeeded'
          ? { provider, fault: 'slow', ms: slowProbeMs, count: 1 }
          : { provider, fault: 'hang', count: 1 },
      );
      const calls = upstreamCalls(harness, provider);
      const controller = new AbortController();
      held = { controller, response: send(controller.signal).catch((error: Error) => error) };
      await eventually(() => upstreamCalls(harness, provider), (count) => count > calls, 'the probe to reach the provider');
    },
    'time.recoveryElapsed': async () => {
      await eventually(() => providerItem(harness, provider), (item) => item.breaker.state === 'halfOpen', 'the breaker to read halfOpen', recoveryMs * 20);
    },
    'breaker.reset': control('reset'),
    'breaker.release': control('release'),
    'breaker.forceOpen': control('forceOpen'),
  };

  const states = {
    closed: async (snapshot: Snapshot) => {
      const item = await settled(provider, (b) => b.state === 'closed' && b.consecutiveFailures === snapshot.context.failures, 'closed');
      expect(item.breaker).toMatchObject({ state: 'closed', consecutiveFailures: snapshot.context.failures, forced: false, retryAt: null });
      expect(item.stats.opens).toBe(opens);
      // With 0 failures and with 1 (one below the threshold, where a FAILURE would open it).
      if (firstVisit(provider, snapshot)) await expectUserSideFailuresUncounted(provider);
    },
    open: async () => {
      const { breaker, stats } = await settled(provider, (b) => b.state !== 'closed' && !b.forced, 'open');
      const retryAt = Date.parse(breaker.retryAt ?? '');
      // Once `retryAt` has passed the timer may have moved it on (docs/api.md: open or halfOpen).
      expect(breaker.state).toBe(Date.now() >= retryAt && breaker.state === 'halfOpen' ? 'halfOpen' : 'open');
      expect(breaker).toMatchObject({ consecutiveFailures: modelThreshold, forced: false });
      expect(retryAt - Date.parse(breaker.openedAt ?? '')).toBe(recoveryMs);
      expect(stats.opens).toBe(opens);
      // Refused at once while `retryAt` is well ahead (a request after it would be the probe; the margin
      // is for a loaded machine, where a request can take a few hundred ms to be admitted).
      if (retryAt - Date.now() > refusalMarginMs) await expectRefused(provider, key);
    },
    forcedOpen: async (snapshot: Snapshot) => {
      const item = await settled(provider, (b) => b.forced, 'forced open');
      expect(item.breaker).toMatchObject({ state: 'open', forced: true, retryAt: null, consecutiveFailures: snapshot.context.failures });
      expect(item.stats.opens).toBe(opens);
      await expectRefused(provider, key);
    },
    'halfOpen.awaitingProbe': async (snapshot: Snapshot) => {
      const item = await settled(provider, (b) => b.state === 'halfOpen', 'half-open');
      expect(item.breaker).toMatchObject({ state: 'halfOpen', consecutiveFailures: modelThreshold, forced: false });
      expect(item.stats.opens).toBe(opens);
      // Each of these calls is admitted as the probe; its user-side failure frees the slot again.
      if (firstVisit(provider, snapshot)) await expectUserSideFailuresUncounted(provider);
    },
    'halfOpen.probing': async () => {
      const item = await settled(provider, (b) => b.state === 'halfOpen', 'half-open');
      expect(item.breaker).toMatchObject({ state: 'halfOpen', consecutiveFailures: modelThreshold, forced: false });
      expect(item.stats.opens).toBe(opens);
      // One probe at a time: everything else is refused while it is out.
      await expectRefused(provider, key);
    },
  };

  expectComplete([path as never], events, states);
  try {
    await path.test({ events: events as never, states: states as never });
  } finally {
    held?.controller.abort();
  }
}

walkEachProvider('the running service follows the breaker model on every edge', {
  start: async (walkMode) => {
    mode = walkMode;
    for (const seen of userSideChecked.values()) seen.clear();
    harness = await startFor(walkMode);
  },
  stop: () => harness.close(),
  walk: async (provider) => {
    for (const path of cover.paths) await walk(provider, path);
    // The user-side failures were made to happen where a FAILURE would show: closed with 0 and with 1
    // failure, and half-open awaiting its probe.
    expect(userSideChecked.get(provider)?.size).toBe(3);
  },
});
