/**
 * One runtime: INSPECT only watches. The same fault scripts run through two gateways, one
 * with an inspector attached and one without, must give the same attempts, outcomes, breaker
 * transitions, call records and the same order of what the service tells its listeners; and the
 * inspector must see the actors that served them (each request's fallback run, each upstream call):
 * the runtime it shows is the one that serves.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AnyActor, InspectionEvent } from 'xstate';
import { fail, type Step } from './scripted-adapter.js';
import { input, startHarness, type Harness, type HarnessOptions } from './gateway-harness.js';
import type { ProviderId } from '../../src/providers/index.js';

interface Script {
  readonly name: string;
  readonly options?: HarnessOptions;
  /** Steps per provider, then the requests: each a chain, started `gapMs` after the last one settled. */
  readonly steps: Partial<Record<ProviderId, Step[]>>;
  readonly requests: readonly { readonly chain: ProviderId[]; readonly abortAfterMs?: number }[];
  readonly gapMs?: number;
  /** What the run must show (so a script that stopped exercising its fault fails here). */
  readonly shows: readonly RegExp[];
}

const scripts: readonly Script[] = [
  {
    name: 'retries a server error twice after its backoffs, then falls back',
    steps: { claude: [fail('server_error'), fail('server_error'), fail('server_error')] },
    shows: [/"retry":2,.*"errorClass":"server_error"/, /fallback claude→gpt/],
    requests: [{ chain: ['claude', 'gpt'] }],
  },
  {
    name: 're-asks once after an invalid answer',
    steps: { claude: [{ kind: 'answer', text: '{"ok":false}' }] },
    shows: [/"errorClass":"invalid_output"/, /"status":"succeeded"/],
    requests: [{ chain: ['claude'] }],
  },
  {
    name: 'falls back at once on a 401 and a 429 (never counted)',
    steps: { claude: [fail('auth'), fail('rate_limited', { retryAfterMs: 3000 })] },
    shows: [/"errorClass":"auth"/, /"errorClass":"rate_limited"/],
    requests: [{ chain: ['claude', 'gpt'] }, { chain: ['claude', 'gpt'] }],
  },
  {
    name: 'opens the breaker, skips while open, probes after the recovery and closes',
    options: { breaker: { threshold: 3, recoveryMs: 10_000 }, retry: { max: 0, backoffMs: [10] } },
    steps: { claude: [fail('overloaded'), fail('overloaded'), fail('overloaded')] },
    shows: [
      /breaker claude closed→open/,
      /"reason":"circuit_open"/,
      /breaker claude open→halfOpen/,
      /breaker claude halfOpen→closed/,
    ],
    requests: [
      { chain: ['claude', 'gpt'] },
      { chain: ['claude', 'gpt'] },
      { chain: ['claude', 'gpt'] },
      { chain: ['claude', 'gpt'] },
      { chain: ['claude', 'gpt'] },
    ],
  },
  {
    name: 'times out a call that hangs at PROVIDER_TIMEOUT_MS, then answers from the next provider',
    options: { retry: { max: 0, backoffMs: [10] } },
    steps: { claude: [{ kind: 'hang' }] },
    shows: [/"errorClass":"timeout"/, /"provider":"timelygpt",.*"outcome":"succeeded"/],
    requests: [{ chain: ['claude', 'timelygpt'] }],
  },
  {
    name: 'cancels the call in flight when the caller aborts',
    steps: { gpt: [{ kind: 'hang' }] },
    shows: [/"status":"aborted"/, /"outcome":"aborted"/],
    requests: [{ chain: ['gpt'], abortAfterMs: 300 }],
  },
];

/** Everything the service lets anyone observe of a script's run, in the order it happened. */
async function observe(script: Script, inspect?: (event: InspectionEvent) => void): Promise<string[]> {
  const options: HarnessOptions = { ...script.options, ...(inspect === undefined ? {} : { inspect }) };
  const harness: Harness = startHarness(options);
  for (const [provider, steps] of Object.entries(script.steps))
    harness.adapters[provider as ProviderId].script(...steps);
  const seen: string[] = [];
  const at = () => Date.now() - start;
  const start = Date.now();
  harness.gateway.onBreakerTransition((t) => seen.push(`+${at()} breaker ${t.provider} ${t.from}→${t.to}`));
  harness.gateway.onCall((record) => seen.push(`+${at()} call ${JSON.stringify(record)}`));
  harness.gateway.onFallback((from, to) => seen.push(`+${at()} fallback ${from}→${to}`));
  for (const request of script.requests) {
    const controller = new AbortController();
    const outcome = harness.gateway.generate(
      input(request.chain, {
        signal: controller.signal,
        onAttempt: (attempt) => seen.push(`+${at()} attempt ${JSON.stringify(attempt)}`),
      }),
    );
    if (request.abortAfterMs !== undefined) {
      await vi.advanceTimersByTimeAsync(request.abortAfterMs);
      controller.abort();
    }
    // Long enough for every backoff and deadline here, short of the breaker's recovery.
    await vi.advanceTimersByTimeAsync(6000);
    seen.push(`+${at()} outcome ${JSON.stringify(await outcome)}`);
    seen.push(`+${at()} providers ${JSON.stringify(harness.gateway.providers())}`);
    if (script.gapMs !== undefined) await vi.advanceTimersByTimeAsync(script.gapMs);
  }
  await harness.gateway.stop();
  return seen;
}

describe('the same runtime with and without an inspector', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(1_800_000_000_000);
  });
  afterEach(() => vi.useRealTimers());

  it.each(scripts.map((script) => [script.name, script] as const))(
    '%s: the same attempts, outcomes and order',
    async (_name, script) => {
      const plain = await observe(script);
      vi.setSystemTime(1_800_000_000_000);
      const refs: AnyActor[] = [];
      const inspected = await observe(script, (event) => {
        if (event.type === '@xstate.actor') refs.push(event.actorRef as AnyActor);
      });
      const actors = new Set(refs.map((actor) => actor.id));
      // A run is named by its system id (its actor id is `run` for every request).
      const runs = refs.filter((actor) => actor.id === 'run').map((actor) => actor.systemId);
      for (const pattern of script.shows) expect(plain.join('\n')).toMatch(pattern);
      expect(inspected).toEqual(plain);
      // The inspector saw the actors that served: the request's run and its attempts, one per call
      // asked of a provider (refused and skipped ones too: the attempt is what asks the breaker and the key).
      const attempts = [...actors].filter((id) => /^run\..+:\d+$/.test(id));
      expect(new Set(runs).size).toBe(script.requests.length);
      for (const run of runs) expect(run).toMatch(/^run\./);
      const calls = plain.filter((line) => / call /.test(line)).length;
      expect(attempts).toHaveLength(calls);
    },
  );
});

/**
 * XState keeps each state node's transition candidates per event type for the life of the process, so an
 * event type that names a request (a run's or a call's id: `xstate.done.actor.run.3f.7:1`) grows the heap
 * with every request. Every script's events, whoever receives them, come from a set that does not.
 */
describe('no event type names a request', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(1_800_000_000_000);
  });
  afterEach(() => vi.useRealTimers());

  it('every event any actor receives has a type free of run and call ids', async () => {
    const types = new Set<string>();
    for (const script of scripts) {
      await observe(script, (event) => {
        if (event.type === '@xstate.event') types.add(event.event.type);
      });
    }
    // The walk saw the ends of runs and calls (so it would have seen their ids, had they been in the types).
    expect([...types]).toEqual(expect.arrayContaining(['xstate.done.actor.run', 'xstate.done.actor.upstream', 'xstate.error.actor.upstream', 'attempt.ended']));
    const naming = [...types].filter((type) => /run\.[^.]+\.|:\d/.test(type));
    expect(naming).toEqual([]);
  });
});
