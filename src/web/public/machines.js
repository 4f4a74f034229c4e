// The "Machines" section: each generated state diagram (GET /web/machines.json, from docs/machines/*.mmd)
// drawn as nested state boxes with their outgoing transitions; the live state is highlighted.

/** @typedef {{path: string, name: string, tags: string[], initial: boolean, final: boolean, children: DiagramState[]}} DiagramState */
/** @typedef {{from: string, to: string, label: string}} DiagramEdge */
/** @typedef {{name: string, states: DiagramState[], edges: DiagramEdge[]}} MachineDiagram */

const titles = {
  gateway: 'Gateway (root)',
  provider: 'Provider actor',
  breaker: 'Circuit breaker',
  fallback: 'Retry-and-fallback run (last request)',
  'timelygpt-session': 'TimelyGPT session',
};

function element(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === 'text') node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

/** @param {DiagramState[]} states @param {DiagramEdge[]} edges */
function stateList(states, edges) {
  const list = element('ul', { class: 'states' });
  for (const state of states) {
    const item = element('li', { class: `state${state.final ? ' final' : ''}`, 'data-path': state.path });
    const label = element('span', { class: 'name', text: `${state.initial ? '→ ' : ''}${state.name}` });
    item.append(label);
    if (state.tags.length > 0) item.append(element('span', { class: 'tags', text: ` (${state.tags.join(', ')})` }));
    const outgoing = edges.filter((edge) => edge.from === state.path);
    if (outgoing.length > 0) {
      const ul = element('ul', { class: 'edges' });
      for (const edge of outgoing) ul.append(element('li', { text: `${edge.label || '—'} → ${edge.to === state.path ? '(self)' : edge.to}` }));
      item.append(ul);
    }
    if (state.children.length > 0) item.append(stateList(state.children, edges));
    list.append(item);
  }
  return list;
}

/**
 * Draws every machine; the breaker once per provider.
 * @param {HTMLElement} container @param {MachineDiagram[]} machines @param {string[]} providers
 */
export function renderMachines(container, machines, providers) {
  container.replaceChildren();
  for (const machine of machines) {
    const instances = machine.name === 'breaker' ? providers : [''];
    for (const instance of instances) {
      const title = `${titles[machine.name] ?? machine.name}${instance ? ` · ${instance}` : ''}`;
      const section = element('section', { class: 'machine', 'data-machine': machine.name, 'data-instance': instance, 'aria-label': title });
      section.append(element('h3', { text: title }));
      section.append(element('p', { class: 'live', text: 'live state: —' }));
      section.append(stateList(machine.states, machine.edges));
      const rootEdges = machine.edges.filter((edge) => edge.from === '*');
      if (rootEdges.length > 0) {
        section.append(element('p', { class: 'machine-any', text: `from any state: ${rootEdges.map((edge) => `${edge.label} → ${edge.to}`).join('; ')}` }));
      }
      container.append(section);
    }
  }
}

/**
 * Highlights `path` (a dotted state path; its ancestors too) in one drawn machine; null clears it.
 * @param {HTMLElement} container @param {string} machine @param {string} instance @param {string | null} path
 */
export function highlightState(container, machine, instance, path) {
  const section = container.querySelector(`section.machine[data-machine="${machine}"][data-instance="${instance}"]`);
  if (!section) return;
  const live = section.querySelector('.live');
  if (live) live.textContent = `live state: ${path ?? '—'}`;
  for (const node of section.querySelectorAll('li.state')) {
    const statePath = node.getAttribute('data-path') ?? '';
    const current = path !== null && (path === statePath || path.startsWith(`${statePath}.`));
    node.classList.toggle('current', current);
    if (current) node.setAttribute('aria-current', 'true');
    else node.removeAttribute('aria-current');
  }
}
