/**
 * docs/machines/*.json are runnable machine configs: `createMachine(json)` with stub
 * implementations supplied by name starts and moves. Every JSON file in the folder is taken, whatever
 * machines exist: the test reads the names a file uses, stubs them (guards answer from a set the walk
 * controls, actions do nothing, delays are 1 s, actors never finish), and walks a path chosen from the
 * file's own transitions, checking the actor lands where the file says each time.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createActor, createMachine, fromCallback } from 'xstate';
import type { AnyEventObject, AnyStateMachine, AnyStateNode, AnyTransitionDefinition, MachineConfig, MachineContext } from 'xstate';
import { describe, expect, it } from 'vitest';
import { machineSources, projectRoot } from '../../scripts/generate-machine-docs.js';

const directory = join(projectRoot, 'docs', 'machines');
const files = readdirSync(directory)
  .filter((file) => file.endsWith('.json'))
  .sort();

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function list(value: unknown): unknown[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

function nameOf(reference: unknown): string | undefined {
  if (typeof reference === 'string') return reference;
  if (isRecord(reference) && typeof reference.type === 'string') return reference.type;
  return undefined;
}

interface Names {
  readonly guards: Set<string>;
  readonly actions: Set<string>;
  readonly delays: Set<string>;
  readonly actors: Set<string>;
}

/** Every guard, action, delay and actor name a config refers to, read straight from the JSON. */
function namesIn(config: unknown, names: Names = { guards: new Set(), actions: new Set(), delays: new Set(), actors: new Set() }): Names {
  if (!isRecord(config)) return names;
  const transition = (item: unknown): void => {
    if (!isRecord(item)) return;
    const guard = nameOf(item.guard);
    if (guard !== undefined) names.guards.add(guard);
    for (const action of list(item.actions)) {
      const name = nameOf(action);
      if (name !== undefined) names.actions.add(name);
    }
  };
  for (const action of [...list(config.entry), ...list(config.exit)]) {
    const name = nameOf(action);
    if (name !== undefined) names.actions.add(name);
  }
  for (const map of [config.on, config.after]) {
    if (isRecord(map)) for (const transitions of Object.values(map)) list(transitions).forEach(transition);
  }
  if (isRecord(config.after)) for (const delay of Object.keys(config.after)) if (!/^\d+$/.test(delay)) names.delays.add(delay);
  list(config.always).forEach(transition);
  list(config.onDone).forEach(transition);
  for (const invoke of list(config.invoke)) {
    if (!isRecord(invoke)) continue;
    if (typeof invoke.src === 'string') names.actors.add(invoke.src);
    for (const key of ['onDone', 'onError', 'onSnapshot']) list(invoke[key]).forEach(transition);
  }
  if (isRecord(config.states)) for (const child of Object.values(config.states)) namesIn(child, names);
  return names;
}

function readJson(file: string): Record<string, unknown> {
  const parsed: unknown = JSON.parse(readFileSync(join(directory, file), 'utf8'));
  if (!isRecord(parsed)) throw new Error(`${file} is not a JSON object`);
  return parsed;
}

/** The file's machine with stubs: a guard is true only while its name is in `allowed`; actions note their name in `ran`. */
function stubbed(json: Record<string, unknown>, allowed: ReadonlySet<string>, ran: string[] = []): AnyStateMachine {
  const names = namesIn(json);
  const map = <T,>(set: ReadonlySet<string>, make: (name: string) => T): Record<string, T> =>
    Object.fromEntries([...set].map((name) => [name, make(name)]));
  return createMachine(json as MachineConfig<MachineContext, AnyEventObject>).provide({
    guards: map(names.guards, (name) => () => allowed.has(name)),
    actions: map(names.actions, (name) => () => {
      ran.push(name);
    }),
    delays: map(names.delays, () => 1000),
    actors: map(names.actors, () => fromCallback(() => undefined)),
  });
}

function guardName(transition: AnyTransitionDefinition): string | undefined {
  return nameOf(transition.guard);
}

/** The active atomic state nodes of a snapshot value. */
function activeLeaves(node: AnyStateNode, value: unknown): AnyStateNode[] {
  if (typeof value === 'string') {
    const child = node.states[value];
    return child === undefined ? [] : [child];
  }
  if (!isRecord(value)) return [node];
  return Object.entries(value).flatMap(([key, inner]) => {
    const child = node.states[key];
    if (child === undefined) return [];
    return isRecord(inner) && Object.keys(inner).length === 0 ? [child] : activeLeaves(child, inner);
  });
}

function chain(leaf: AnyStateNode): AnyStateNode[] {
  const nodes: AnyStateNode[] = [];
  for (let node: AnyStateNode | undefined = leaf; node !== undefined; node = node.parent) nodes.push(node);
  return nodes;
}

/** A state and the states it enters first (initial children, all regions of a parallel state). */
function entered(node: AnyStateNode): AnyStateNode[] {
  if (node.type === 'parallel') return [node, ...Object.values(node.states).flatMap(entered)];
  const initial = node.initial?.target[0];
  return initial === undefined ? [node] : [node, ...entered(initial)];
}

const enabledBy = (guard: string | undefined) => (transition: AnyTransitionDefinition): boolean =>
  transition.guard === undefined || guardName(transition) === guard;

interface Step {
  readonly event: string;
  readonly guard: string | undefined;
  /** The state it goes to; undefined for a transition that only runs actions. */
  readonly target: AnyStateNode | undefined;
  readonly actions: readonly string[];
}

/** Events a test can send: the machine's own, and the done/error events of the actors it invokes (not timers, not init). */
function sendable(event: string): boolean {
  return event !== '*' && (!event.startsWith('xstate.') || event.startsWith('xstate.done.actor.') || event.startsWith('xstate.error.actor.'));
}

/**
 * Transitions the walk can take from `leaves` by sending their event with only their own guard true: no
 * transition before one (in its list, or on a state closer to the leaf) is enabled, and its target does
 * not move on by itself at once (no enabled eventless transition where it enters).
 */
function nextSteps(leaves: readonly AnyStateNode[]): Step[] {
  const steps: Step[] = [];
  for (const leaf of leaves) {
    const nodes = chain(leaf);
    nodes.forEach((node, depth) => {
      for (const [event, transitions] of node.transitions) {
        if (!sendable(event)) continue;
        transitions.forEach((transition, index) => {
          const target = transition.target?.[0];
          if (target === leaf) return;
          const guard = guardName(transition);
          const enabled = enabledBy(guard);
          if (transitions.slice(0, index).some(enabled)) return;
          if (nodes.slice(0, depth).some((closer) => (closer.transitions.get(event) ?? []).some(enabled))) return;
          if (target !== undefined && entered(target).some((node) => (node.always ?? []).some(enabled))) return;
          const actions = transition.actions.map(nameOf).filter((name): name is string => name !== undefined);
          steps.push({ event, guard, target, actions });
        });
      }
    });
  }
  return steps;
}

function describeStep(step: Step): string {
  const guard = step.guard === undefined ? '' : ` [${step.guard}]`;
  return `${step.event}${guard} → ${step.target === undefined ? `(stays: ${step.actions.join(', ')})` : step.target.path.join('.')}`;
}

/** How many transitions (events, delays, eventless, invoke results) the file declares. */
function transitionCount(config: unknown): number {
  if (!isRecord(config)) return 0;
  let count = list(config.always).length + list(config.onDone).length;
  for (const map of [config.on, config.after]) if (isRecord(map)) for (const transitions of Object.values(map)) count += list(transitions).length;
  for (const invoke of list(config.invoke)) if (isRecord(invoke)) count += list(invoke.onDone).length + list(invoke.onError).length;
  if (isRecord(config.states)) for (const child of Object.values(config.states)) count += transitionCount(child);
  return count;
}

describe('docs/machines/*.json are runnable machine configs', () => {
  it('there is one JSON file per documented machine', () => {
    const documented = machineSources.map((source) => `${source.name}.json`);
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const file of files) expect(documented).toContain(file);
  });

  it.each(files)('%s: a string `initial`, names for implementations, no functions', (file) => {
    const json = readJson(file);
    expect(typeof json.initial === 'string' || json.type === 'parallel').toBe(true);
    const text = JSON.stringify(json);
    expect(text).not.toContain('[object Object]');
    const names = namesIn(json);
    for (const name of [...names.guards, ...names.actions, ...names.delays, ...names.actors]) expect(name).not.toBe('');
  });

  it.each(files)('%s: starts in the state its `initial` names, with stub implementations', (file) => {
    const json = readJson(file);
    const actor = createActor(stubbed(json, new Set())).start();
    try {
      expect(actor.getSnapshot().status).toBe('active');
      // The oracle is the file itself: follow `initial` down from the root.
      const path: string[] = [];
      let transient = false;
      for (let config: unknown = json; isRecord(config) && typeof config.initial === 'string'; ) {
        path.push(config.initial);
        config = isRecord(config.states) ? config.states[config.initial] : undefined;
        // An initial state with `always` transitions is left at once (the job's `created` picks fresh or resumed).
        if (isRecord(config) && config.always !== undefined) transient = true;
      }
      expect(path.length).toBeGreaterThan(0);
      expect(actor.getSnapshot().matches(path.join('.') as never)).toBe(!transient);
    } finally {
      actor.stop();
    }
  });

  it.each(files)('%s: walks a path of its own transitions, landing where the file says each step', (file) => {
    const json = readJson(file);
    const allowed = new Set<string>();
    const ran: string[] = [];
    const machine = stubbed(json, allowed, ran);
    const actor = createActor(machine).start();
    const walked: string[] = [];
    const visited = new Set<string>();
    try {
      for (let stepNumber = 0; stepNumber < 4; stepNumber += 1) {
        const snapshot = actor.getSnapshot();
        if (snapshot.status !== 'active') break;
        const steps = nextSteps(activeLeaves(machine.root, snapshot.value));
        // A move to a state not seen yet first; a transition that only runs actions when nothing moves.
        const step =
          steps.find((candidate) => candidate.target !== undefined && !visited.has(candidate.target.id)) ??
          steps.find((candidate) => candidate.target !== undefined) ??
          steps[0];
        if (step === undefined) break;
        if (step.target !== undefined) visited.add(step.target.id);
        const before = JSON.stringify(snapshot.value);
        if (step.guard !== undefined) allowed.add(step.guard);
        ran.length = 0;
        actor.send({ type: step.event });
        allowed.clear();
        walked.push(describeStep(step));
        const after = actor.getSnapshot();
        if (step.target === undefined) expect(JSON.stringify(after.value), walked.join(', ')).toBe(before);
        else expect(after.matches(step.target.path.join('.') as never), walked.join(', ')).toBe(true);
        for (const action of step.actions) expect(ran, walked.join(', ')).toContain(action);
        if (step.target === undefined) break;
      }
      // Only a machine whose file declares no transition at all (the gateway today) has nothing to walk.
      if (transitionCount(json) > 0) expect(walked.length, `no transition walked in ${file}`).toBeGreaterThan(0);
      else expect(walked).toEqual([]);
    } finally {
      actor.stop();
    }
  });
});

describe('docs/machines/*.json say what the machines in src say', () => {
  /** Every state node as id → its type, initial state and, per event, the targets of its transitions. */
  function shape(machine: AnyStateMachine): Record<string, unknown> {
    const nodes: Record<string, unknown> = {};
    const visit = (node: AnyStateNode): void => {
      const transitions: Record<string, unknown> = {};
      for (const [event, list] of node.transitions) {
        transitions[event] = list.map((transition) => ({
          targets: (transition.target ?? []).map((target) => target.id),
          guarded: transition.guard !== undefined,
          reenter: transition.reenter,
        }));
      }
      nodes[node.id] = {
        type: node.type,
        initial: node.initial?.target.map((target) => target.id) ?? [],
        tags: [...node.tags],
        always: (node.always ?? []).map((transition) => (transition.target ?? []).map((target) => target.id)),
        invoke: node.invoke.map((invoke) => invoke.id),
        transitions,
      };
      Object.values(node.states).forEach(visit);
    };
    visit(machine.root);
    return nodes;
  }

  it.each(machineSources.filter((source) => files.includes(`${source.name}.json`)).map((source) => [`${source.name}.json`, source.exportName, source] as const))(
    '%s has the states, transitions and targets of %s',
    async (_file, _exportName, source) => {
      const module = (await import(pathToFileURL(join(projectRoot, source.file)).href)) as Record<string, AnyStateMachine>;
      const original = module[source.exportName];
      if (original === undefined) throw new Error(`${source.file} does not export ${source.exportName}`);
      expect(shape(stubbed(readJson(`${source.name}.json`), new Set()))).toEqual(shape(original));
    },
  );
});
