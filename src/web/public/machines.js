// The Machines panel: draws every generated machine diagram as SVG (states as boxes, nested states inside
// their parent, transitions as arrows) from the positions GET /web/machines.json carries (laid out on the
// server, src/web/machine-layout.ts), and highlights the live state by its XState path. No font, script or
// style from elsewhere: the arrowheads are SVG markers, the styling is style.css.

/** @typedef {{path: string, name: string, tags: string[], initial: boolean, final: boolean, compound: boolean, depth: number, x: number, y: number, width: number, height: number}} DrawnState */
/** @typedef {{from: string, to: string, transitions: string[], points: [number, number][], label?: {lines: string[], x: number, y: number, width: number, height: number}}} DrawnEdge */
/** @typedef {{name: string, width: number, height: number, states: DrawnState[], anyState?: {x: number, y: number, width: number, height: number}, initials: {id: string, x: number, y: number, r: number}[], edges: DrawnEdge[]}} DrawnMachine */
/** @typedef {{name: string, title: string, drawing: DrawnMachine}} MachineDrawing */

const svgNs = 'http://www.w3.org/2000/svg';

/** Machines drawn once per provider (their live state differs per provider). */
const perProvider = new Set(['breaker', 'key-health']);
/**
 * Drawings open at first (for the breaker: the first provider's). The others are one click away, their
 * live state in the summary, and open by themselves the first time their live state leaves the initial one
 * (a breaker opening, a key quarantined), so what changes is in view without a page of diagrams.
 */
const openAtFirst = new Set(['breaker', 'fallback', 'attempt', 'job']);

function svg(tag, attributes = {}, children = []) {
  const node = document.createElementNS(svgNs, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child);
  return node;
}

function html(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === 'text') node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

/** A text element whose lines are tspans, `x` the left edge. */
function textLines(lines, x, y, className) {
  const text = svg('text', { x, y, class: className });
  lines.forEach((line, index) => {
    const span = svg('tspan', { x, dy: index === 0 ? 0 : 13 });
    span.textContent = line;
    text.append(span);
  });
  return text;
}

let drawings = 0;

/**
 * One machine as an SVG element. Every state is a `g.state[data-path]` (a rect and its name); every
 * arrow a `g.edge[data-from][data-to]` (a path with an arrowhead, its label, and a <title> listing each
 * `event [guard]` it stands for).
 * @param {DrawnMachine} drawing @param {string} title
 */
export function drawMachine(drawing, title) {
  drawings += 1;
  const marker = `arrowhead-${drawings}`;
  const root = svg('svg', {
    class: 'diagram',
    viewBox: `0 0 ${drawing.width} ${drawing.height}`,
    width: drawing.width,
    height: drawing.height,
    role: 'img',
    'aria-label': `${title}: state diagram with ${drawing.states.length} states`,
  });
  root.append(
    svg('defs', {}, [
      svg('marker', { id: marker, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse', markerUnits: 'userSpaceOnUse' }, [
        svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }),
      ]),
    ]),
  );

  const states = svg('g', { class: 'states' });
  // Parents first, so a nested state is drawn over its frame.
  for (const state of [...drawing.states].sort((a, b) => a.depth - b.depth)) {
    const classes = ['state', state.compound ? 'compound' : 'simple', state.final ? 'final' : ''].filter(Boolean).join(' ');
    const group = svg('g', { class: classes, 'data-path': state.path });
    group.append(svg('rect', { class: 'box', x: state.x, y: state.y, width: state.width, height: state.height, rx: 8 }));
    if (state.final) group.append(svg('rect', { class: 'final-ring', x: state.x + 3, y: state.y + 3, width: state.width - 6, height: state.height - 6, rx: 6 }));
    const tags = state.tags.length > 0 ? `(${state.tags.join(', ')})` : '';
    if (state.compound) {
      group.append(textLines([state.name], state.x + 10, state.y + 17, 'state-name'));
      if (tags) group.append(textLines([tags], state.x + 10, state.y + 30, 'state-tags'));
    } else {
      const middle = state.x + state.width / 2;
      const name = textLines([state.name], middle, state.y + (tags ? 17 : 19), 'state-name centred');
      group.append(name);
      if (tags) group.append(textLines([tags], middle, state.y + 32, 'state-tags centred'));
    }
    group.append(svg('title', {}, [document.createTextNode(`${state.path}${tags ? ` ${tags}` : ''}${state.final ? ' (final)' : ''}`)]));
    states.append(group);
  }
  root.append(states);

  if (drawing.anyState) {
    const box = drawing.anyState;
    root.append(
      svg('g', { class: 'any-state' }, [
        svg('rect', { x: box.x, y: box.y, width: box.width, height: box.height, rx: 8 }),
        textLines(['any state'], box.x + box.width / 2, box.y + 19, 'state-name centred'),
        svg('title', {}, [document.createTextNode('Transitions the machine takes from every state')]),
      ]),
    );
  }
  for (const initial of drawing.initials) root.append(svg('circle', { class: 'initial', cx: initial.x, cy: initial.y, r: initial.r, 'data-id': initial.id }));

  const edges = svg('g', { class: 'edges' });
  for (const edge of drawing.edges) {
    if (edge.points.length < 2) continue;
    const group = svg('g', { class: `edge${edge.from.startsWith('initial:') ? ' initial-edge' : ''}`, 'data-from': edge.from, 'data-to': edge.to });
    const d = edge.points.map(([x, y], index) => `${index === 0 ? 'M' : 'L'}${x},${y}`).join(' ');
    group.append(svg('path', { class: 'line', d, 'marker-end': `url(#${marker})` }));
    if (edge.label) {
      const { x, y, width, height, lines } = edge.label;
      group.append(svg('rect', { class: 'label-bg', x, y, width, height, rx: 3 }));
      group.append(textLines(lines, x + 3, y + 12, 'edge-label'));
    }
    if (edge.transitions.length > 0) group.append(svg('title', {}, [document.createTextNode(edge.transitions.join('\n'))]));
    edges.append(group);
  }
  root.append(edges);
  return root;
}

/**
 * A text wider than the space the server laid out for it (another font than the estimate assumed) is
 * narrowed to fit, so no label spills over its box. Needs the SVG in the document (it measures).
 * @param {SVGSVGElement} root
 */
function fitTexts(root) {
  for (const text of root.querySelectorAll('text')) {
    const group = text.closest('g.state, g.any-state, g.edge');
    const box = group?.querySelector('rect');
    if (!box) continue;
    const room = Number(box.getAttribute('width')) - (text.classList.contains('edge-label') ? 4 : 12);
    for (const span of text.querySelectorAll('tspan')) {
      const length = /** @type {SVGTextContentElement} */ (span).getComputedTextLength();
      if (length > room && room > 0) {
        span.setAttribute('textLength', String(room));
        span.setAttribute('lengthAdjust', 'spacingAndGlyphs');
      }
    }
  }
}

/**
 * Draws every machine into `container`: one `<details>` per machine (per provider for the breaker and the
 * key health), its summary the title and the live state, its body the SVG.
 * @param {HTMLElement} container @param {MachineDrawing[]} machines @param {string[]} providers
 * @param {Record<string, string>} providerLabels
 */
export function renderMachines(container, machines, providers, providerLabels = {}) {
  container.replaceChildren();
  for (const machine of machines) {
    const instances = perProvider.has(machine.name) ? providers : [''];
    for (const instance of instances) {
      const title = `${machine.title}${instance ? ` · ${providerLabels[instance] ?? instance}` : ''}`;
      const details = html('details', { class: 'machine', 'data-machine': machine.name, 'data-instance': instance });
      if (openAtFirst.has(machine.name) && (instance === '' || instance === providers[0])) details.setAttribute('open', '');
      const initial = machine.drawing.states.find((state) => state.initial && state.depth === 0);
      details.setAttribute('data-initial', initial ? initial.path : '');
      const summary = html('summary', {}, [html('span', { class: 'machine-title', text: title }), html('span', { class: 'live', text: 'live state: —' })]);
      const figure = html('div', { class: 'diagram-wrap' }, [drawMachine(machine.drawing, title)]);
      // As wide as the drawing wants (so its 12 px labels stay 12 px) while the panel has room; narrower
      // panels scale it down. CSSOM, not a style attribute: the page's CSP allows no inline styles.
      details.style.flexBasis = `${machine.drawing.width + 24}px`;
      details.append(summary, figure);
      container.append(details);
      const svgRoot = /** @type {SVGSVGElement} */ (figure.firstElementChild);
      if (details.open) fitTexts(svgRoot);
      else details.addEventListener('toggle', () => fitTexts(svgRoot), { once: true });
    }
  }
  for (const [key, path] of liveStates) {
    const [machine = '', instance = ''] = key.split('/');
    applyState(container, machine, instance, path);
  }
}

/** The last live state given for each drawing (`machine/instance`), kept so a drawing made later shows it. */
const liveStates = new Map();

/**
 * Highlights the live state of one drawn machine: the state and its ancestors get the `current` class,
 * the state itself `aria-current`, the summary says it. `path` is a dotted state path, or a list of
 * candidate paths (the names a state has had across versions of a machine: the first the drawing has
 * wins), or null to clear. A state the drawing does not have highlights nothing. Called before the
 * drawings exist (the page loads them in parallel with the streams), it is remembered and shown then.
 * @param {HTMLElement} container @param {string} machine @param {string} instance @param {string | string[] | null} path
 */
export function highlightState(container, machine, instance, path) {
  liveStates.set(`${machine}/${instance}`, path);
  applyState(container, machine, instance, path);
}

function applyState(container, machine, instance, wanted) {
  const section = container.querySelector(`details.machine[data-machine="${machine}"][data-instance="${instance}"]`);
  if (!section) return;
  const has = (candidate) => section.querySelector(`g.state[data-path="${candidate}"]`) !== null;
  const path = Array.isArray(wanted) ? (wanted.find(has) ?? null) : wanted;
  const live = section.querySelector('.live');
  if (live) live.textContent = `live state: ${path ?? '—'}`;
  section.setAttribute('data-live', path ?? '');
  if (path !== null && path !== section.getAttribute('data-initial') && !section.hasAttribute('data-opened-by-state')) {
    section.setAttribute('data-opened-by-state', '');
    /** @type {HTMLDetailsElement} */ (section).open = true;
  }
  for (const node of section.querySelectorAll('g.state')) {
    const statePath = node.getAttribute('data-path') ?? '';
    const current = path !== null && (path === statePath || path.startsWith(`${statePath}.`));
    node.classList.toggle('current', current);
    if (current && path === statePath) node.setAttribute('aria-current', 'true');
    else node.removeAttribute('aria-current');
  }
}

/**
 * Marks the arrow(s) of the last transition from `from` to `to` (top-level or nested paths) as `taken`.
 * @param {HTMLElement} container @param {string} machine @param {string} instance @param {string} from @param {string} to
 */
export function markTransition(container, machine, instance, from, to) {
  const section = container.querySelector(`details.machine[data-machine="${machine}"][data-instance="${instance}"]`);
  if (!section) return;
  const within = (path, state) => path === state || path.startsWith(`${state}.`) || state.startsWith(`${path}.`);
  for (const edge of section.querySelectorAll('g.edge')) {
    const taken = within(edge.getAttribute('data-from') ?? '', from) && within(edge.getAttribute('data-to') ?? '', to);
    edge.classList.toggle('taken', taken);
  }
}
