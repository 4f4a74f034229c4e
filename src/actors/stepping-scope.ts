/**
 * The scope XState's `machine.transition(snapshot, event, scope)` and `getInitialSnapshot(scope)` need when
 * a machine is stepped without an actor running it (call-upstream.ts, fallback-runs.ts): `self` is an actor
 * that is never started (for XState's types and ids), nothing is logged, deferred or emitted through it,
 * and every action XState would execute is handed to `collect`, for the runtime to run in order.
 */
import type { ActorRef, ActorScope, EventObject, ExecutableActionObject, Snapshot } from 'xstate';

/** XState's `AnyActorSystem` (not exported from the package root), as a scope's default system type. */
type AnyActorSystem = ActorScope<Snapshot<unknown>, EventObject>['system'];

export function steppingScope<
  TSnapshot extends Snapshot<unknown>,
  TEvent extends EventObject,
  TSystem extends AnyActorSystem,
  TEmitted extends EventObject = EventObject,
>(
  self: ActorRef<TSnapshot, TEvent, TEmitted> & { readonly sessionId: string; readonly system: TSystem },
  id: string,
  collect: (action: ExecutableActionObject) => void,
): ActorScope<TSnapshot, TEvent, TSystem, TEmitted> {
  return {
    self,
    id,
    sessionId: self.sessionId,
    logger: () => undefined,
    defer: () => undefined,
    emit: () => undefined,
    system: self.system,
    stopChild: () => undefined,
    actionExecutor: collect,
  };
}
