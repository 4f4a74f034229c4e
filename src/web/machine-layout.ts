/**
 * Lays out a machine diagram (states as boxes, nested states inside their parent, transitions as arrows)
 * with the Eclipse Layout Kernel (elkjs, the layered algorithm Stately's own editor uses), on the server,
 * so the page only draws positioned boxes and polylines as SVG: no layout code, no font, no script from
 * elsewhere in the browser. The input is the generated diagram (docs/machines/<name>.mmd, written from the
 * machine definitions by `npm run docs:machines`), so a changed machine is a changed drawing.
 *
 * Readability rules: parallel transitions between the same two states (the same event under several
 * guards, or several events) are one arrow whose label lists the distinct events, at most
 * `maxLabelLines` of them (the full `event [guard]` list goes with the edge for the page's tooltip);
 * root-level transitions ("from any state") leave a dashed `any state` box; each level with an initial
 * state gets the usual filled dot and arrow.
 */
import elkModule from 'elkjs/lib/elk.bundled.js';
import type { ELK, ElkExtendedEdge, ElkLabel, ElkNode } from 'elkjs/lib/elk-api.js';
import type { DiagramState, MachineDiagram } from './machine-diagram.js';

/** One state as drawn: absolute box in the machine's SVG coordinates. */
interface DrawnState {
  /** The dotted state path, as XState names it (`halfOpen.probing`): what the page highlights by. */
  readonly path: string;
  readonly name: string;
  readonly tags: readonly string[];
  readonly initial: boolean;
  readonly final: boolean;
  /** Has child states (drawn as a frame around them, its name at the top). */
  readonly compound: boolean;
  /** 0 for a top-level state. */
  readonly depth: number;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

/** One arrow: every transition from `from` to `to`, merged. */
interface DrawnEdge {
  /** A state path, `*` (any state) or `initial:<parent path>` (the initial dot of that level; `initial:` at the root). */
  readonly from: string;
  readonly to: string;
  /** Every transition this arrow stands for, `event [guard]` as generated. */
  readonly transitions: readonly string[];
  /** The polyline, absolute, from the source's border to the target's (the arrowhead's tip). */
  readonly points: readonly (readonly [number, number])[];
  readonly label?: { readonly lines: readonly string[]; readonly x: number; readonly y: number; readonly width: number; readonly height: number };
}

export interface DrawnMachine {
  readonly name: string;
  readonly width: number;
  readonly height: number;
  readonly states: readonly DrawnState[];
  /** The dashed "any state" box, when the machine has root-level transitions. */
  readonly anyState?: { readonly x: number; readonly y: number; readonly width: number; readonly height: number };
  /** The initial dots (one per level that has an initial state): centre and radius. */
  readonly initials: readonly { readonly id: string; readonly x: number; readonly y: number; readonly r: number }[];
  readonly edges: readonly DrawnEdge[];
}

/** Arrow labels longer than this many events end in `+N more` (the tooltip has them all). */
export const maxLabelLines = 4;

const fontSize = 12;
const initialSize = 12;
const anyStateId = '*';

/**
 * Width of `text` in px at 12 px in a sans-serif face, over-estimated a little (Open Sans, the widest
 * common one, is the shipped test browser's only font); the page narrows a text that still overflows.
 */
function textWidth(text: string, size = fontSize): number {
  let em = 0;
  for (const character of text) {
    if ('iljtfrI.,:;!|\'[]() '.includes(character)) em += 0.32;
    else if ('mwMW'.includes(character)) em += 0.9;
    else if (character >= 'A' && character <= 'Z') em += 0.68;
    else em += 0.58;
  }
  return Math.ceil(em * size) + 2;
}

function eventOf(label: string): string {
  return label.replace(/\s*\[.*\]$/, '') || '(no event)';
}

function labelLines(transitions: readonly string[]): string[] {
  const events = [...new Set(transitions.map(eventOf))];
  if (events.length <= maxLabelLines) return events;
  return [...events.slice(0, maxLabelLines - 1), `+${events.length - maxLabelLines + 1} more`];
}

const nodeId = (path: string): string => `s:${path}`;
const initialId = (parentPath: string): string => `initial:${parentPath}`;

const rootOptions: Readonly<Record<string, string>> = {
  'elk.algorithm': 'layered',
  'elk.direction': 'DOWN',
  'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
  'elk.edgeRouting': 'ORTHOGONAL',
  'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
  // The states in the order the machine declares them, top to bottom where the transitions allow: the
  // initial state comes first instead of wherever a cycle left it.
  'elk.layered.cycleBreaking.strategy': 'MODEL_ORDER',
  'elk.layered.spacing.nodeNodeBetweenLayers': '34',
  'elk.layered.spacing.edgeNodeBetweenLayers': '14',
  'elk.spacing.nodeNode': '26',
  'elk.spacing.edgeNode': '14',
  'elk.spacing.edgeEdge': '10',
  'elk.spacing.edgeLabel': '3',
  'elk.edgeLabels.placement': 'CENTER',
  'elk.padding': '[top=12,left=12,bottom=12,right=12]',
  // Absolute coordinates for every shape, edge and label: the page draws them as they are.
  'elk.json.shapeCoords': 'ROOT',
  'elk.json.edgeCoords': 'ROOT',
};

function stateNode(state: DiagramState, edges: ElkExtendedEdge[]): ElkNode {
  const tagText = state.tags.length > 0 ? `(${state.tags.join(', ')})` : '';
  const labelWidth = Math.max(textWidth(state.name, 13) + 4, textWidth(tagText, 11));
  if (state.children.length === 0) {
    return { id: nodeId(state.path), width: Math.max(64, labelWidth + 20), height: tagText === '' ? 30 : 42 };
  }
  const children: ElkNode[] = [];
  const initialChild = state.children.find((child) => child.initial);
  if (initialChild !== undefined) {
    children.push({ id: initialId(state.path), width: initialSize, height: initialSize });
    edges.push({ id: `e:${initialId(state.path)}`, sources: [initialId(state.path)], targets: [nodeId(initialChild.path)] });
  }
  for (const child of state.children) children.push(stateNode(child, edges));
  const top = tagText === '' ? 26 : 38;
  return {
    id: nodeId(state.path),
    children,
    layoutOptions: {
      'elk.padding': `[top=${top},left=12,bottom=12,right=12]`,
      'elk.nodeSize.constraints': '[MINIMUM_SIZE]',
      'elk.nodeSize.minimum': `(${labelWidth + 24}, ${top + 20})`,
    },
  };
}

function flatten(states: readonly DiagramState[], depth = 0, into: { state: DiagramState; depth: number }[] = []): { state: DiagramState; depth: number }[] {
  for (const state of states) {
    into.push({ state, depth });
    flatten(state.children, depth + 1, into);
  }
  return into;
}

// The bundle is CommonJS with the class as `module.exports` and as its `default`; under NodeNext the
// typings give the module, so the class is taken from `default`.
const ElkClass = (elkModule as unknown as { default: new () => ELK }).default;
let elk: ELK | undefined;

/** Lays out one parsed machine diagram. Deterministic: the same diagram gives the same drawing. */
export async function layoutMachine(diagram: MachineDiagram): Promise<DrawnMachine> {
  elk ??= new ElkClass();
  const known = new Set(flatten(diagram.states).map(({ state }) => state.path));
  const edges: ElkExtendedEdge[] = [];
  const children: ElkNode[] = [];
  const rootInitial = diagram.states.find((state) => state.initial);
  if (rootInitial !== undefined) {
    children.push({ id: initialId(''), width: initialSize, height: initialSize });
    edges.push({ id: `e:${initialId('')}`, sources: [initialId('')], targets: [nodeId(rootInitial.path)] });
  }
  const hasAny = diagram.edges.some((edge) => edge.from === anyStateId);
  if (hasAny) children.push({ id: anyStateId, width: textWidth('any state', 13) + 24, height: 30 });
  for (const state of diagram.states) children.push(stateNode(state, edges));

  // One arrow per (from, to), in the order the generator wrote them.
  const merged = new Map<string, { from: string; to: string; transitions: string[] }>();
  for (const edge of diagram.edges) {
    const endpoint = (path: string): string | undefined => (path === anyStateId ? anyStateId : known.has(path) ? nodeId(path) : undefined);
    const from = endpoint(edge.from);
    const to = endpoint(edge.to);
    if (from === undefined || to === undefined) continue;
    const key = `${from}\u0000${to}`;
    const entry = merged.get(key) ?? { from, to, transitions: [] };
    entry.transitions.push(edge.label);
    merged.set(key, entry);
  }
  const transitionsById = new Map<string, { from: string; to: string; transitions: string[]; lines: string[] }>();
  let index = 0;
  for (const entry of merged.values()) {
    const id = `t:${index++}`;
    const lines = labelLines(entry.transitions);
    const label: ElkLabel = {
      id: `${id}:label`,
      text: lines.join('\n'),
      width: Math.max(...lines.map((line) => textWidth(line, 11))) + 6,
      height: lines.length * 13 + 4,
    };
    transitionsById.set(id, { ...entry, lines });
    edges.push({ id, sources: [entry.from], targets: [entry.to], labels: [label] });
  }

  const graph: ElkNode = { id: 'root', layoutOptions: { ...rootOptions }, children, edges };
  const laid = await elk.layout(graph);

  const boxes = new Map<string, { x: number; y: number; width: number; height: number }>();
  const walk = (nodes: readonly ElkNode[] | undefined): void => {
    for (const node of nodes ?? []) {
      boxes.set(node.id, { x: round(node.x), y: round(node.y), width: round(node.width), height: round(node.height) });
      walk(node.children);
    }
  };
  walk(laid.children);

  const drawnStates: DrawnState[] = flatten(diagram.states).map(({ state, depth }) => {
    const box = boxes.get(nodeId(state.path)) ?? { x: 0, y: 0, width: 0, height: 0 };
    return {
      path: state.path,
      name: state.name,
      tags: state.tags,
      initial: state.initial,
      final: state.final,
      compound: state.children.length > 0,
      depth,
      ...box,
    };
  });
  const initials = [...boxes].filter(([id]) => id.startsWith('initial:')).map(([id, box]) => ({ id, x: box.x + box.width / 2, y: box.y + box.height / 2, r: box.width / 2 }));

  const drawnEdges: DrawnEdge[] = [];
  for (const edge of laid.edges ?? []) {
    const points: [number, number][] = [];
    for (const section of edge.sections ?? []) {
      points.push([round(section.startPoint.x), round(section.startPoint.y)]);
      for (const bend of section.bendPoints ?? []) points.push([round(bend.x), round(bend.y)]);
      points.push([round(section.endPoint.x), round(section.endPoint.y)]);
    }
    const source = edge.sources[0] ?? '';
    const target = edge.targets[0] ?? '';
    const plain = (id: string): string => (id.startsWith('s:') ? id.slice(2) : id);
    const merged_ = transitionsById.get(edge.id);
    const elkLabel = edge.labels?.[0];
    drawnEdges.push({
      from: plain(source),
      to: plain(target),
      transitions: merged_?.transitions ?? [],
      points,
      ...(merged_ !== undefined && elkLabel !== undefined
        ? { label: { lines: merged_.lines, x: round(elkLabel.x), y: round(elkLabel.y), width: round(elkLabel.width), height: round(elkLabel.height) } }
        : {}),
    });
  }
  const anyBox = boxes.get(anyStateId);
  return {
    name: diagram.name,
    width: round(laid.width),
    height: round(laid.height),
    states: drawnStates,
    ...(anyBox === undefined ? {} : { anyState: anyBox }),
    initials,
    edges: drawnEdges,
  };
}

function round(value: number | undefined): number {
  return Math.round((value ?? 0) * 10) / 10;
}
