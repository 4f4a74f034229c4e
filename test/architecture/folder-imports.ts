import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** `from → to` edges between the top-level folders under `root`, read from relative imports and re-exports. */
export function folderEdges(root: string): Set<string> {
  const edges = new Set<string>();
  const top = (file: string): string => relative(root, file).split('/')[0] ?? '';
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) {
        walk(path);
        continue;
      }
      if (!/\.(ts|mts|js|mjs)$/.test(name) || name.endsWith('.d.ts')) continue;
      const from = top(path);
      if (/\.(ts|js)$/.test(from)) continue;
      const text = readFileSync(path, 'utf8');
      for (const match of text.matchAll(/(?:import|export)[^'"`;]*?from\s+['"](\.[^'"]+)['"]/g)) {
        const to = top(resolve(dirname(path), match[1] ?? '.'));
        if (to !== from && !to.startsWith('..')) edges.add(`${from}>${to}`);
      }
    }
  };
  walk(root);
  return edges;
}

/** The pairs of folders that import each other, as `a⇄b` (a before b). */
export function folderCycles(edges: ReadonlySet<string>): string[] {
  return [...edges]
    .filter((edge) => {
      const [a = '', b = ''] = edge.split('>');
      return a < b && edges.has(`${b}>${a}`);
    })
    .map((edge) => edge.replace('>', '⇄'))
    .sort();
}

/**
 * Files under `root` outside its `machines` folder that import XState's `setup` or `createMachine`
 * (a machine defined outside the bottom layer), as paths relative to `root`.
 */
export function machineDefinitionsOutside(root: string, machinesFolder = 'machines'): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) {
        if (relative(root, path) !== machinesFolder) walk(path);
        continue;
      }
      if (!/\.(ts|mts|js|mjs)$/.test(name) || name.endsWith('.d.ts')) continue;
      const text = readFileSync(path, 'utf8');
      for (const match of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*['"]xstate['"]/g)) {
        const names = (match[1] ?? '').split(',').map((part) => part.trim().split(/\s+as\s+/)[0]);
        if (names.includes('setup') || names.includes('createMachine')) found.push(relative(root, path));
      }
    }
  };
  walk(root);
  return found.sort();
}
