import {
  createActor,
  fromCallback,
  type ActorScope,
  type AnyActorRef,
  type EventObject,
  type ExecutableActionObject,
  type InspectionEvent,
  type Observer,
  type SnapshotFrom,
} from 'xstate';
import { steppingScope } from './stepping-scope.js';
import {
  currentCallId,
  fallbackMachine,
  type FallbackEmitted,
  type FallbackEvent,
  type FallbackInput,
  type FallbackOutput,
} from '../machines/fallback.machine.js';
import type { ProviderReply } from '../machines/provider.machine.js';

/** What a run tells whoever started it: its emitted events as they happen, then its end. */
export interface RunObserver {
  emitted(event: FallbackEmitted): void;
  done(output: FallbackOutput): void;
  /** The run failed (a bug: an action or a guard threw); it is over. */
  error(error: Error): void;
}

/** One run of the fallback machine. */
export interface FallbackRun {
  /** Runs the machine's initial step (its first call request goes out). */
  start(): void;
  send(event: FallbackEvent): void;
  /** Ends the run where it is (its pending backoff cleared); nothing more is reported. */
  stop(): void;
}

export interface FallbackRuns {
  create(input: Omit<FallbackInput, 'replyTo'>, observer: RunObserver): FallbackRun;
  /** Runs in progress (tests). */
  readonly size: number;
  stop(): void;
}

type RunSnapshot = SnapshotFrom<typeof fallbackMachine>;

interface SteppedRun {
  snapshot: RunSnapshot | undefined;
  readonly input: FallbackInput;
  readonly observer: RunObserver;
  /** The call id the providers' replies carry now (the run's `callId`), under which it is routed. */
  callId: string;
  /** A step's actions are running: an event that arrives meanwhile (a synchronous reply) waits its turn. */
  busy: boolean;
  /** Made when first needed (most runs never wait on anything but one reply). */
  queue: FallbackEvent[] | undefined;
  /** Delayed events raised by the machine (its `after` backoff), by id; made when first needed. */
  timers: Map<string, ReturnType<typeof setTimeout>> | undefined;
  over: boolean;
}

/**
 * The fallback runs of one gateway, each one's decisions made by fallbackMachine
 * (src/machines/fallback.machine.ts). A run is not an actor of its own: an actor per request (its own
 * actor system, mailbox, observers, and the garbage they leave) was most of a `generate()`'s cost
 * (docs/performance.md). Each run is stepped with the machine's own transition
 * (`machine.transition(snapshot, event, scope)`: guards, assigns, eventless transitions and final
 * states exactly as XState computes them for an actor), and the actions XState returns run right after
 * each step, in order, the way an actor runs them: `sendTo` delivered, `emit` handed to the observer,
 * the delayed `after` event armed and cancelled as a timer. Events that reach a run while its step's
 * actions are running (a provider that answers synchronously) wait until they have run, as in an actor's
 * mailbox. The providers answer one long-lived actor (the run's `replyTo`), which hands each reply to
 * the run whose current call it names; a reply to a call the run gave up on reaches no run, which is
 * what the machine does with it (`isCurrentCall`).
 *
 * With `inspect` (INSPECT, Stately's inspector) each run is an actor, as before, so the inspector shows it.
 */
export function createFallbackRuns(
  options: { readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void) } = {},
): FallbackRuns {
  if (options.inspect !== undefined) return actorRuns(options.inspect);
  const machine = fallbackMachine;
  const byCall = new Map<string, SteppedRun>();
  const router = createActor(
    fromCallback<ProviderReply>(({ receive }) => {
      receive((reply) => {
        const run = byCall.get(reply.callId);
        if (run !== undefined) deliver(run, reply);
      });
    }),
  ).start();

  /** Actions collected while XState computes a step (its transitions run no action themselves). */
  let collected: ExecutableActionObject[] = [];
  // Never started, never sent to: the scope's `self` for XState's types. The run's actions reach no
  // `self` (replies go to `replyTo`), and its actions are run here, not by this actor. (Its own initial
  // snapshot, made from an input without links, is an error snapshot that nothing reads.)
  const inert = createActor(machine, {
    input: {
      runId: '',
      links: [],
      request: { task: 'notes', lang: 'en', system: '', messages: [], jsonSchema: {}, maxOutputTokens: 1 },
      validate: () => ({ ok: false, errors: [] }),
      policy: 'fallback-first',
      retryMax: 0,
      backoffMs: [],
      startedAt: 0,
    },
  });
  const scope: ActorScope<RunSnapshot, FallbackEvent, typeof inert.system, FallbackEmitted> = steppingScope(
    inert,
    'fallback',
    (action) => void collected.push(action),
  );

  function end(run: SteppedRun): void {
    run.over = true;
    if (run.timers !== undefined) for (const timer of run.timers.values()) clearTimeout(timer);
    run.timers = undefined;
    if (byCall.get(run.callId) === run) byCall.delete(run.callId);
  }

  /** Runs one step's actions, in order, as an actor runs them after its transition. */
  function execute(run: SteppedRun, actions: readonly ExecutableActionObject[]): void {
    for (const action of actions) {
      if (run.over) return;
      switch (action.type) {
        case 'xstate.sendTo': {
          const { to, event, delay } = action.params as {
            to: AnyActorRef;
            event: EventObject;
            delay?: number;
          };
          if (delay !== undefined) throw new Error('The fallback runtime sends no delayed event');
          to.send(event);
          break;
        }
        case 'xstate.emit':
          run.observer.emitted((action.params as { event: FallbackEmitted }).event);
          break;
        case 'xstate.raise': {
          const { event, id, delay } = action.params as { event: FallbackEvent; id?: string; delay?: number };
          // An undelayed raise was taken inside the step; a delayed one (the `after` backoff) waits here.
          if (delay === undefined) break;
          const key = id ?? event.type;
          run.timers ??= new Map();
          run.timers.set(
            key,
            setTimeout(() => {
              run.timers?.delete(key);
              deliver(run, event);
            }, delay),
          );
          break;
        }
        case 'xstate.cancel': {
          const { sendId } = action.params as { sendId: string };
          clearTimeout(run.timers?.get(sendId));
          run.timers?.delete(sendId);
          break;
        }
        default:
          if (action.type.startsWith('xstate.'))
            throw new Error(`The fallback runtime cannot run ${action.type}`);
          action.exec?.(action.info, action.params);
      }
    }
  }

  /** One step (the initial one without an event), its actions, then the events that came meanwhile. */
  function deliver(run: SteppedRun, event: FallbackEvent | undefined): void {
    if (run.over) return;
    if (run.busy) {
      if (event !== undefined) (run.queue ??= []).push(event);
      return;
    }
    run.busy = true;
    try {
      for (let next = event; ; next = run.queue?.shift()) {
        const actions: ExecutableActionObject[] = [];
        collected = actions;
        const snapshot: RunSnapshot =
          run.snapshot === undefined
            ? machine.getInitialSnapshot(scope, run.input)
            : machine.transition(run.snapshot, next as FallbackEvent, scope);
        run.snapshot = snapshot;
        const callId = currentCallId(snapshot.context);
        if (callId !== run.callId) {
          if (byCall.get(run.callId) === run) byCall.delete(run.callId);
          run.callId = callId;
          byCall.set(callId, run);
        }
        execute(run, actions);
        if (run.over) return;
        if (snapshot.status !== 'active') {
          end(run);
          if (snapshot.output === undefined) throw new Error('The fallback run ended without an output');
          run.observer.done(snapshot.output);
          return;
        }
        if (run.queue === undefined || run.queue.length === 0) return;
      }
    } catch (error) {
      end(run);
      run.observer.error(error instanceof Error ? error : new Error(String(error)));
    } finally {
      run.busy = false;
    }
  }

  /** A run and its handle in one object (no closures per run). */
  class Run implements SteppedRun, FallbackRun {
    snapshot: RunSnapshot | undefined = undefined;
    callId = '';
    busy = false;
    queue: FallbackEvent[] | undefined = undefined;
    timers: Map<string, ReturnType<typeof setTimeout>> | undefined = undefined;
    over = false;
    constructor(
      readonly input: FallbackInput,
      readonly observer: RunObserver,
    ) {}
    start(): void {
      deliver(this, undefined);
    }
    send(event: FallbackEvent): void {
      deliver(this, event);
    }
    stop(): void {
      end(this);
    }
  }

  return {
    create(input, observer) {
      // One literal, not `{ ...input, replyTo }`: spreading an object just built, then adding a property,
      // takes V8's slow clone path (docs/performance.md).
      const withReplyTo: FallbackInput = {
        runId: input.runId,
        links: input.links,
        request: input.request,
        validate: input.validate,
        policy: input.policy,
        retryMax: input.retryMax,
        backoffMs: input.backoffMs,
        startedAt: input.startedAt,
        replyTo: router,
      };
      return new Run(withReplyTo, observer);
    },
    get size() {
      return byCall.size;
    },
    stop() {
      for (const run of byCall.values()) end(run);
      router.stop();
    },
  };
}

/** Each run an actor of its own (its own system), so an inspector sees it. */
function actorRuns(inspect: Observer<InspectionEvent> | ((event: InspectionEvent) => void)): FallbackRuns {
  let size = 0;
  return {
    create(input, observer) {
      const run = createActor(fallbackMachine, { input, inspect });
      let stopped = false;
      run.on('*', (event) => observer.emitted(event));
      return {
        start() {
          size += 1;
          run.subscribe({
            complete: () => {
              size -= 1;
              if (stopped) return;
              const { output } = run.getSnapshot();
              if (output === undefined) observer.error(new Error('The fallback run ended without an output'));
              else observer.done(output);
            },
            error: (error) => {
              size -= 1;
              if (stopped) return;
              observer.error(error instanceof Error ? error : new Error(String(error)));
            },
          });
          run.start();
        },
        send: (event) => run.send(event),
        stop: () => {
          stopped = true;
          run.stop();
        },
      };
    },
    get size() {
      return size;
    },
    stop: () => undefined,
  };
}
