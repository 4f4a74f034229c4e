/**
 * Reads a generated Mermaid state diagram (docs/machines/<name>.mmd, written by `npm run docs:machines`)
 * into a plain tree of states and a list of edges, which the page draws with the live state highlighted.
 * Only the subset the generator writes is understood: `state "label" as id`, `state "label" as id {`,
 * `}`, `a --> b : label`, `[*] --> a`.
 */

export interface DiagramState {
  /** Dotted state path as XState names it, e.g. `halfOpen.awaitingProbe`. */
  readonly path: string;
  /** The last segment of the path. */
  readonly name: string;
  /** Tags shown by the generator, e.g. `admitting`. */
  readonly tags: readonly string[];
  readonly initial: boolean;
  readonly final: boolean;
  readonly children: DiagramState[];
}

interface DiagramEdge {
  /** A state path, or `*` for the machine's root-level (any state) transitions. */
  readonly from: string;
  readonly to: string;
  /** `event [guard]`, `always`, `after <delay>`. */
  readonly label: string;
}

export interface MachineDiagram {
  readonly name: string;
  readonly states: DiagramState[];
  readonly edges: DiagramEdge[];
}

interface MutableState {
  path: string;
  name: string;
  tags: string[];
  initial: boolean;
  final: boolean;
  children: MutableState[];
}

const stateLine = /^state\s+"([^"]*)"\s+as\s+(\S+?)\s*(\{)?$/;
const edgeLine = /^(\S+)\s+-->\s+(\S+)(?:\s*:\s*(.*))?$/;

export function parseStateDiagram(name: string, mermaid: string): MachineDiagram {
  const roots: MutableState[] = [];
  const byId = new Map<string, MutableState>();
  const stack: MutableState[] = [];
  const edges: DiagramEdge[] = [];
  const initialIds: string[] = [];
  const finalIds: string[] = [];
  let anyStateId: string | undefined;

  for (const raw of mermaid.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('stateDiagram') || line.startsWith('%%')) continue;
    if (line === '}') {
      stack.pop();
      continue;
    }
    const state = stateLine.exec(line);
    if (state !== null) {
      const [, label = '', id = '', opens] = state;
      if (label.startsWith('(any ')) {
        anyStateId = id;
        continue;
      }
      const tagMatch = /^(.*?)\s+\(([^)]*)\)$/.exec(label);
      const shortName = tagMatch?.[1] ?? label;
      const parent = stack.at(-1);
      const node: MutableState = {
        path: parent === undefined ? shortName : `${parent.path}.${shortName}`,
        name: shortName,
        tags: tagMatch?.[2] === undefined ? [] : tagMatch[2].split(',').map((tag) => tag.trim()),
        initial: false,
        final: false,
        children: [],
      };
      (parent === undefined ? roots : parent.children).push(node);
      byId.set(id, node);
      if (opens !== undefined) stack.push(node);
      continue;
    }
    const edge = edgeLine.exec(line);
    if (edge !== null) {
      const [, from = '', to = '', label = ''] = edge;
      if (from === '[*]') initialIds.push(to);
      else if (to === '[*]') finalIds.push(from);
      else edges.push({ from, to, label: label.trim() });
    }
  }

  for (const id of initialIds) {
    const node = byId.get(id);
    if (node !== undefined) node.initial = true;
  }
  for (const id of finalIds) {
    const node = byId.get(id);
    if (node !== undefined) node.final = true;
  }
  const pathOf = (id: string): string => (id === anyStateId ? '*' : (byId.get(id)?.path ?? id));
  return {
    name,
    states: roots,
    edges: edges.map((edge) => ({ from: pathOf(edge.from), to: pathOf(edge.to), label: edge.label })),
  };
}
