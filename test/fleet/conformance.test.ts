/**
 * Conformance of the two breakers: the same generated event sequences go through the breaker machine
 * (pure `transition`, with its delayed `recoveryTimeout` played by a simulated clock) and through the
 * fleet's Lua script on the real Redis (`createRedisStateStore`), and after every step both must hold
 * the same state, failure count, open count, opening time, retry time, open period (doubled by each
 * failed probe up to the cap, reset on closing), streak key ids (the quorum of distinct keys,
 * BREAKER_MIN_DISTINCT_KEYS 1 to 3) and probe holder, and answer the same admission.
 *
 * Neither side is the oracle of the other's rules: the machine is the design (docs/errors.md "Resilience rules") and the
 * script must follow it. Kept mutants of the script (a probe's counted failure that does not re-open;
 * one that re-opens without growing the open period; one that opens without the quorum; one whose
 * success leaves the streak's keys behind) show the comparison can fail.
 */
import { admit } from '../core/breaker-admit.js';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initialTransition, transition, type SnapshotFrom } from 'xstate';
import type { CountedErrorClass, IgnoredErrorClass } from '../../src/errors/index.js';
import { breakerScript } from '../../src/fleet/breaker-script.js';
import {
  createRedisStateStore,
  type FleetBreakerOperation,
  type RedisStateStore,
} from '../../src/fleet/redis-state-store.js';
import { breakerMachine, type BreakerEvent } from '../../src/machines/breaker.machine.js';
import { redisTestUrl, uniquePrefix } from './support.js';

type BreakerSnapshot = SnapshotFrom<typeof breakerMachine>;

const recoveryMs = 1000;
/** The open period grows 1 s, 2 s, 4 s and stays there: sequences reach the cap. */
const maxRecoveryMs = 4000;
/** Longer than any test: the Redis lease (a wall-clock TTL) must not expire mid-sequence. */
const probeLeaseMs = 600_000;
const startAt = 1_800_000_000_000;

/** One step of a generated sequence. Calls are named by the order of their admission attempt. */
type Step =
  | { readonly kind: 'admit' }
  | { readonly kind: 'succeed'; readonly pick: number }
  | {
      readonly kind: 'fail';
      readonly pick: number;
      readonly errorClass: CountedErrorClass | IgnoredErrorClass;
      /** The key the call used (its id, as a salted fingerprint would be): the quorum counts distinct ones. */
      readonly key: KeyId;
      /** The caller's salted address id (absent: the key votes for the quorum). */
      readonly origin?: string;
    }
  | { readonly kind: 'advance'; readonly ms: number; readonly timersFire: boolean }
  | { readonly kind: 'reset' | 'forceOpen' };

/** docs/errors.md column B, written out: the provider's failures count, the user's state and aborts do not. */
const countedClasses: readonly CountedErrorClass[] = ['server_error', 'overloaded', 'timeout', 'connection'];
const ignoredClasses: readonly IgnoredErrorClass[] = [
  'auth',
  'permission',
  'quota_exhausted',
  'rate_limited',
  'bad_request',
  'context_too_long',
  'not_found',
  'aborted',
  'invalid_output',
];
/** Three keys: enough to reach, and to exceed, every quorum generated (1 to 3). */
const keyIds = ['key-a', 'key-b', 'key-c'] as const;
type KeyId = (typeof keyIds)[number];

const isCounted = (errorClass: CountedErrorClass | IgnoredErrorClass): errorClass is CountedErrorClass =>
  (countedClasses as readonly string[]).includes(errorClass);

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ kind: 'admit' } as const) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('succeed' as const), pick: fc.nat(7) }) },
  {
    weight: 7,
    arbitrary: fc.record({
      kind: fc.constant('fail' as const),
      pick: fc.nat(7),
      errorClass: fc.constantFrom(...countedClasses),
      // Mostly one key: streaks from one key (below the quorum) are common, others mix in.
      key: fc.constantFrom<KeyId>('key-a', 'key-a', 'key-b', 'key-c'),
      // Often an origin (the voter then, whatever the key): one address with many keys, or a few.
      origin: fc.constantFrom<string | undefined>(undefined, undefined, 'addr-1', 'addr-1', 'addr-2'),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('fail' as const),
      pick: fc.nat(7),
      errorClass: fc.constantFrom(...ignoredClasses),
      key: fc.constantFrom(...keyIds),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('advance' as const),
      // Exactly the recovery time, just before it, or anything up to one and a half of it.
      // Or a grown open period (twice, four times the recovery time: the cap), to reach later probes.
      ms: fc.oneof(
        fc.constant(recoveryMs),
        fc.constant(recoveryMs - 1),
        fc.integer({ min: 1, max: 1500 }),
        fc.constant(2 * recoveryMs),
        fc.constant(maxRecoveryMs),
      ),
      // A late timer (a busy event loop): the machine must still admit a probe once retryAt passed.
      timersFire: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.constantFrom({ kind: 'reset' } as const, { kind: 'forceOpen' } as const) },
);

const scenarioArbitrary = fc.record({
  threshold: fc.integer({ min: 1, max: 3 }),
  // Half the sequences without the quorum (1), so probes and re-openings stay frequent.
  quorum: fc.constantFrom(1, 1, 2, 3),
  steps: fc.array(stepArbitrary, { minLength: 1, maxLength: 40, size: 'max' }),
});

/** What both sides are compared on (the fleet's fields; `halfOpen` without its sub-state). */
interface Observed {
  readonly state: 'closed' | 'open' | 'halfOpen' | 'forcedOpen';
  readonly consecutiveFailures: number;
  readonly streakKeys: readonly string[];
  readonly openedAt: number | null;
  readonly retryAt: number | null;
  readonly opens: number;
  readonly openPeriodMs: number;
  readonly probe: string | null;
}

/** The fleet side: the script as the store applies it, plus the probe lease read back from Redis. */
interface ScriptSide {
  apply(
    operation: FleetBreakerOperation,
    now: number,
  ): Promise<{ observed: Omit<Observed, 'probe'>; granted: boolean }>;
  probeHolder(): Promise<string | null>;
}

/**
 * The breaker machine with a simulated clock: `raise` actions with a delay are the machine's timers,
 * delivered when the clock passes them (or later, when a step makes them late); `cancel` drops them.
 */
class MachineSide {
  snapshot: BreakerSnapshot;
  private readonly timers = new Map<string, { due: number; event: { type: string } }>();
  reopenedByProbe = 0;
  lateProbes = 0;
  /** Probe failures whose open period reached the cap (1 s → 2 s → 4 s). */
  cappedPeriods = 0;
  /** Threshold reached with fewer keys than the quorum: the breaker stayed closed and reported the key. */
  keyStreaks = 0;
  /** Openings from closed with a quorum of 2 or more keys. */
  quorumOpenings = 0;

  constructor(
    threshold: number,
    private readonly quorum = 1,
  ) {
    const [snapshot, actions] = initialTransition(breakerMachine, {
      providerId: 'conformance',
      threshold,
      recoveryMs,
      maxRecoveryMs,
      minDistinctKeys: quorum,
    });
    this.snapshot = snapshot;
    this.schedule(actions, startAt);
  }

  send(event: BreakerEvent, now: number): void {
    const before = this.snapshot;
    const [next, actions] = transition(breakerMachine, before, event);
    if (event.type === 'call.failed' && before.matches({ halfOpen: 'probing' }) && next.matches('open')) {
      this.reopenedByProbe += 1;
      if (next.context.openPeriodMs === maxRecoveryMs) this.cappedPeriods += 1;
    }
    if (event.type === 'breaker.admit' && before.matches('open') && next.matches({ halfOpen: 'probing' })) {
      this.lateProbes += 1;
    }
    // The breaker's `breaker.keyStreak` report (emitted, and sent to a parent when it has one).
    if (actions.some((action) => String(action.type) === 'xstate.emit')) this.keyStreaks += 1;
    if (event.type === 'call.failed' && before.matches('closed') && next.matches('open') && this.quorum > 1)
      this.quorumOpenings += 1;
    this.snapshot = next;
    // The breaker's answer to an admission, as it sends it to the asker.
    this.lastAnswer = actions
      .filter((action) => action.type === 'xstate.sendTo')
      .map((action) => (action.params as { event?: { type?: string } }).event?.type ?? '')
      .find((type) => type.startsWith('breaker.') && type !== 'breaker.keyStreak');
    this.schedule(actions, now);
  }

  lastAnswer: string | undefined = undefined;

  /** Delivers the timers due by `now`, earliest first. */
  fireTimers(now: number): void {
    for (;;) {
      const due = [...this.timers.entries()]
        .filter(([, timer]) => timer.due <= now)
        .sort(([, a], [, b]) => a.due - b.due)[0];
      if (due === undefined) return;
      this.timers.delete(due[0]);
      // The machine's own delayed event: typed by xstate, not by BreakerEvent.
      const [next, actions] = transition(
        breakerMachine,
        this.snapshot,
        due[1].event as unknown as BreakerEvent,
      );
      this.snapshot = next;
      this.schedule(actions, due[1].due);
    }
  }

  observed(): Observed {
    const { context } = this.snapshot;
    return {
      state: this.snapshot.matches('closed')
        ? 'closed'
        : this.snapshot.matches('halfOpen')
          ? 'halfOpen'
          : this.snapshot.matches('forcedOpen')
            ? 'forcedOpen'
            : 'open',
      consecutiveFailures: context.consecutiveFailures,
      streakKeys: context.streakKeys,
      openedAt: context.openedAt,
      retryAt: context.retryAt,
      opens: context.opens,
      openPeriodMs: context.openPeriodMs,
      probe: context.probeCallId,
    };
  }

  admits(): boolean {
    return this.snapshot.hasTag('admitting');
  }

  private schedule(actions: readonly { type: string; params?: unknown }[], now: number): void {
    for (const action of actions) {
      const params = (action.params ?? {}) as {
        delay?: unknown;
        id?: unknown;
        event?: unknown;
        sendId?: unknown;
      };
      if (
        action.type === 'xstate.raise' &&
        typeof params.delay === 'number' &&
        typeof params.id === 'string'
      ) {
        this.timers.set(params.id, { due: now + params.delay, event: params.event as { type: string } });
      }
      if (action.type === 'xstate.cancel' && typeof params.sendId === 'string')
        this.timers.delete(params.sendId);
    }
  }
}

/**
 * What the fleet must show for the machine's state at `now`: the script resolves time whenever it
 * is asked (`open` is `halfOpen` once `now >= retryAt`), so a machine whose timer is late is still
 * `open` locally while the fleet already says `halfOpen` (the machine admits its probe all the same).
 */
function expectedFleetView(machine: Observed, now: number): Observed {
  if (machine.state === 'open' && machine.retryAt !== null && now >= machine.retryAt) {
    return { ...machine, state: 'halfOpen' };
  }
  return machine;
}

/** Runs one scenario through both sides; returns the first difference, or undefined. */
async function firstDifference(
  threshold: number,
  steps: readonly Step[],
  script: ScriptSide,
  machine = new MachineSide(threshold),
): Promise<string | undefined> {
  let now = startAt;
  let nextCall = 0;
  const inFlight: string[] = [];
  const compare = async (label: string, fleet: Omit<Observed, 'probe'>): Promise<string | undefined> => {
    const expected = expectedFleetView(machine.observed(), now);
    const actual: Observed = { ...fleet, probe: await script.probeHolder() };
    const same = JSON.stringify(expected) === JSON.stringify(actual);
    return same
      ? undefined
      : `after ${label} at +${now - startAt} ms: machine ${JSON.stringify(expected)}, fleet ${JSON.stringify(actual)}`;
  };
  for (const [index, step] of steps.entries()) {
    const label = `step ${index} ${JSON.stringify(step)}`;
    let fleet: Omit<Observed, 'probe'>;
    switch (step.kind) {
      case 'admit': {
        const callId = `call-${nextCall}`;
        nextCall += 1;
        // The machine's answer: admitting (closed, or half-open with the slot free), or open with its
        // retry time passed (the call becomes the probe). The fleet's: the script's lease.
        // The machine answers by message: `breaker.admitted` or `breaker.rejected`.
        machine.send(admit(callId, now), now);
        const machineAdmits = machine.lastAnswer === 'breaker.admitted';
        const reply = await script.apply({ op: 'acquire', callId }, now);
        if (machineAdmits !== reply.granted) {
          return `${label}: machine admits ${String(machineAdmits)}, fleet grants ${String(reply.granted)}`;
        }
        if (machineAdmits) inFlight.push(callId);
        fleet = reply.observed;
        break;
      }
      case 'succeed':
      case 'fail': {
        if (inFlight.length === 0) continue;
        // Counted from the newest, so the probe (admitted last) settles often.
        const [callId] = inFlight.splice(inFlight.length - 1 - (step.pick % inFlight.length), 1) as [string];
        if (step.kind === 'succeed') {
          machine.send({ type: 'call.succeeded', callId, at: now }, now);
          fleet = (await script.apply({ op: 'succeeded', callId }, now)).observed;
          break;
        }
        const { errorClass, key } = step;
        // The machine hears the event its class makes (column B, as written above); the script gets
        // the class and decides by the error table it was generated from, whatever op it is sent as.
        machine.send(
          isCounted(errorClass)
            ? { type: 'call.failed', callId, errorClass, keyId: key, origin: step.origin, at: now }
            : { type: 'call.ignored', callId, errorClass, at: now },
          now,
        );
        fleet = (await script.apply({ op: 'failed', callId, errorClass, keyId: key, origin: step.origin }, now)).observed;
        break;
      }
      case 'advance': {
        now += step.ms;
        if (step.timersFire) machine.fireTimers(now);
        fleet = (await script.apply({ op: 'read' }, now)).observed;
        break;
      }
      case 'reset':
        machine.send({ type: 'breaker.reset', at: now }, now);
        fleet = (await script.apply({ op: 'reset' }, now)).observed;
        break;
      case 'forceOpen':
        machine.send({ type: 'breaker.forceOpen', at: now }, now);
        fleet = (await script.apply({ op: 'forceOpen' }, now)).observed;
        break;
    }
    const difference = await compare(label, fleet);
    if (difference !== undefined) return difference;
  }
  return undefined;
}

const prefix = uniquePrefix('conformance');
/**
 * The store's threshold and quorum are fixed per store: one store (one connection pair) per
 * threshold and quorum generated.
 */
const stores = new Map<string, RedisStateStore>();
let reader: Redis;

beforeAll(async () => {
  reader = new Redis(redisTestUrl);
  for (const threshold of [1, 2, 3]) {
    for (const quorum of [1, 2, 3]) {
      const store = createRedisStateStore({
        url: redisTestUrl,
        prefix,
        breaker: { threshold, recoveryMs, maxRecoveryMs, minDistinctKeys: quorum },
        probeLeaseMs,
      });
      expect(await store.ready(5000)).toBe(true);
      stores.set(`${threshold}/${quorum}`, store);
    }
  }
});

afterAll(async () => {
  const keys = await reader.keys(`${prefix}*`);
  if (keys.length > 0) await reader.del(...keys);
  reader.disconnect();
  await Promise.all([...stores.values()].map((store) => store.close()));
});

/** The real store, with one fresh provider id (so one fresh fleet breaker) per scenario. */
function storeSide(threshold: number, quorum = 1): ScriptSide {
  const providerId = `p-${randomUUID().slice(0, 8)}`;
  const store = stores.get(`${threshold}/${quorum}`);
  if (store === undefined) throw new Error(`no store for threshold ${threshold} and quorum ${quorum}`);
  return {
    apply: async (operation, now) => {
      const { shared, granted } = await store.breakers.apply(providerId, operation, now);
      const { state, consecutiveFailures, streakKeys, openedAt, retryAt, opens, openPeriodMs } = shared;
      return {
        observed: { state, consecutiveFailures, streakKeys, openedAt, retryAt, opens, openPeriodMs },
        granted,
      };
    },
    probeHolder: async () => holderOf(await reader.get(`${prefix}breaker:${providerId}:probe`)),
  };
}

/** The lease's holder: its value is `callId|startedAt` (the probe's start, for the refused callers' Retry-After). */
function holderOf(lease: string | null): string | null {
  return lease === null ? null : lease.replace(/\|\d+$/, '');
}

/** A script run by EVAL with the store's argument order (for the kept mutant only). */
function rawScriptSide(script: string, threshold: number, quorum = 1): ScriptSide {
  const key = `${prefix}breaker:mutant-${randomUUID().slice(0, 8)}`;
  const time = (value: unknown): number | null => (Number(value) < 0 ? null : Number(value));
  return {
    apply: async (operation, now) => {
      const callId = 'callId' in operation ? operation.callId : '';
      const errorClass = 'errorClass' in operation ? (operation.errorClass ?? '') : '';
      const keyId = 'keyId' in operation ? (operation.keyId ?? '') : '';
      const reply = (await reader.eval(
        script,
        2,
        key,
        `${key}:probe`,
        operation.op,
        now,
        threshold,
        recoveryMs,
        callId,
        probeLeaseMs,
        key,
        maxRecoveryMs,
        quorum,
        errorClass,
        keyId,
      )) as unknown[];
      const [state, failures, openedAt, retryAt, opens, , , openPeriodMs, keys] = reply;
      return {
        observed: {
          state: String(state) as Observed['state'],
          consecutiveFailures: Number(failures),
          streakKeys: String(keys)
            .split(' ')
            .filter((id) => id !== ''),
          openedAt: time(openedAt),
          retryAt: time(retryAt),
          opens: Number(opens),
          openPeriodMs: Number(openPeriodMs),
        },
        granted: Number(reply[9]) === 1,
      };
    },
    probeHolder: async () => holderOf(await reader.get(`${key}:probe`)),
  };
}

describe('the fleet script conforms to the breaker machine (generated sequences, real Redis)', () => {
  it('gives the same states, counts, times, probe and admissions on every generated sequence', async () => {
    const totals = {
      runs: 0,
      reopenedByProbe: 0,
      lateProbes: 0,
      cappedPeriods: 0,
      keyStreaks: 0,
      quorumOpenings: 0,
    };
    await fc.assert(
      fc.asyncProperty(scenarioArbitrary, async ({ threshold, quorum, steps }) => {
        const machine = new MachineSide(threshold, quorum);
        const difference = await firstDifference(threshold, steps, storeSide(threshold, quorum), machine);
        totals.runs += 1;
        totals.reopenedByProbe += machine.reopenedByProbe;
        totals.lateProbes += machine.lateProbes;
        totals.cappedPeriods += machine.cappedPeriods;
        totals.keyStreaks += machine.keyStreaks;
        totals.quorumOpenings += machine.quorumOpenings;
        expect(difference).toBeUndefined();
      }),
      { numRuns: 250 },
    );
    console.log(
      `conformance: ${totals.runs} sequences, ${totals.reopenedByProbe} probe failures re-opened (${totals.cappedPeriods} at the capped period), ${totals.lateProbes} probes admitted on a late timer, ${totals.keyStreaks} key streaks kept closed below the quorum, ${totals.quorumOpenings} openings by a quorum of 2 or 3 keys`,
    );
    // The generator reaches the rules that matter (a sequence set that never re-opens proves nothing).
    expect(totals.reopenedByProbe).toBeGreaterThanOrEqual(5);
    expect(totals.lateProbes).toBeGreaterThanOrEqual(3);
    expect(totals.keyStreaks).toBeGreaterThanOrEqual(5);
    expect(totals.quorumOpenings).toBeGreaterThanOrEqual(3);
  }, 180_000);

  it('agrees through a growing open period: three failed probes (1 s, 2 s, 4 s, 4 s), a success, a new opening', async () => {
    const probeThenFail = (ms: number): Step[] => [
      { kind: 'advance', ms, timersFire: true },
      { kind: 'admit' },
      { kind: 'fail', pick: 0, errorClass: 'timeout', key: 'key-a' },
    ];
    const steps: Step[] = [
      { kind: 'admit' },
      { kind: 'fail', pick: 0, errorClass: 'server_error', key: 'key-a' },
      // A probe admitted only when the grown period has passed, not one recovery time later.
      ...probeThenFail(recoveryMs),
      { kind: 'advance', ms: recoveryMs, timersFire: true },
      { kind: 'admit' },
      ...probeThenFail(recoveryMs),
      ...probeThenFail(maxRecoveryMs),
      { kind: 'advance', ms: maxRecoveryMs, timersFire: false },
      { kind: 'admit' },
      { kind: 'succeed', pick: 0 },
      { kind: 'admit' },
      { kind: 'fail', pick: 0, errorClass: 'connection', key: 'key-a' },
    ];
    const machine = new MachineSide(1);
    expect(await firstDifference(1, steps, storeSide(1), machine)).toBeUndefined();
    expect(machine.reopenedByProbe).toBe(3);
    expect(machine.cappedPeriods).toBe(2);
    // Closed by the probe's success, then opened from closed: the period is back to the recovery time.
    const { openedAt, retryAt, openPeriodMs } = machine.observed();
    expect([openPeriodMs, (retryAt ?? 0) - (openedAt ?? 0)]).toEqual([recoveryMs, recoveryMs]);
  });

  it('catches the kept mutant whose probe failure is counted but does not re-open', async () => {
    const probeFailure =
      "elseif s.state == 'halfOpen' and isProbe then\n    s.period = nextPeriod(s.period)\n    open()\n  end\nelseif op == 'succeeded'";
    expect(breakerScript).toContain(probeFailure);
    const mutant = breakerScript.replace(
      probeFailure,
      "elseif s.state == 'halfOpen' and isProbe then\n    s.failures = s.failures + 1\n    changed = true\n  end\nelseif op == 'succeeded'",
    );
    const steps: Step[] = [
      { kind: 'admit' },
      { kind: 'fail', pick: 0, errorClass: 'server_error', key: 'key-a' },
      { kind: 'advance', ms: recoveryMs, timersFire: true },
      { kind: 'admit' },
      { kind: 'fail', pick: 0, errorClass: 'timeout', key: 'key-a' },
    ];
    expect(await firstDifference(1, steps, storeSide(1))).toBeUndefined();
    expect(await firstDifference(1, steps, rawScriptSide(mutant, 1))).toMatch(/step 4/);
  });

  it('catches the kept mutant whose table counts a 429 (a row of column B flipped in the script)', async () => {
    const countedTable = 'local counted = { ';
    expect(breakerScript).toContain(countedTable);
    const mutant = breakerScript.replace(countedTable, `${countedTable}rate_limited = true, `);
    const steps: Step[] = [
      { kind: 'admit' },
      { kind: 'fail', pick: 0, errorClass: 'rate_limited', key: 'key-a' },
    ];
    expect(await firstDifference(1, steps, storeSide(1))).toBeUndefined();
    expect(await firstDifference(1, steps, rawScriptSide(mutant, 1))).toMatch(/step 1/);
  });

  it('catches the kept mutant whose probe failure re-opens without growing the open period', async () => {
    const growth = '    s.period = nextPeriod(s.period)\n';
    expect(breakerScript).toContain(growth);
    const mutant = breakerScript.replace(growth, '');
    const steps: Step[] = [
      { kind: 'admit' },
      { kind: 'fail', pick: 0, errorClass: 'server_error', key: 'key-a' },
      { kind: 'advance', ms: recoveryMs, timersFire: true },
      { kind: 'admit' },
      { kind: 'fail', pick: 0, errorClass: 'overloaded', key: 'key-a' },
    ];
    expect(await firstDifference(1, steps, storeSide(1))).toBeUndefined();
    // The machine re-opens for 2 s (1 s doubled), the mutant for 1 s again.
    expect(await firstDifference(1, steps, rawScriptSide(mutant, 1))).toMatch(
      /step 4.*"retryAt":1800000003000/,
    );
  });
});

describe('the quorum of distinct keys (BREAKER_MIN_DISTINCT_KEYS), machine and script alike', () => {
  /** One call admitted and failed with `key` (a timeout: counted). */
  const failWith = (key: KeyId): Step[] => [
    { kind: 'admit' },
    { kind: 'fail', pick: 0, errorClass: 'timeout', key },
  ];

  it('stays closed on a streak from one key past the threshold, and opens when a second key fails', async () => {
    // Threshold 2, quorum 2: key-a fails four times (closed, streak keys [key-a]), then key-b once.
    const steps: Step[] = [
      ...failWith('key-a'),
      ...failWith('key-a'),
      ...failWith('key-a'),
      ...failWith('key-a'),
    ];
    const machine = new MachineSide(2, 2);
    expect(
      await firstDifference(2, [...steps, ...failWith('key-b')], storeSide(2, 2), machine),
    ).toBeUndefined();
    expect(machine.keyStreaks).toBe(3);
    expect(machine.observed()).toMatchObject({
      state: 'open',
      consecutiveFailures: 5,
      streakKeys: ['key-a', 'key-b'],
      opens: 1,
    });
  });

  it('keeps at most the quorum of key ids, and forgets them with the streak on a success', async () => {
    const steps: Step[] = [
      ...failWith('key-a'),
      ...failWith('key-b'),
      { kind: 'admit' },
      { kind: 'succeed', pick: 0 },
      ...failWith('key-c'),
      ...failWith('key-a'),
      ...failWith('key-b'),
    ];
    // Threshold 3, quorum 2: [a], [a, b], cleared by the success, [c], [c, a], and b is not kept (3 ≥ 2 keys).
    const exact = new MachineSide(3, 2);
    expect(await firstDifference(3, steps, storeSide(3, 2), exact)).toBeUndefined();
    expect(exact.observed()).toMatchObject({ state: 'open', streakKeys: ['key-c', 'key-a'] });
  });

  it('catches the kept mutant that opens without the quorum (one key opens the provider)', async () => {
    const quorumCheck = 'if shouldOpen(s.failures) and hasQuorum(#keys) then';
    expect(breakerScript).toContain(quorumCheck);
    const mutant = breakerScript.replace(quorumCheck, 'if shouldOpen(s.failures) then');
    const steps: Step[] = [...failWith('key-a'), ...failWith('key-a')];
    expect(await firstDifference(2, steps, storeSide(2, 2), new MachineSide(2, 2))).toBeUndefined();
    expect(await firstDifference(2, steps, rawScriptSide(mutant, 2, 2), new MachineSide(2, 2))).toMatch(
      /step 3.*machine \{"state":"closed".*fleet \{"state":"open"/,
    );
  });

  it("catches the kept mutant whose success leaves the streak's keys behind", async () => {
    const clearOnSuccess = '    s.failures = 0\n    keys = {}\n    changed = true';
    expect(breakerScript).toContain(clearOnSuccess);
    const mutant = breakerScript.replace(clearOnSuccess, '    s.failures = 0\n    changed = true');
    const steps: Step[] = [
      ...failWith('key-a'),
      { kind: 'admit' },
      { kind: 'succeed', pick: 0 },
      ...failWith('key-b'),
      ...failWith('key-b'),
    ];
    expect(await firstDifference(2, steps, storeSide(2, 2), new MachineSide(2, 2))).toBeUndefined();
    expect(await firstDifference(2, steps, rawScriptSide(mutant, 2, 2), new MachineSide(2, 2))).toMatch(
      /step 3/,
    );
  });
});
