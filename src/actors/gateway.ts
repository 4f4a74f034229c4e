import { randomUUID } from 'node:crypto';
import {
  createActor,
  type ActorOptions,
  type ActorRefFrom,
  type AnyActorLogic,
  type InspectionEvent,
  type Observer,
} from 'xstate';
import { attemptMachine } from '../machines/attempt.machine.js';
import { fallbackMachine, type FallbackLink, type FallbackOutput } from '../machines/fallback.machine.js';
import { providerIds, type CallPricing, type ProviderId } from '../machines/types.js';
import type { ProviderAdapter } from '../providers/index.js';
import { createKeyIdentity, randomKeySalt, type KeyIdentity } from '../security/key-id.js';
import { breakerStateName, breakerView } from './breaker-view.js';
import { createUpstreamLogic } from './upstream.js';
import type { embeddedFleetLink } from '../machines/fleet-link.js';
import {
  keyBookMachine,
  keyHealthView,
  refusedKeyCounts,
  type KeyHealthSettings,
} from '../machines/key-book.machine.js';
import type { embeddedKeyLink } from '../machines/key-link.js';
import { gatewayMachine } from '../machines/gateway.machine.js';
import { providerMachine } from '../machines/provider.machine.js';
import type {
  ApiKey,
  BreakerAction,
  BreakerTransition,
  CallCost,
  CallRecord,
  FallbackPolicy,
  Gateway,
  GenerateInput,
  GenerateOutcome,
  KeyStatus,
  ProviderStatus,
} from './types.js';

export interface GatewayOptions {
  readonly adapters: Readonly<Record<ProviderId, ProviderAdapter>>;
  /**
   * `maxRecoveryMs` caps the open period that doubles on each failed probe (default 600 000);
   * `minDistinctKeys` is the quorum of distinct keys a failure streak needs to open (default 1 here,
   * BREAKER_MIN_DISTINCT_KEYS defaults to 2).
   */
  readonly breaker: {
    readonly threshold: number;
    readonly recoveryMs: number;
    readonly maxRecoveryMs?: number;
    readonly minDistinctKeys?: number;
  };
  readonly retry: { readonly max: number; readonly backoffMs: readonly number[] };
  readonly policy: FallbackPolicy;
  /** Overall deadline of one upstream call (PROVIDER_TIMEOUT_MS), the attempt machine's `deadline`. */
  readonly providerTimeoutMs: number;
  /** FIRST_TOKEN_TIMEOUT_MS: the call's `firstTokenTimeout` (default 30 000). */
  readonly firstTokenTimeoutMs?: number;
  /** STREAM_IDLE_TIMEOUT_MS: the call's `streamIdleTimeout`, re-armed by each piece (default 20 000). */
  readonly streamIdleTimeoutMs?: number;
  /** The actor system's clock (every named delay: backoffs, recoveries, the calls' clocks); tests pass a `SimulatedClock`. */
  readonly clock?: ActorOptions<AnyActorLogic>['clock'];
  /**
   * Shares every breaker with a fleet (REDIS_URL): the fleet link logic from `createFleetLink`
   * (src/fleet). Absent: each breaker lives in this process only (the embedded default).
   */
  readonly fleetLink?: typeof embeddedFleetLink;
  /** Per-key health (KEY_QUARANTINE_MS, KEY_COOLING_MS; at most 10 000 refused keys); absent: off. */
  readonly keyHealth?: KeyHealthSettings;
  /** What keys are known by (salted fingerprints); the fleet's shared salt when REDIS_URL is set. */
  readonly keyIdentity?: KeyIdentity;
  /** Shares every key's health with a fleet (REDIS_URL): `createKeyLink` (src/fleet). */
  readonly keyLink?: typeof embeddedKeyLink;
  /**
   * Receives every inspection event of every actor (INSPECT, Stately). It only watches: the same actors
   * run with it or without it.
   */
  /** Prices each answered call (the Attempt's `costUsd`, the cost metric); absent: attempts carry no cost. */
  readonly pricing?: CallPricing;
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
}

type ProviderRef = ActorRefFrom<typeof providerMachine>;

/** Starts the actor system and answers for it: the one object the HTTP layer talks to. */
export function createGateway(options: GatewayOptions): Gateway {
  const keyIdentity = options.keyIdentity ?? createKeyIdentity(randomKeySalt());
  const providerActors = {
    ...(options.fleetLink === undefined ? {} : { fleetLink: options.fleetLink }),
    ...(options.keyLink === undefined
      ? {}
      : { keyBook: keyBookMachine.provide({ actors: { keyLink: options.keyLink } }) }),
  };
  const machine = gatewayMachine.provide({
    actors: {
      provider: providerMachine.provide({
        actors: {
          attempt: attemptMachine.provide({ actors: { upstream: createUpstreamLogic(options.adapters) } }),
          ...providerActors,
        },
      }),
    },
  });
  const transitionListeners = new Set<(transition: BreakerTransition) => void>();
  const callListeners = new Set<(record: CallRecord) => void>();
  const fallbackListeners = new Set<(from: ProviderId, to: ProviderId) => void>();
  const costListeners = new Set<(cost: CallCost) => void>();
  const running = new Set<{ abort: () => void; fail: (error: Error) => void }>();
  let stopped = false;
  /**
   * Run ids: one random prefix per gateway and a count, unique across a fleet (a call id, derived from
   * its run's id, is what the fleet's probe lease names) without a `randomUUID()` per request.
   */
  const runIdPrefix = randomUUID();
  let runCount = 0;

  /** Starts the root actor (providers and breakers) and wires what the facade reads from it. */
  function startSystem(): ActorRefFrom<typeof machine> {
    const system = createActor(machine, {
      input: {
        providers: providerIds.map((providerId) => ({
          providerId,
          model: options.adapters[providerId].model,
          threshold: options.breaker.threshold,
          recoveryMs: options.breaker.recoveryMs,
          ...(options.breaker.maxRecoveryMs === undefined ? {} : { maxRecoveryMs: options.breaker.maxRecoveryMs }),
          ...(options.breaker.minDistinctKeys === undefined
            ? {}
            : { minDistinctKeys: options.breaker.minDistinctKeys }),
          ...(options.keyHealth === undefined ? {} : { keyHealth: options.keyHealth }),
          timings: {
            deadlineMs: options.providerTimeoutMs,
            ...(options.firstTokenTimeoutMs === undefined ? {} : { firstTokenTimeoutMs: options.firstTokenTimeoutMs }),
            ...(options.streamIdleTimeoutMs === undefined ? {} : { streamIdleTimeoutMs: options.streamIdleTimeoutMs }),
          },
        })),
      },
      ...(options.inspect === undefined ? {} : { inspect: options.inspect }),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    });
    system.start();
    let crashed = false;
    const onCrash = (error: unknown): void => {
      if (crashed || stopped) return;
      crashed = true;
      restart(system, error instanceof Error ? error : new Error(String(error)));
    };
    system.subscribe({ error: onCrash });
    for (const id of providerIds) {
      const provider = system.getSnapshot().context.providers[id];
      if (provider === undefined) throw new Error(`No provider actor for ${id}`);
      provider.subscribe({ error: onCrash });
      provider.on('call.finished', ({ record }) => callListeners.forEach((listener) => listener(record)));
      const breaker = provider.getSnapshot().context.breaker;
      let last = breakerStateName(breaker.getSnapshot());
      breaker.subscribe((snapshot) => {
        const next = breakerStateName(snapshot);
        if (next === last) return;
        const transition: BreakerTransition = { provider: id, from: last, to: next, at: Date.now() };
        last = next;
        transitionListeners.forEach((listener) => listener(transition));
      });
    }
    return system;
  }

  /**
   * An actor of the system died (a bug): the requests waiting on it fail at once instead of hanging,
   * and a fresh system takes over, so later requests are served (in-process breaker state restarts
   * closed; a fleet's shared state is adopted again through the fleet link).
   */
  function restart(dead: ActorRefFrom<typeof machine>, error: Error): void {
    const failure = new Error(`The actor system failed: ${error.message}`);
    running.forEach((handle) => handle.fail(failure));
    console.error(`study-helper: ${failure.message}; restarting the actor system`);
    if (root === dead) root = startSystem();
    queueMicrotask(() => dead.stop());
  }

  let root = startSystem();

  function providerRef(id: ProviderId): ProviderRef {
    const ref = root.getSnapshot().context.providers[id];
    if (ref === undefined) throw new Error(`No provider actor for ${id}`);
    return ref;
  }

  function status(id: ProviderId): ProviderStatus {
    const snapshot = providerRef(id).getSnapshot();
    const breaker = snapshot.context.breaker.getSnapshot();
    return {
      id,
      model: snapshot.context.model,
      breaker: breakerView(breaker),
      stats: { ...snapshot.context.stats, opens: breaker.context.opens },
      keys: refusedKeyCounts(snapshot.context.keyBook.getSnapshot().context),
    };
  }

  function keyHealth(id: ProviderId, apiKey: ApiKey): KeyStatus {
    const book = providerRef(id).getSnapshot().context.keyBook.getSnapshot().context;
    const view = keyHealthView(book, keyIdentity.keyId(id, apiKey), Date.now());
    return { provider: id, ...view };
  }

  function generate<T>(input: GenerateInput<T>): Promise<GenerateOutcome<T>> {
    if (input.signal?.aborted) return Promise.resolve({ status: 'aborted', attempts: [] });
    const links: FallbackLink[] = input.chain.map((link) => ({
      provider: link.provider,
      model: options.adapters[link.provider].model,
      apiKey: link.apiKey,
      keyId: keyIdentity.keyId(link.provider, link.apiKey),
      ref: providerRef(link.provider),
    }));
    if (links.length === 0) {
      return Promise.resolve({
        status: 'failed',
        httpStatus: 400,
        code: 'NO_PROVIDER_KEY',
        message: 'No requested provider has a key.',
        attempts: [],
      });
    }
    const runId = `run.${runIdPrefix}.${(runCount += 1).toString(36)}`;
    // A real actor per request, in the gateway's actor system (its parent is the root), so the
    // inspector sees it and the system's clock drives its backoff; watched before it starts. Its name
    // is its system id: its actor id stays `run`, so the `xstate.done.actor.run` its end sends the root
    // is one event type, not a new one per request (XState keeps a state node's transition candidates
    // per event type for the life of the process).
    const run = createActor(fallbackMachine, {
      id: 'run',
      systemId: runId,
      parent: root,
      input: {
        runId,
        links,
        request: input.request,
        validate: input.validate,
        policy: input.policy ?? options.policy,
        retryMax: options.retry.max,
        backoffMs: options.retry.backoffMs,
        startedAt: Date.now(),
        onDelta: input.onDelta,
        origin: input.origin,
        continuation: input.continuation,
        pricing: options.pricing,
        budget: input.budget,
      },
    });
    return new Promise<GenerateOutcome<T>>((resolve, reject) => {
      let settled = false;
      const finish = (): boolean => {
        if (settled) return false;
        settled = true;
        input.signal?.removeEventListener('abort', onAbort);
        running.delete(handle);
        return true;
      };
      const handle = {
        abort: () => run.send({ type: 'request.aborted', at: Date.now() }),
        fail: (error: Error) => {
          if (!finish()) return;
          reject(error);
          run.send({ type: 'request.aborted', at: Date.now() });
        },
      };
      const onAbort = () => handle.abort();
      run.on('attempt.recorded', (event) => {
        const { attempt } = event;
        if (attempt.costUsd !== undefined && costListeners.size > 0) {
          const cost = { provider: attempt.provider, model: attempt.model, usd: attempt.costUsd };
          costListeners.forEach((listener) => listener(cost));
        }
        input.onAttempt?.(attempt);
      });
      run.on('answer.continued', (event) => input.onContinued?.(event.provider, event.prefix));
      run.on('answer.reset', (event) => input.onReset?.({ provider: event.provider, reason: event.reason }));
      run.on('fallback.taken', (event) => fallbackListeners.forEach((listener) => listener(event.from, event.to)));
      run.subscribe({
        complete: () => {
          if (!finish()) return;
          const { output } = run.getSnapshot();
          if (output === undefined) reject(new Error('The fallback run ended without an output'));
          else resolve(toOutcome<T>(output));
        },
        error: (error) => {
          if (!finish()) return;
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      });
      input.signal?.addEventListener('abort', onAbort, { once: true });
      running.add(handle);
      run.start();
    });
  }

  return {
    generate,
    providers: () => providerIds.map(status),
    provider: status,
    keyHealth,
    controlBreaker(id: ProviderId, action: BreakerAction) {
      providerRef(id).send({ type: 'breaker.control', action, at: Date.now() });
      return status(id);
    },
    onBreakerTransition(listener) {
      transitionListeners.add(listener);
      return () => transitionListeners.delete(listener);
    },
    onCall(listener) {
      callListeners.add(listener);
      return () => callListeners.delete(listener);
    },
    onFallback(listener) {
      fallbackListeners.add(listener);
      return () => fallbackListeners.delete(listener);
    },
    onCost(listener) {
      costListeners.add(listener);
      return () => costListeners.delete(listener);
    },
    async stop() {
      stopped = true;
      running.forEach((handle) => handle.abort());
      root.stop();
    },
  };
}

/**
 * The fallback machine holds the study layer's value as `unknown`; it is the value that
 * `input.validate` (typed `Validation<T>`) accepted, so it is a `T`.
 */
function toOutcome<T>(output: FallbackOutput): GenerateOutcome<T> {
  if (output.status !== 'succeeded') return output;
  // One literal, not `{ ...output, value }`: spreading an object just built, then adding a property,
  // takes V8's slow clone path (docs/performance.md).
  return {
    status: 'succeeded',
    value: output.value as T,
    provider: output.provider,
    model: output.model,
    fallback: output.fallback,
    attempts: output.attempts,
    usage: output.usage,
  };
}
