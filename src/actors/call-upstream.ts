import {
  createActor,
  type ActorScope,
  type AnyStateMachine,
  type AnyStateNode,
  type ExecutableActionObject,
  type SnapshotFrom,
} from 'xstate';
import { createAbortControllers } from './abort-controllers.js';
import { steppingScope } from './stepping-scope.js';
import { ownClasses, type ProviderFailure } from '../errors/index.js';
import { callMachine, type CallEvent } from '../machines/call.machine.js';
import type { CallUpstreamInput, UpstreamEvent } from '../machines/provider.machine.js';
import type { ProviderAnswer, Validation } from '../machines/types.js';
import type { ProviderAdapter, ProviderId } from '../providers/index.js';

export type { CallUpstreamInput, UpstreamEvent } from '../machines/provider.machine.js';

/**
 * The study layer's verdict on an answer; a truncated answer is `invalid_output` whatever it holds.
 * Decided next to the call, so the breaker hears an invalid answer as inconclusive, never as a success.
 */
export function judgeAnswer(
  answer: ProviderAnswer,
  validate: (answer: ProviderAnswer) => Validation<unknown>,
): Validation<unknown> {
  if (answer.truncated) {
    return {
      ok: false,
      errors: ['The answer was cut off (max tokens reached) before the JSON was complete.'],
    };
  }
  try {
    return validate(answer);
  } catch (error) {
    return {
      ok: false,
      errors: [`The answer could not be read: ${error instanceof Error ? error.message : 'unknown error'}`],
    };
  }
}

export interface CallUpstreamOptions {
  readonly adapters: Readonly<Record<ProviderId, ProviderAdapter>>;
  /** Overall deadline of one call (PROVIDER_TIMEOUT_MS), the call machine's `deadline` delay. */
  readonly timeoutMs: number;
  readonly now?: () => number;
}

/** The upstream calls of the provider actors: started and cancelled by their actions, reported back as events. */
export interface UpstreamCalls {
  /** Starts one call; `report` receives its one outcome (`upstream.*`), whichever comes first. */
  start(input: CallUpstreamInput, report: (event: UpstreamEvent) => void): void;
  /** The caller went away: a call still in flight is aborted and reported `upstream.cancelled`. */
  cancel(callId: string, at: number): void;
  /** Calls in flight (bounded by the calls admitted). */
  readonly size: number;
}

type CallSnapshot = SnapshotFrom<typeof callMachine>;

interface RunningCall {
  snapshot: CallSnapshot;
  /** Epoch ms when the call went out (its durations and its deadline count from it). */
  readonly startedAt: number;
  readonly input: CallUpstreamInput;
  readonly adapter: ProviderAdapter;
  readonly controller: AbortController;
  readonly report: (event: UpstreamEvent) => void;
  deadline: ReturnType<typeof setTimeout> | undefined;
}

/** One transition of the call machine as XState computed it: the next snapshot and what to do. */
interface CallStep {
  readonly snapshot: CallSnapshot;
  readonly actions: readonly ExecutableActionObject[];
}

/**
 * The upstream calls, each one's life decided by the call machine (src/machines/call.machine.ts): in
 * flight until the first of its answer, its failure, its `deadline` or its caller's cancel, which alone
 * is reported. The machine is not run as an actor per call (an actor costs ~10 `send()`s of bookkeeping
 * per call: actor, system, mailbox, observers; docs/performance.md). It keeps no data and has no guards,
 * so its next snapshot and actions depend only on its state and the event's type: each such transition
 * is taken from XState (`machine.transition`) the first time it occurs and reused after, and the
 * actions (the machine's own, and arming or clearing its `deadline` timer) run right after each step,
 * the way an actor runs them after a transition.
 */
export function createUpstreamCalls(options: CallUpstreamOptions): UpstreamCalls {
  assertStepsReusable(callMachine);
  const now = options.now ?? Date.now;
  const running = new Map<string, RunningCall>();
  /** Each call's controller, reused once its call settled unaborted (abort-controllers.ts). */
  const controllers = createAbortControllers();
  /**
   * The call and event whose step's actions are running (steps nest: a report can start or cancel another
   * call). Two variables, not an object per step.
   */
  let currentCall: RunningCall | undefined;
  let currentEvent: CallEvent | undefined;
  const callOfStep = (): RunningCall => {
    if (currentCall === undefined) throw new Error('A call action ran outside a call step');
    return currentCall;
  };

  const machine = callMachine.provide({
    actions: {
      // Each report is one literal: `{ type, ...ticket, … }` copies the spread object through V8's slow
      // path (docs/performance.md).
      reportAnswer: () => {
        const call = callOfStep();
        const event = currentEvent;
        if (event?.type !== 'upstream.answered') throw new Error('reportAnswer without an answer');
        const { callId, replyTo, keyId } = call.input;
        call.report({
          type: 'upstream.succeeded',
          callId,
          replyTo,
          keyId,
          answer: event.answer,
          verdict: judgeAnswer(event.answer, call.input.validate),
          durationMs: event.at - call.startedAt,
          at: event.at,
        });
      },
      reportFailure: () => {
        const call = callOfStep();
        const event = currentEvent;
        if (event?.type !== 'upstream.threw') throw new Error('reportFailure without an error');
        const failure = classifySafely(call.adapter, event.error);
        const { callId, replyTo, keyId } = call.input;
        call.report({
          type: 'upstream.failed',
          callId,
          replyTo,
          keyId,
          failure,
          durationMs: event.at - call.startedAt,
          at: event.at,
        });
      },
      reportTimeout: () => {
        const call = callOfStep();
        const failure: ProviderFailure = {
          errorClass: ownClasses.deadlineFired,
          message: `The provider did not answer within ${options.timeoutMs} ms.`,
        };
        const at = call.startedAt + options.timeoutMs;
        const { callId, replyTo, keyId } = call.input;
        call.report({ type: 'upstream.failed', callId, replyTo, keyId, failure, durationMs: options.timeoutMs, at });
      },
      reportCancelled: () => {
        const call = callOfStep();
        const event = currentEvent;
        const at = event?.type === 'call.cancelled' ? event.at : now();
        const { callId, replyTo, keyId } = call.input;
        call.report({ type: 'upstream.cancelled', callId, replyTo, keyId, durationMs: at - call.startedAt, at });
      },
      abortRequest: () => callOfStep().controller.abort(),
    },
    delays: { deadline: options.timeoutMs },
  });

  /** Actions collected while XState computes a step. */
  let collected: ExecutableActionObject[] = [];
  const inert = createActor(machine);
  const scope: ActorScope<CallSnapshot, CallEvent> = steppingScope(inert, 'call', (action) => void collected.push(action));
  const initial: CallStep = { snapshot: machine.getInitialSnapshot(scope), actions: collected };
  /** The machine's transitions, by snapshot (the few the machine has) and event type. */
  const steps = new Map<CallSnapshot, Map<string, CallStep>>();
  function stepOf(snapshot: CallSnapshot, event: CallEvent): CallStep {
    let byType = steps.get(snapshot);
    if (byType === undefined) {
      byType = new Map();
      steps.set(snapshot, byType);
    }
    let step = byType.get(event.type);
    if (step === undefined) {
      collected = [];
      step = { snapshot: machine.transition(snapshot, event, scope), actions: collected };
      byType.set(event.type, step);
    }
    return step;
  }

  /** Runs a step's actions for `call`: the `deadline` timer (armed, cleared) and the machine's own. */
  function execute(call: RunningCall, event: CallEvent | undefined, actions: readonly ExecutableActionObject[]): void {
    const outerCall = currentCall;
    const outerEvent = currentEvent;
    currentCall = call;
    currentEvent = event;
    try {
      for (const action of actions) {
        if (action.type === 'xstate.raise') {
          const { event: delayed, delay } = action.params as { event: CallEvent; delay?: number };
          if (delay === undefined) throw new Error('The call machine raises only its deadline');
          call.deadline = setTimeout(() => advance(call, delayed), delay);
        } else if (action.type === 'xstate.cancel') {
          clearTimeout(call.deadline);
        } else {
          action.exec?.(action.info, action.params);
        }
      }
    } finally {
      currentCall = outerCall;
      currentEvent = outerEvent;
    }
  }

  function advance(call: RunningCall, event: CallEvent): void {
    if (call.snapshot.status !== 'active') return;
    const step = stepOf(call.snapshot, event);
    call.snapshot = step.snapshot;
    if (step.snapshot.status !== 'active') {
      clearTimeout(call.deadline);
      running.delete(call.input.callId);
    }
    execute(call, event, step.actions);
  }

  /**
   * The adapter's call is over (its promise settled): the step, then its controller back for reuse, kept
   * only if it never aborted and nobody listens to it any more (a call that timed out or was cancelled
   * aborted its controller, which is dropped).
   */
  function settle(call: RunningCall, event: CallEvent): void {
    advance(call, event);
    controllers.giveBack(call.controller);
  }

  return {
    start(input, report) {
      const adapter = options.adapters[input.providerId];
      const call: RunningCall = {
        snapshot: initial.snapshot,
        startedAt: now(),
        input,
        adapter,
        controller: controllers.take(),
        report,
        deadline: undefined,
      };
      running.set(input.callId, call);
      execute(call, undefined, initial.actions);
      adapter.generate(input.request, input.apiKey, call.controller.signal).then(
        (answer) => settle(call, { type: 'upstream.answered', answer, at: now() }),
        (error: unknown) => settle(call, { type: 'upstream.threw', error, at: now() }),
      );
    },
    cancel(callId, at) {
      const call = running.get(callId);
      if (call !== undefined) advance(call, { type: 'call.cancelled', at });
    },
    get size() {
      return running.size;
    },
  };
}

/**
 * Reusing a transition is exact only while the machine's next step depends on its state and the event's
 * type alone: no context, no guard. A call machine given either fails here, at start-up, not in flight.
 */
export function assertStepsReusable(machine: AnyStateMachine): void {
  if (machine.config.context !== undefined) throw new Error(`${machine.id}: a machine with context cannot reuse its steps`);
  const nodes: AnyStateNode[] = [machine.root];
  for (let node = nodes.pop(); node !== undefined; node = nodes.pop()) {
    const transitions = [...node.transitions.values()].flat().concat(node.always ?? []);
    if (transitions.some((transition) => transition.guard !== undefined))
      throw new Error(`${machine.id}: a guarded transition in ${node.id} cannot be reused`);
    nodes.push(...Object.values(node.states));
  }
}

/**
 * A classifier that throws must not take the provider actor down (a crashed actor would leave every
 * waiting request hanging): the failure is then read as a provider-side `server_error`.
 */
function classifySafely(adapter: ProviderAdapter, error: unknown): ProviderFailure {
  try {
    return adapter.classify(error);
  } catch {
    return {
      errorClass: 'server_error',
      message: 'The provider failed in a way that could not be classified.',
    };
  }
}
