/**
 * Browser discovery for the web tests: CHROMIUM_PATH, then Debian's Chromium only if it starts,
 * then the Chromium shipped in @sparticuz/chromium. The "browsers" here are shell scripts: one exits 127
 * (present but broken), the others note their arguments and then run the shipped Chromium, so every
 * order is checked on any machine, with or without Debian's chromium.
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shippedChromium, startChromium } from './chromium.js';
import type { ChromiumCandidate, StartedChromium } from './chromium.js';

describe('startChromium', () => {
  let dir: string;
  let shipped: ChromiumCandidate;
  let shippedCalls = 0;
  const countedShipped = (): Promise<ChromiumCandidate> => {
    shippedCalls += 1;
    return Promise.resolve(shipped);
  };
  const started: StartedChromium[] = [];

  /** A script standing in for a browser: writes its arguments to `<name>.args`, then runs the shipped Chromium. */
  async function workingBrowser(name: string): Promise<string> {
    const path = join(dir, name);
    const env = shipped.env ?? {};
    await writeFile(
      path,
      [
        '#!/bin/sh',
        `printf '%s\\n' "$@" > '${path}.args'`,
        `export LD_LIBRARY_PATH='${env.LD_LIBRARY_PATH ?? ''}'`,
        `export FONTCONFIG_FILE='${env.FONTCONFIG_FILE ?? ''}'`,
        `exec '${shipped.executablePath}' "$@"`,
        '',
      ].join('\n'),
    );
    await chmod(path, 0o755);
    return path;
  }

  async function brokenBrowser(name: string): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, '#!/bin/sh\nexit 127\n');
    await chmod(path, 0o755);
    return path;
  }

  async function start(...args: Parameters<typeof startChromium>): Promise<StartedChromium> {
    const result = await startChromium(...args);
    started.push(result);
    return result;
  }

  async function renders(result: StartedChromium): Promise<string | null> {
    const page = await result.browser.newPage();
    await page.setContent('<p id="x">rendered</p>');
    return page.textContent('#x');
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'study-helper-chromium-'));
    shipped = await shippedChromium();
  }, 120_000);

  afterAll(async () => {
    for (const result of started) await result.browser.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('the shipped Chromium brings its own NSS, NSPR and expat first on LD_LIBRARY_PATH', () => {
    expect(shipped.source).toBe('@sparticuz/chromium');
    const first = (shipped.env?.LD_LIBRARY_PATH ?? '').split(':')[0] ?? '';
    // The chromium binary's NEEDED libraries outside glibc, and the NSS modules it loads at run time.
    for (const library of ['libnss3.so', 'libnssutil3.so', 'libnspr4.so', 'libplc4.so', 'libplds4.so', 'libexpat.so.1', 'libsoftokn3.so', 'libfreeblpriv3.so']) {
      expect(existsSync(join(first, library)), library).toBe(true);
    }
  });

  it('CHROMIUM_PATH comes first, even when Debian\'s works, with the test flags and a fresh user-data-dir', async () => {
    const explicit = await workingBrowser('explicit');
    const debian = await workingBrowser('debian');
    const calls = shippedCalls;
    const result = await start({ env: { CHROMIUM_PATH: explicit }, debianPath: debian, shipped: countedShipped });
    expect(result).toMatchObject({ source: 'CHROMIUM_PATH', executablePath: explicit, passedOver: [] });
    expect(await renders(result)).toBe('rendered');
    expect(existsSync(`${debian}.args`)).toBe(false);
    expect(shippedCalls).toBe(calls);
    const args = (await readFile(`${explicit}.args`, 'utf8')).split('\n');
    for (const flag of ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync']) {
      expect(args).toContain(flag);
    }
    expect(args).toContainEqual(expect.stringMatching(/^--user-data-dir=.*playwright/));
  }, 60_000);

  it('a CHROMIUM_PATH that does not start is an error, not a silent fallback', async () => {
    const explicit = await brokenBrowser('explicit-broken');
    const calls = shippedCalls;
    await expect(startChromium({ env: { CHROMIUM_PATH: explicit }, debianPath: join(dir, 'absent'), shipped: countedShipped })).rejects.toThrow(
      `CHROMIUM_PATH=${explicit} did not start`,
    );
    expect(shippedCalls).toBe(calls);
  }, 60_000);

  it('without CHROMIUM_PATH, Debian\'s Chromium when it starts', async () => {
    const debian = await workingBrowser('debian-working');
    const calls = shippedCalls;
    const result = await start({ env: {}, debianPath: debian, shipped: countedShipped });
    expect(result).toMatchObject({ source: 'debian', executablePath: debian, passedOver: [] });
    expect(await renders(result)).toBe('rendered');
    expect(shippedCalls).toBe(calls);
  }, 60_000);

  it('Debian\'s Chromium present but broken: the shipped one starts', async () => {
    const debian = await brokenBrowser('debian-broken');
    const result = await start({ env: {}, debianPath: debian });
    expect(result.source).toBe('@sparticuz/chromium');
    expect(result.passedOver).toEqual([expect.stringContaining(`${debian} did not start`)]);
    expect(await renders(result)).toBe('rendered');
  }, 60_000);

  it('Debian\'s Chromium absent: the shipped one starts', async () => {
    const absent = join(dir, 'no-such-chromium');
    const result = await start({ env: { CHROMIUM_PATH: '' }, debianPath: absent });
    expect(result).toMatchObject({ source: '@sparticuz/chromium', passedOver: [`${absent} is absent`] });
    expect(await renders(result)).toBe('rendered');
  }, 60_000);

  it('nothing starts: one error naming every candidate', async () => {
    const debian = await brokenBrowser('debian-broken-2');
    const last = await brokenBrowser('shipped-broken');
    const error = await startChromium({
      env: {},
      debianPath: debian,
      shipped: () => Promise.resolve({ source: '@sparticuz/chromium', executablePath: last }),
    }).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(new RegExp(`^No Chromium started \\(${debian} did not start: .*; ${last} from @sparticuz/chromium: `));
  }, 60_000);
});
