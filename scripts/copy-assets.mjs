/**
 * The second half of `npm run build`: the files the service reads at run time beside its modules, copied into
 * dist/ so the build runs alone (the packed package, the container): the web page (src/web/public →
 * dist/src/web/public) and the generated machine diagrams with their README (docs/machines →
 * dist/docs/machines). src/web/assets.ts finds both relative to itself, under src/ and dist/ alike.
 */
import { cpSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** What is copied: every file of the page; of docs/machines what the service reads (the diagrams, the README's titles). */
const copies = [
  { from: 'src/web/public', to: 'dist/src/web/public', keep: () => true },
  { from: 'docs/machines', to: 'dist/docs/machines', keep: (name) => name.endsWith('.mmd') || name === 'README.md' },
];

for (const { from, to, keep } of copies) {
  // Emptied first: a file deleted from the sources is not served from a stale copy.
  rmSync(join(root, to), { recursive: true, force: true });
  cpSync(join(root, from), join(root, to), {
    recursive: true,
    filter: (source) => source === join(root, from) || keep(basename(source)),
  });
}
