/**
 * The machine drawings (src/web/machine-layout.ts, machine-drawings.ts): every generated diagram laid out
 * by elkjs. The oracle is the .mmd text itself, read here with its own regular expressions: one box per
 * `state "…" as id` line (the `(any … state)` stand-in excepted), one arrow per distinct `a --> b` pair,
 * nested boxes inside their parent, siblings apart, arrows from the source's border to the target's.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { webPaths } from '../../src/web/assets.js';
import { parseStateDiagram } from '../../src/web/machine-diagram.js';
import type { MachineDiagram } from '../../src/web/machine-diagram.js';
import { layoutInWorker, machineDrawings } from '../../src/web/machine-drawings.js';
import { layoutMachine, maxLabelLines } from '../../src/web/machine-layout.js';
import type { DrawnMachine } from '../../src/web/machine-layout.js';

const { machinesDirectory } = webPaths();

interface Box {
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

const inside = (inner: Box, outer: Box): boolean =>
  inner.x >= outer.x && inner.y >= outer.y && inner.x + inner.width <= outer.x + outer.width && inner.y + inner.height <= outer.y + outer.height;
const overlap = (a: Box, b: Box): boolean => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
/** On the box's outline, within 1.5 px. */
const onBorder = ([x, y]: readonly [number, number], box: Box): boolean => {
  const tolerance = 1.5;
  const withinX = x >= box.x - tolerance && x <= box.x + box.width + tolerance;
  const withinY = y >= box.y - tolerance && y <= box.y + box.height + tolerance;
  const nearVertical = Math.abs(x - box.x) <= tolerance || Math.abs(x - (box.x + box.width)) <= tolerance;
  const nearHorizontal = Math.abs(y - box.y) <= tolerance || Math.abs(y - (box.y + box.height)) <= tolerance;
  return (withinX && nearHorizontal) || (withinY && nearVertical);
};

async function diagrams(): Promise<{ name: string; text: string; diagram: MachineDiagram }[]> {
  const names = (await readdir(machinesDirectory)).filter((file) => file.endsWith('.mmd')).map((file) => file.slice(0, -4));
  return Promise.all(
    names.map(async (name) => {
      const text = await readFile(join(machinesDirectory, `${name}.mmd`), 'utf8');
      return { name, text, diagram: parseStateDiagram(name, text) };
    }),
  );
}

/** What the text says: the state ids (not the any-state stand-in) and the distinct transition pairs. */
function oracle(text: string): { states: number; anyId: string | undefined; pairs: Set<string> } {
  const declared = [...text.matchAll(/^\s*state "([^"]*)" as (\S+)/gm)];
  const anyId = declared.find((match) => match[1]!.startsWith('(any '))?.[2];
  const pairs = new Set<string>();
  for (const match of text.matchAll(/^\s*(\S+) --> (\S+)/gm)) {
    if (match[1] === '[*]' || match[2] === '[*]') continue;
    pairs.add(`${match[1]} ${match[2]}`);
  }
  return { states: declared.length - (anyId === undefined ? 0 : 1), anyId, pairs };
}

function check(name: string, text: string, drawn: DrawnMachine): void {
  const expected = oracle(text);
  expect(drawn.states, name).toHaveLength(expected.states);
  expect(drawn.edges.filter((edge) => !edge.from.startsWith('initial:')), name).toHaveLength(expected.pairs.size);
  expect(drawn.anyState !== undefined, name).toBe(expected.anyId !== undefined);
  const byPath = new Map(drawn.states.map((state) => [state.path, state]));
  for (const state of drawn.states) {
    expect(state.width * state.height, `${name} ${state.path} has an area`).toBeGreaterThan(0);
    expect(inside(state, { x: 0, y: 0, width: drawn.width, height: drawn.height }), `${name} ${state.path} inside the drawing`).toBe(true);
    const parentPath = state.path.split('.').slice(0, -1).join('.');
    const parent = byPath.get(parentPath);
    if (parent !== undefined) expect(inside(state, parent), `${name} ${state.path} inside ${parentPath}`).toBe(true);
  }
  // Siblings (same parent) never overlap, and neither do top-level boxes and the any-state box.
  const boxesOf = (parentPath: string): Box[] => [
    ...drawn.states.filter((state) => state.path.split('.').slice(0, -1).join('.') === parentPath),
    ...(parentPath === '' && drawn.anyState !== undefined ? [drawn.anyState] : []),
  ];
  for (const parentPath of ['', ...drawn.states.filter((state) => state.compound).map((state) => state.path)]) {
    const boxes = boxesOf(parentPath);
    for (let i = 0; i < boxes.length; i += 1) for (let j = i + 1; j < boxes.length; j += 1) expect(overlap(boxes[i]!, boxes[j]!), `${name} siblings in ${parentPath || 'root'}`).toBe(false);
  }
  const boxOf = (id: string): Box | undefined => (id === '*' ? drawn.anyState : byPath.get(id));
  for (const edge of drawn.edges) {
    expect(edge.points.length, `${name} ${edge.from} -> ${edge.to}`).toBeGreaterThanOrEqual(2);
    const source = boxOf(edge.from);
    const target = boxOf(edge.to);
    if (source !== undefined) expect(onBorder(edge.points[0]!, source), `${name} ${edge.from} -> ${edge.to} leaves its source`).toBe(true);
    if (target !== undefined) expect(onBorder(edge.points.at(-1)!, target), `${name} ${edge.from} -> ${edge.to} reaches its target`).toBe(true);
    if (edge.from.startsWith('initial:')) continue;
    const events = new Set(edge.transitions.map((label) => label.replace(/\s*\[.*\]$/, '')));
    const lines = edge.label?.lines ?? [];
    if (events.size <= maxLabelLines) expect([...lines].sort(), `${name} ${edge.from} -> ${edge.to}`).toEqual([...events].sort());
    else expect(lines.at(-1)).toBe(`+${events.size - maxLabelLines + 1} more`);
  }
  // One initial dot per level that has an initial state.
  const levels = new Set(drawn.states.filter((state) => state.initial).map((state) => state.path.split('.').slice(0, -1).join('.')));
  expect(drawn.initials.map((initial) => initial.id.slice('initial:'.length)).sort(), name).toEqual([...levels].sort());
}

describe('machine drawings', () => {
  it('lays out every generated diagram: a box per state, an arrow per connected pair, nested and apart', async () => {
    for (const { name, text, diagram } of await diagrams()) check(name, text, await layoutMachine(diagram));
  }, 60_000);

  it('merges parallel transitions into one arrow and cuts long labels with "+N more"', async () => {
    const text = [
      'stateDiagram-v2',
      '  [*] --> a',
      '  state "a" as a',
      '  state "b" as b',
      ...['e1', 'e2', 'e3', 'e4', 'e5', 'e6'].map((event) => `  a --> b : ${event} [guard]`),
      '  a --> b : e1',
      '  b --> a : back',
    ].join('\n');
    const drawn = await layoutMachine(parseStateDiagram('test', text));
    check('test', text, drawn);
    const forward = drawn.edges.find((edge) => edge.from === 'a' && edge.to === 'b');
    expect(forward?.transitions).toHaveLength(7);
    expect(forward?.label?.lines).toEqual(['e1', 'e2', 'e3', '+3 more']);
  });

  it('lays out in a worker thread the same as in-process', async () => {
    const all = await diagrams();
    const breaker = all.find((entry) => entry.name === 'breaker')!;
    const [inWorker] = await layoutInWorker([breaker.diagram]);
    expect(inWorker).toEqual(await layoutMachine(breaker.diagram));
  }, 60_000);

  it('lays each diagram out once, and again a minute after a failed layout', async () => {
    let calls = 0;
    let fail = true;
    const layout = async (list: readonly MachineDiagram[]): Promise<DrawnMachine[]> => {
      calls += 1;
      if (fail) throw new Error('layout failed');
      return Promise.all(list.map((diagram) => layoutMachine(diagram)));
    };
    let clock = 0;
    const drawings = machineDrawings(machinesDirectory, { layout, retryAfterMs: 60_000, now: () => clock });
    await expect(drawings()).rejects.toThrow('layout failed');
    fail = false;
    // Within the minute after a failure: refused at once, no new layout.
    clock = 59_999;
    await expect(drawings()).rejects.toThrow('trying again later');
    expect(calls).toBe(1);
    clock = 60_000;
    const first = await drawings();
    const second = await drawings();
    expect(calls).toBe(2);
    expect(second).toEqual(first);
    expect(first.map((machine) => machine.name)).toContain('breaker');
  }, 60_000);
});
