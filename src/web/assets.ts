/**
 * Where the page's files are on disk: beside this module. `npm run build` copies them into dist/ (scripts/
 * copy-assets.mjs), so the same relative paths hold under tsx (src/web/assets.ts: src/web/public,
 * docs/machines) and in the build (dist/src/web/assets.js: dist/src/web/public, dist/docs/machines): the
 * service runs from its build alone (the packed package, the container), never from the project tree.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const projectName = 'study-helper';

/** The directory of this module: src/web, or dist/src/web in the build. */
const moduleDirectory = dirname(fileURLToPath(import.meta.url));

/** The project root: the nearest ancestor of `from` holding study-helper's package.json (tests and tools). */
export function findProjectRoot(from: string = moduleDirectory): string {
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
  /** src/web/public (dist/src/web/public in the build): index.html, the scripts and the stylesheet. */
  readonly publicDirectory: string;
  /** docs/machines (dist/docs/machines in the build): the generated machine diagrams. */
  readonly machinesDirectory: string;
}

/** The page's directories, relative to this module (see above). */
export function webPaths(): WebPaths {
  return { publicDirectory: join(moduleDirectory, 'public'), machinesDirectory: join(moduleDirectory, '..', '..', 'docs', 'machines') };
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
