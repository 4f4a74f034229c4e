/**
 * Where the page's files are on disk. They are read from the project tree (not copied into dist/), so the
 * same lookup works under tsx (src/web/assets.ts) and after `npm run build` (dist/src/web/assets.js): walk
 * up from this module to the directory whose package.json is this project's.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const projectName = 'study-helper';

/** The project root: the nearest ancestor of `from` holding study-helper's package.json. */
export function findProjectRoot(from: string = dirname(fileURLToPath(import.meta.url))): string {
  let directory = from;
  for (;;) {
    const manifest = join(directory, 'package.json');
    if (existsSync(manifest)) {
      try {
        const parsed: unknown = JSON.parse(readFileSync(manifest, 'utf8'));
        if (typeof parsed === 'object' && parsed !== null && 'name' in parsed && parsed.name === projectName) return directory;
      } catch {
        // Not ours (or unreadable): keep walking up.
      }
    }
    const parent = dirname(directory);
    if (parent === directory) throw new Error(`The web page's files were not found: no ${projectName} package.json above ${from}`);
    directory = parent;
  }
}

export interface WebPaths {
  /** src/web/public: index.html, the script and the stylesheet. */
  readonly publicDirectory: string;
  /** docs/machines: the generated machine diagrams. */
  readonly machinesDirectory: string;
}

export function webPaths(root: string = findProjectRoot()): WebPaths {
  return { publicDirectory: join(root, 'src', 'web', 'public'), machinesDirectory: join(root, 'docs', 'machines') };
}

/**
 * The files the page is made of: name → content type. Nothing else is served from disk. A Map, not an
 * object: a lookup of `constructor`, `__proto__` or `toString` must find nothing (an object literal
 * answers them from Object.prototype, which made `GET /web/constructor` a 500).
 */
export const publicFiles: ReadonlyMap<string, string> = new Map([
  ['index.html', 'text/html; charset=utf-8'],
  ['app.js', 'text/javascript; charset=utf-8'],
  ['machines.js', 'text/javascript; charset=utf-8'],
  ['icons.js', 'text/javascript; charset=utf-8'],
  ['style.css', 'text/css; charset=utf-8'],
  ['favicon.svg', 'image/svg+xml'],
]);
