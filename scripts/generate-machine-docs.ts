/**
 * `npm run docs:machines`: writes docs/machines/<name>.json (the machine's config as plain data: runnable
 * by `createMachine`, importable by Stately Studio) and docs/machines/<name>.mmd (a Mermaid
 * stateDiagram-v2) for every machine in `machineSources`, and docs/machines/README.md. `--check` writes
 * nothing and exits 1 when a committed file is stale (test/core/machine-docs.test.ts runs the same
 * comparison). It also rewrites the diagrams embedded between markers in `embeddingDocuments`
 * (docs/architecture.md), and its request-path diagram (scripts/request-path.ts). test/core/machine-json.test.ts runs every JSON file with stub implementations.
 *
 * The diagram comes from `toDirectedGraph` (xstate/graph), which omits `always` transitions: they are
 * added from `stateNode.always`. Delayed transitions are labelled `after <delay>`; guards label edges.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { StateMachine, type AnyStateMachine, type AnyStateNode, type AnyTransitionDefinition } from 'xstate';
import { toDirectedGraph } from 'xstate/graph';
import { embedRequestPath } from './request-path.js';

const scriptDirectory = dirname(fileURLToPath(import.meta.url));
export const projectRoot = resolve(scriptDirectory, '..');
export const machineDocsDirectory = join(projectRoot, 'docs', 'machines');

/** One machine to document. `optional` machines are skipped while their source file does not exist. */
export interface MachineSource {
  readonly name: string;
  /** Source file, relative to the project root. */
  readonly file: string;
  readonly exportName: string;
  readonly title: string;
  readonly optional?: boolean;
}

/** Every machine the docs show, in the order the README lists them. Extend here. */
export const machineSources: readonly MachineSource[] = [
  { name: 'gateway', file: 'src/machines/gateway.machine.ts', exportName: 'gatewayMachine', title: 'Gateway (root of the actor system)' },
  { name: 'provider', file: 'src/machines/provider.machine.ts', exportName: 'providerMachine', title: 'Provider actor (one per provider)' },
  { name: 'attempt', file: 'src/machines/attempt.machine.ts', exportName: 'attemptMachine', title: "A call's attempt (one per call, a child actor of its provider: key, breaker, lease, upstream, report)" },
  { name: 'breaker', file: 'src/machines/breaker.machine.ts', exportName: 'breakerMachine', title: 'Circuit breaker (child of each provider actor)' },
  { name: 'key-health', file: 'src/machines/key-health.machine.ts', exportName: 'keyHealthMachine', title: 'Key health (one actor per refused caller key, under the key book)' },
  { name: 'key-book', file: 'src/machines/key-book.machine.ts', exportName: 'keyBookMachine', title: 'Key book (child of each provider actor: routes to its refused keys\' actors, admits the rest)' },
  { name: 'key-shelf', file: 'src/machines/key-book.machine.ts', exportName: 'keyShelfMachine', title: 'Key shelf (child of the key book: holds ~16 of its key actors)' },
  { name: 'fallback', file: 'src/machines/fallback.machine.ts', exportName: 'fallbackMachine', title: 'Retry-and-fallback run (one per request)' },
  { name: 'job', file: 'src/machines/job.machine.ts', exportName: 'jobMachine', title: 'Job (one per background job)' },
  {
    name: 'timelygpt-session',
    file: 'src/machines/timelygpt-session.machine.ts',
    exportName: 'timelyGptSessionMachine',
    title: 'TimelyGPT session (one per TimelyGPT call)',
    optional: true,
  },
];

async function loadMachine(source: MachineSource): Promise<AnyStateMachine | undefined> {
  const path = join(projectRoot, source.file);
  if (!existsSync(path)) {
    if (source.optional === true) return undefined;
    throw new Error(`Machine source ${source.file} is missing`);
  }
  const module = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  const machine = module[source.exportName];
  if (!(machine instanceof StateMachine)) throw new Error(`${source.file} does not export a machine ${source.exportName}`);
  return machine as AnyStateMachine;
}

// ---------------------------------------------------------------- JSON (Stately Studio)

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** A guard as text: named guards by name, `and`/`or`/`not` spelled out, inline ones as `inline`. */
function guardText(guard: unknown): string {
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') {
    const nested = (guard as { guards?: unknown }).guards;
    if (Array.isArray(nested)) {
      if (guard.name === 'not') return `not ${guardText(nested[0])}`;
      return `(${nested.map(guardText).join(guard.name === 'or' ? ' or ' : ' and ')})`;
    }
    return 'inline';
  }
  if (isRecord(guard) && typeof guard.type === 'string') return guard.type;
  return 'inline';
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Plain data as is; functions (and anything holding one) left out. */
function plainData(value: unknown): Json | undefined {
  if (typeof value === 'function' || value === undefined || typeof value === 'symbol' || typeof value === 'bigint') return undefined;
  if (value === null || typeof value !== 'object') return value as Json;
  if (Array.isArray(value)) {
    const items = value.map(plainData);
    return items.some((item) => item === undefined) ? undefined : (items as Json[]);
  }
  const result: { [key: string]: Json } = {};
  for (const [key, item] of Object.entries(value)) {
    const data = plainData(item);
    if (data === undefined) return undefined;
    result[key] = data;
  }
  return result;
}

/** Builds an object from entries, leaving out the undefined ones. */
function compact(entries: ReadonlyArray<readonly [string, Json | undefined]>): { [key: string]: Json } {
  const result: { [key: string]: Json } = {};
  for (const [key, value] of entries) if (value !== undefined) result[key] = value;
  return result;
}

/** A guard as config: a name (or `{ type, params }` with plain params); a combined guard as its text. */
function guardConfig(guard: unknown): Json {
  if (typeof guard === 'string') return guard;
  if (isRecord(guard) && typeof guard.type === 'string' && typeof guard !== 'function') {
    const params = plainData(guard.params);
    return params === undefined ? guard.type : { type: guard.type, params };
  }
  return guardText(guard);
}

/**
 * One action as config: named actions keep their name (and their params when plain data; dynamic params
 * are left out); a built-in action creator (assign, raise, sendTo, …) keeps its `type`; any other inline
 * function is named by its function name, or `inline`.
 */
function actionConfig(action: unknown): Json {
  if (typeof action === 'string') return action;
  if (typeof action === 'function') {
    const type = (action as { type?: unknown }).type;
    if (typeof type === 'string') return type;
    return action.name === '' ? 'inline' : action.name;
  }
  if (isRecord(action) && typeof action.type === 'string') {
    const params = plainData(action.params);
    return params === undefined ? action.type : { type: action.type, params };
  }
  return 'inline';
}

function actionsConfig(actions: unknown): Json | undefined {
  if (actions === undefined) return undefined;
  return Array.isArray(actions) ? actions.map(actionConfig) : actionConfig(actions);
}

function transitionConfig(transition: unknown): Json {
  if (typeof transition === 'string' || Array.isArray(transition)) {
    if (typeof transition === 'string' || transition.every((item) => typeof item === 'string')) return plainData(transition) ?? null;
    return transition.map(transitionConfig);
  }
  if (!isRecord(transition)) return null;
  return compact([
    ['target', plainData(transition.target)],
    ['guard', transition.guard === undefined ? undefined : guardConfig(transition.guard)],
    ['actions', actionsConfig(transition.actions)],
    ['reenter', plainData(transition.reenter)],
    ['description', plainData(transition.description)],
    ['meta', plainData(transition.meta)],
  ]);
}

function transitionMap(map: unknown): Json | undefined {
  if (!isRecord(map)) return undefined;
  return Object.fromEntries(Object.entries(map).map(([key, transition]) => [key, transitionConfig(transition)]));
}

/** An invocation as config: `src` is the actor's name (an inline actor is named `inline:<id>`); `input` only when plain data. */
function invokeConfig(invoke: unknown): Json {
  if (!isRecord(invoke)) return null;
  const id = typeof invoke.id === 'string' ? invoke.id : undefined;
  const src = typeof invoke.src === 'string' ? invoke.src : `inline:${id ?? 'actor'}`;
  return compact([
    ['id', id],
    ['systemId', plainData(invoke.systemId)],
    ['src', src],
    ['input', plainData(invoke.input)],
    ['onDone', invoke.onDone === undefined ? undefined : transitionConfig(invoke.onDone)],
    ['onError', invoke.onError === undefined ? undefined : transitionConfig(invoke.onError)],
    ['onSnapshot', invoke.onSnapshot === undefined ? undefined : transitionConfig(invoke.onSnapshot)],
  ]);
}

/** A state node's config (the machine's root included): what the source gave `createMachine`, as plain data. */
function stateConfig(config: Record<string, unknown>): { [key: string]: Json } {
  const entries: Array<readonly [string, Json | undefined]> = [];
  for (const [key, value] of Object.entries(config)) {
    switch (key) {
      case 'states':
        entries.push([
          key,
          isRecord(value)
            ? Object.fromEntries(Object.entries(value).map(([name, child]) => [name, isRecord(child) ? stateConfig(child) : {}]))
            : undefined,
        ]);
        break;
      case 'on':
      case 'after':
        entries.push([key, transitionMap(value)]);
        break;
      case 'always':
      case 'onDone':
        entries.push([key, transitionConfig(value)]);
        break;
      case 'invoke':
        entries.push([key, Array.isArray(value) ? value.map(invokeConfig) : invokeConfig(value)]);
        break;
      case 'entry':
      case 'exit':
        entries.push([key, actionsConfig(value)]);
        break;
      case 'types':
      case 'schemas':
        // Type-only declarations: nothing to run.
        break;
      default:
        // id, initial, type, tags, history, target, description, meta; context, input and output only when plain data.
        entries.push([key, plainData(value)]);
    }
  }
  return compact(entries);
}

/**
 * The machine's config as `setup({...}).createMachine(config)` was given it, as plain JSON: a string
 * `initial`, targets as written, named guards, actions, delays and actors kept as names, so
 * `createMachine(json)` runs it (with implementations supplied by name) and Stately Studio imports it.
 * Left out: functions (context factories, dynamic params and input, inline implementations). A combined
 * guard (`and`/`or`/`not`) is written as one name spelling it out, e.g. `(isPendingCall and isCountedFailure)`.
 */
export function toMachineConfig(machine: AnyStateMachine): { [key: string]: Json } {
  return stateConfig(machine.config as Record<string, unknown>);
}

// ---------------------------------------------------------------- Mermaid

/** A Mermaid-safe id for a state node: its path joined by `_`, or the machine id for the root. */
function nodeId(node: AnyStateNode): string {
  return node.path.length === 0 ? node.machine.id : node.path.join('_').replace(/[^A-Za-z0-9_]/g, '_');
}

/** Text Mermaid accepts after `:` in a transition line. */
function labelSafe(text: string): string {
  return text.replace(/[;#:]/g, ' ').replace(/\s+/g, ' ').trim();
}

function eventLabel(transition: AnyTransitionDefinition, always: boolean): string {
  const delay = (transition as { delay?: unknown }).delay;
  let event: string;
  if (always) event = 'always';
  else if (typeof delay === 'string' || typeof delay === 'number') {
    event = typeof delay === 'number' ? `after ${delay} ms` : `after ${delay}`;
  } else if (transition.eventType.startsWith('xstate.done.actor.')) {
    event = `done ${transition.eventType.slice('xstate.done.actor.'.length)}`;
  } else if (transition.eventType.startsWith('xstate.error.actor.')) {
    event = `error ${transition.eventType.slice('xstate.error.actor.'.length)}`;
  } else event = transition.eventType;
  const guard = transition.guard === undefined ? '' : ` [${guardText(transition.guard)}]`;
  return labelSafe(`${event}${guard}`);
}

interface Edge {
  readonly source: AnyStateNode;
  readonly target: AnyStateNode;
  readonly label: string;
}

/** Every transition of a node: from the directed graph, plus its `always` transitions. */
function edgesOf(node: AnyStateNode): Edge[] {
  const graph = toDirectedGraph(node);
  const edges: Edge[] = graph.edges.map((edge) => ({
    source: edge.source,
    target: edge.target,
    label: eventLabel(edge.transition, false),
  }));
  for (const transition of node.always ?? []) {
    for (const target of transition.target ?? [node]) edges.push({ source: node, target, label: eventLabel(transition, true) });
  }
  return edges;
}

function ancestors(node: AnyStateNode): AnyStateNode[] {
  const chain: AnyStateNode[] = [];
  for (let current: AnyStateNode | undefined = node; current !== undefined; current = current.parent) chain.unshift(current);
  return chain;
}

/** The compound state whose block the edge is written in: the closest common parent of both ends. */
function edgeScope(edge: Edge): AnyStateNode {
  const from = ancestors(edge.source.parent ?? edge.source);
  const to = ancestors(edge.target.parent ?? edge.target);
  let scope = from[0] as AnyStateNode;
  for (let i = 0; i < Math.min(from.length, to.length) && from[i] === to[i]; i += 1) scope = from[i] as AnyStateNode;
  return scope;
}

function stateLabel(node: AnyStateNode): string {
  const tags = [...node.tags].sort();
  return tags.length === 0 ? node.key : `${node.key} (${tags.join(', ')})`;
}

function childrenOf(node: AnyStateNode): AnyStateNode[] {
  return Object.values(node.states);
}

function allNodes(node: AnyStateNode): AnyStateNode[] {
  return [node, ...childrenOf(node).flatMap(allNodes)];
}

function toMermaid(machine: AnyStateMachine): string {
  const root = machine.root;
  const edgesByScope = new Map<AnyStateNode, string[]>();
  const anyStateId = `${root.id.replace(/[^A-Za-z0-9_]/g, '_')}_anyState`;
  let rootHasEdges = false;
  for (const node of allNodes(root)) {
    for (const edge of edgesOf(node)) {
      const scope = edge.source === root ? root : edgeScope(edge);
      const sourceId = edge.source === root ? anyStateId : nodeId(edge.source);
      if (edge.source === root) rootHasEdges = true;
      const lines = edgesByScope.get(scope) ?? [];
      const targetId = edge.target === root ? anyStateId : nodeId(edge.target);
      lines.push(`${sourceId} --> ${targetId} : ${edge.label}`);
      edgesByScope.set(scope, lines);
    }
  }

  const lines: string[] = ['stateDiagram-v2'];
  const writeBlock = (node: AnyStateNode, indent: string): void => {
    const children = childrenOf(node);
    const initial = node.initial?.target[0];
    if (node.type === 'parallel') {
      children.forEach((child, index) => {
        if (index > 0) lines.push(`${indent}--`);
        writeState(child, indent);
      });
    } else {
      if (initial !== undefined) lines.push(`${indent}[*] --> ${nodeId(initial)}`);
      for (const child of children) writeState(child, indent);
    }
    for (const child of children) if (child.type === 'final') lines.push(`${indent}${nodeId(child)} --> [*]`);
    for (const edge of edgesByScope.get(node) ?? []) lines.push(`${indent}${edge}`);
  };
  const writeState = (node: AnyStateNode, indent: string): void => {
    const id = nodeId(node);
    if (childrenOf(node).length === 0) {
      lines.push(`${indent}state "${stateLabel(node)}" as ${id}`);
      return;
    }
    lines.push(`${indent}state "${stateLabel(node)}" as ${id} {`);
    writeBlock(node, `${indent}  `);
    lines.push(`${indent}}`);
  };

  if (rootHasEdges) lines.push(`  state "(any ${root.id} state)" as ${anyStateId}`);
  writeBlock(root, '  ');
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------- files

function readme(documented: readonly MachineSource[]): string {
  const rows = documented.map(
    (source) => `| ${source.title} | \`${source.exportName}\` in \`${source.file}\` | [${source.name}.mmd](${source.name}.mmd) | [${source.name}.json](${source.name}.json) |`,
  );
  return [
    '# Machine diagrams (generated)',
    '',
    'Generated from the machine definitions by `npm run docs:machines` (scripts/generate-machine-docs.ts).',
    'Do not edit by hand: `npm run docs:machines -- --check` and test/core/machine-docs.test.ts fail when',
    'these files are stale. See ../architecture.md for how the actors fit together.',
    '',
    '| machine | source | Mermaid | JSON |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
    '## Reading the Mermaid diagrams',
    '',
    '- Edge labels are `event [guard]`; `after <delay>` is a named delayed transition, `always` an eventless one,',
    '  `done <actor>` / `error <actor>` an invoked actor finishing or failing.',
    '- A transition without a target (it only runs actions) is drawn as a loop back to its own state.',
    '- `(any … state)` stands for transitions the machine takes from every state (root-level `on`).',
    '- Tags are shown in parentheses after the state name, e.g. the breaker\'s `admitting`.',
    '- GitHub renders `.mmd` files; elsewhere paste them into https://mermaid.live (online) or any Mermaid renderer.',
    '',
    '## Importing into Stately Studio',
    '',
    '1. Open https://stately.ai/registry/new (or Stately Studio → New machine). This needs network access.',
    '2. Choose **Import** → **Import from JSON** and paste the content of one `<name>.json` file; or choose',
    '   **Import from code** and paste the `setup({...}).createMachine({...})` source from the file named in the',
    '   table (Studio reads the source; implementations stay named, not inlined).',
    '3. The JSON is the machine\'s own config (what `createMachine` was given) as plain data: `initial` is a state',
    '   name, targets are as written, guards, actions, delays and invoked actors are kept by name, and combined guards',
    '   are written as one name spelling them out (`(isPendingCall and isCountedFailure)`). Left out: context',
    '   factories, dynamic `params` and `input`, inline implementations. So it runs: `setup({ guards, actions,',
    '   delays, actors }).createMachine(json)` (or `createMachine(json).provide(...)`) with implementations supplied',
    '   by those names; test/core/machine-json.test.ts starts every file with stubs and walks a path through it.',
    '   Studio shows the states, transitions, guards and action names; it cannot run the app\'s implementations.',
    '4. To watch a live system instead, start the service with the inspector enabled (see ../architecture.md).',
    '',
  ].join('\n');
}

/** Documents that embed diagrams between `<!-- machine-diagram:NAME -->` and `<!-- /machine-diagram:NAME -->`. */
export const embeddingDocuments: readonly string[] = ['docs/architecture.md', 'docs/api.md'];

/** Rewrites every marked block of `text` with the current diagram of its machine. */
function embedDiagrams(text: string, diagrams: ReadonlyMap<string, string>, path: string): string {
  return text.replace(
    /<!-- machine-diagram:([a-z0-9-]+) -->[\s\S]*?<!-- \/machine-diagram:\1 -->/g,
    (_block, name: string) => {
      const diagram = diagrams.get(name);
      if (diagram === undefined) throw new Error(`${path} embeds unknown machine diagram "${name}"`);
      return `<!-- machine-diagram:${name} -->\n<!-- generated by npm run docs:machines from machines/${name}.mmd -->\n\`\`\`mermaid\n${diagram}\`\`\`\n<!-- /machine-diagram:${name} -->`;
    },
  );
}

/** Every generated file, by path relative to the project root, in a stable order. */
export async function renderMachineDocs(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const documented: MachineSource[] = [];
  const diagrams = new Map<string, string>();
  for (const source of machineSources) {
    const machine = await loadMachine(source);
    if (machine === undefined) continue;
    documented.push(source);
    const diagram = toMermaid(machine);
    diagrams.set(source.name, diagram);
    files.set(`docs/machines/${source.name}.json`, `${JSON.stringify(toMachineConfig(machine), null, 2)}\n`);
    files.set(`docs/machines/${source.name}.mmd`, diagram);
  }
  files.set('docs/machines/README.md', readme(documented));
  for (const path of embeddingDocuments) {
    const full = join(projectRoot, path);
    if (existsSync(full)) files.set(path, embedRequestPath(embedDiagrams(await readFile(full, 'utf8'), diagrams, path)));
  }
  return files;
}

/** Files whose committed content differs from what the machines generate now. */
export async function staleMachineDocs(): Promise<string[]> {
  const stale: string[] = [];
  for (const [path, content] of await renderMachineDocs()) {
    const full = join(projectRoot, path);
    const committed = existsSync(full) ? await readFile(full, 'utf8') : undefined;
    if (committed !== content) stale.push(path);
  }
  return stale;
}

async function main(argv: readonly string[]): Promise<number> {
  if (argv.includes('--check')) {
    const stale = await staleMachineDocs();
    if (stale.length === 0) {
      process.stdout.write('docs/machines is up to date.\n');
      return 0;
    }
    process.stderr.write(`Stale machine docs (run npm run docs:machines):\n${stale.map((p) => `  ${p}`).join('\n')}\n`);
    return 1;
  }
  await mkdir(machineDocsDirectory, { recursive: true });
  for (const [path, content] of await renderMachineDocs()) {
    const full = join(projectRoot, path);
    if (existsSync(full) && (await readFile(full, 'utf8')) === content) continue;
    await writeFile(join(projectRoot, path), content);
    process.stdout.write(`wrote ${relative(process.cwd(), join(projectRoot, path))}\n`);
  }
  return 0;
}

const invokedDirectly = process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
