/**
 * The service runs from its build alone, as the container runs it (Dockerfile): the package `npm pack` makes
 * from dist/ (built by `npm install` / `npm run build`), unpacked into an empty folder outside the project,
 * its production dependencies installed from the lockfile with `npm ci --omit=dev --ignore-scripts` (no
 * TypeScript, no tsx), started there with its working directory elsewhere. The page and the machine
 * drawings it serves must be the installed copies: the test marks the installed index.html and removes an
 * installed diagram, and the answers must show both.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const built = existsSync(join(root, 'dist', 'src', 'demo.js')) && existsSync(join(root, 'dist', 'src', 'web', 'public', 'index.html'));
const scratch = mkdtempSync(join(tmpdir(), 'study-helper-packed-'));
/** Where the package is unpacked and installed. */
const installed = join(scratch, 'app');
/** The service's working directory: empty, so a path read relative to it finds nothing. */
const elsewhere = join(scratch, 'elsewhere');
const marker = `<!-- installed copy ${process.pid} -->`;

/** Runs npm (as the npm scripts find it: the project's own Node first on PATH) and returns its stdout. */
function npm(args: readonly string[], cwd: string): string {
  const started = Date.now();
  // Without the settings `npm test` hands its scripts (npm_config_local_prefix names the project): the install
  // must know only the folder it runs in.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(npm_|init_cwd$)/iu.test(name)));
  const result = spawnSync('npm', args, { cwd, encoding: 'utf8', env: { ...env, npm_config_update_notifier: 'false' } });
  if (result.status !== 0) throw new Error(`npm ${args.join(' ')} failed (${result.status}): ${result.stderr}`);
  if (process.env.PACKED_TEST_TIMES !== undefined) console.log(`npm ${args[0]}: ${Date.now() - started} ms`);
  return result.stdout;
}

let packedFiles: string[] = [];
let service: ReturnType<typeof spawn> | undefined;
let url = '';
let output = '';

beforeAll(async () => {
  if (!built) return;
  // `--ignore-scripts`: the dist/ that `npm install` built is what is packed (a build here would take minutes).
  const packed = JSON.parse(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], root)) as {
    filename: string;
    files: { path: string }[];
  }[];
  packedFiles = packed[0]?.files.map((file) => file.path) ?? [];
  const tarball = join(scratch, packed[0]?.filename ?? '');
  mkdirSync(installed);
  mkdirSync(elsewhere);
  const untar = spawnSync('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
  expect(untar.status).toBe(0);
  // npm never packs the lockfile: the container copies it beside the package, and so does this test.
  writeFileSync(join(installed, 'package-lock.json'), readFileSync(join(root, 'package-lock.json')));
  npm(['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'], installed);

  writeFileSync(join(installed, 'dist/src/web/public/index.html'), readFileSync(join(installed, 'dist/src/web/public/index.html'), 'utf8') + marker);
  rmSync(join(installed, 'dist/docs/machines/key-shelf.mmd'));

  service = spawn(process.execPath, [join(installed, 'dist/src/demo.js')], {
    cwd: elsewhere,
    env: { PATH: process.env.PATH, PORT: '0', HOST: '127.0.0.1', JOBS_DIR: 'off', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const child = service;
  url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const printed = /API docs: +(http:\/\/[\d.:]+)\/docs/.exec(output)?.[1];
      if (printed !== undefined) resolve(printed);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`The installed service exited (${code}) before it listened: ${output}`)));
  });
}, 300_000);

afterAll(async () => {
  if (service !== undefined && service.exitCode === null) {
    const exited = new Promise((resolve) => service?.once('exit', resolve));
    service.kill('SIGTERM');
    await exited;
  }
  rmSync(scratch, { recursive: true, force: true });
});

describe.runIf(built)('the packed package, installed with --omit=dev and started outside the project', () => {
  it('ships the build, the page and the diagrams, and no sources', () => {
    expect(packedFiles).toContain('dist/src/main.js');
    expect(packedFiles).toContain('dist/src/demo.js');
    expect(packedFiles).toContain('dist/src/web/public/index.html');
    expect(packedFiles).toContain('dist/docs/machines/README.md');
    expect(packedFiles).toContain('dist/docs/machines/fallback.mmd');
    expect(packedFiles.filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts'))).toEqual([]);
    expect(packedFiles.filter((path) => path.startsWith('src/') || path.startsWith('test/'))).toEqual([]);
    // No development tool came with the production install.
    expect(existsSync(join(installed, 'node_modules', 'typescript'))).toBe(false);
    expect(existsSync(join(installed, 'node_modules', 'tsx'))).toBe(false);
  });

  it('answers /healthz', async () => {
    const response = await fetch(`${url}/healthz`);
    expect(response.status).toBe(200);
    expect(((await response.json()) as { status: string }).status).toBe('ok');
  });

  it('serves the page from the installed copy', async () => {
    const response = await fetch(`${url}/`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/html');
    expect(await response.text()).toContain(marker);
    const script = await fetch(`${url}/web/app.js`);
    expect(script.status).toBe(200);
    expect(await script.text()).toBe(readFileSync(join(installed, 'dist/src/web/public/app.js'), 'utf8'));
  });

  it('draws the installed machine diagrams', { timeout: 60_000 }, async () => {
    const response = await fetch(`${url}/web/machines.json`);
    expect(response.status).toBe(200);
    const names = ((await response.json()) as { machines: { name: string }[] }).machines.map((machine) => machine.name).sort();
    const installedDiagrams = readdirSync(join(installed, 'dist/docs/machines'))
      .filter((file) => file.endsWith('.mmd'))
      .map((file) => file.slice(0, -'.mmd'.length))
      .sort();
    expect(names).toEqual(installedDiagrams);
    // The project's own docs/machines still has the removed one: it was not read.
    expect(existsSync(join(root, 'docs/machines/key-shelf.mmd'))).toBe(true);
    expect(names).not.toContain('key-shelf');
  });
});
