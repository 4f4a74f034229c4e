/**
 * The service runs with the same Node flags however it is started: `npm start`, `npm run demo`, the
 * container's CMD and the benches' service process. The flag bounds V8's young generation to two 16 MiB
 * semi-spaces (docs/operations.md "Memory"): Node 24 otherwise grows it to two 64 MiB halves under load and
 * keeps the pages, and a start that forgot the flag would serve every request alike, only with ~100 MiB more
 * resident memory, which no functional test notices.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { serviceNodeFlags } from '../../bench/support/topology.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
/** What every start must pass, written out here rather than read from any of the places it checks. */
const expected = ['--max-semi-space-size=16'];

const scripts = (JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts;

/** The runtime stage's CMD: the last `CMD [...]` line of the Dockerfile that is not the HEALTHCHECK's. */
function containerCommand(): string[] {
  const lines = readFileSync(`${root}Dockerfile`, 'utf8').split('\n');
  const commands = lines.filter((line) => line.startsWith('CMD ['));
  const last = commands.at(-1);
  if (last === undefined) throw new Error('the Dockerfile has no CMD');
  return JSON.parse(last.slice('CMD '.length)) as string[];
}

describe('the Node flags the service runs with', () => {
  it('npm start and npm run demo pass them before the entry point', () => {
    expect(scripts['start']?.split(' ')).toEqual(['node', ...expected, 'dist/src/main.js']);
    expect(scripts['demo']?.split(' ')).toEqual(['node', ...expected, 'dist/src/demo.js']);
  });

  it("the container's CMD passes them", () => {
    expect(containerCommand()).toEqual(['node', ...expected, 'dist/src/main.js']);
  });

  it("the benches' service process runs with them", () => {
    expect(serviceNodeFlags).toEqual(expected);
  });
});
