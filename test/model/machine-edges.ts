/**
 * The transitions of a machine as a set of lines `source --event--> target`, read from its state nodes:
 * what a model beside the tests compares with the production machine it mirrors (test/model/*.model.ts).
 * Guards, actions and delays' implementations are left out on purpose: a faithful refactor of the
 * production machine (renamed guards, rewritten actions, a delay computed another way) keeps the same
 * lines, and an added or removed state, event or target changes them.
 */
import type { AnyStateMachine, AnyStateNode } from 'xstate';

/** A delayed (`after`) transition and a model's explicit time event both read as this event. */
const timePasses = 'time passes';

/** What a model calls its explicit time events: `time.<what elapsed>`. */
const isTimeEvent = (eventType: string): boolean => eventType.startsWith('time.');

function eventName(eventType: string): string {
  if (eventType.startsWith('xstate.after.') || isTimeEvent(eventType)) return timePasses;
  return eventType === '' ? '(always)' : eventType;
}

function pathOf(node: AnyStateNode): string {
  return node.path.length === 0 ? '(root)' : node.path.join('.');
}

function* nodesOf(node: AnyStateNode): Generator<AnyStateNode> {
  yield node;
  for (const child of Object.values(node.states)) yield* nodesOf(child);
}

/** Every state node of `machine` by its path (`halfOpen.probing`), the root as `(root)`. */
export function statePaths(machine: AnyStateMachine): string[] {
  return [...nodesOf(machine.root)].map(pathOf).sort();
}

/**
 * Every transition of `machine`, one line per source state node, event and target set (branches of
 * one event with the same targets are one line; a targetless branch reads `(stays)`).
 */
export function transitionLines(machine: AnyStateMachine): string[] {
  const lines = new Set<string>();
  for (const node of nodesOf(machine.root)) {
    const definitions = [...node.transitions.values()].flat().concat(node.always ?? []);
    for (const definition of definitions) {
      const targets = definition.target?.map(pathOf).sort().join(' + ') ?? '(stays)';
      lines.add(`${pathOf(node)} --${eventName(definition.eventType)}--> ${targets}`);
    }
  }
  return [...lines].sort();
}
