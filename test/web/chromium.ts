/**
 * Finds and starts a Chromium for the browser tests, in this order:
 * 1. `CHROMIUM_PATH`, when set. It is an explicit choice, so if it does not start that is an error (no
 *    silent fallback to another browser).
 * 2. Debian's `/usr/bin/chromium`, only if it actually starts (present but broken is passed over).
 * 3. The Chromium shipped inside the `@sparticuz/chromium` devDependency (a brotli-packed Linux x64
 *    headless shell). The package's own `executablePath()` unpacks it, once, in a child process whose
 *    TMPDIR is a fresh folder under `node_modules/.cache/`, then the folder is renamed into place (so
 *    concurrent test processes never see half a binary). The package's Amazon-Linux libraries (NSS, NSPR,
 *    expat: `al2023.tar.br`) are unpacked too and put first on the browser's `LD_LIBRARY_PATH`, as the
 *    package's `setupLambdaEnvironment` does, so it starts where Debian's `libnss3` is absent.
 * Nothing is downloaded, at install time or later. Playwright gives every launch a fresh temporary
 * user-data-dir and removes it on close.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import type { Browser } from 'playwright-core';
import { findProjectRoot } from '../../src/web/assets.js';

const execFileAsync = promisify(execFile);

/** The flags every browser test launches Chromium with. */
const chromiumArgs: readonly string[] = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Debian's Chromium (package `chromium`). */
const debianChromiumPath = '/usr/bin/chromium';

/** Where a started browser came from. */
type ChromiumSource = 'CHROMIUM_PATH' | 'debian' | '@sparticuz/chromium';

/** A browser executable to try, with the environment it needs. */
export interface ChromiumCandidate {
  readonly source: ChromiumSource;
  readonly executablePath: string;
  readonly env?: Readonly<Record<string, string>>;
}

/** A started browser, where it came from, and why earlier candidates were passed over. */
export interface StartedChromium {
  readonly browser: Browser;
  readonly source: ChromiumSource;
  readonly executablePath: string;
  readonly passedOver: readonly string[];
}

/** What {@link startChromium} looks at; the defaults are the real places. */
export interface StartChromiumOptions {
  /** Where `CHROMIUM_PATH` is read (default `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
  /** Debian's Chromium (default {@link debianChromiumPath}). */
  readonly debianPath?: string;
  /** The last resort (default {@link shippedChromium}). */
  readonly shipped?: () => Promise<ChromiumCandidate>;
}

/** Launches `candidate` through playwright-core with {@link chromiumArgs}. */
function launchCandidate(candidate: ChromiumCandidate): Promise<Browser> {
  return chromium.launch({
    executablePath: candidate.executablePath,
    args: [...chromiumArgs],
    ...(candidate.env === undefined ? {} : { env: { ...candidate.env } }),
    timeout: 60_000,
  });
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}

/** Starts the first Chromium that works, in the order described at the top of this file. */
export async function startChromium(options: StartChromiumOptions = {}): Promise<StartedChromium> {
  const explicit = (options.env ?? process.env).CHROMIUM_PATH;
  if (explicit !== undefined && explicit !== '') {
    try {
      const browser = await launchCandidate({ source: 'CHROMIUM_PATH', executablePath: explicit });
      return { browser, source: 'CHROMIUM_PATH', executablePath: explicit, passedOver: [] };
    } catch (error) {
      throw new Error(`CHROMIUM_PATH=${explicit} did not start: ${firstLine(error)}`, { cause: error });
    }
  }
  const passedOver: string[] = [];
  const debianPath = options.debianPath ?? debianChromiumPath;
  if (existsSync(debianPath)) {
    try {
      const browser = await launchCandidate({ source: 'debian', executablePath: debianPath });
      return { browser, source: 'debian', executablePath: debianPath, passedOver };
    } catch (error) {
      passedOver.push(`${debianPath} did not start: ${firstLine(error)}`);
    }
  } else {
    passedOver.push(`${debianPath} is absent`);
  }
  const shipped = await (options.shipped ?? shippedChromium)();
  try {
    return { browser: await launchCandidate(shipped), source: shipped.source, executablePath: shipped.executablePath, passedOver };
  } catch (error) {
    throw new Error(`No Chromium started (${passedOver.join('; ')}; ${shipped.executablePath} from ${shipped.source}: ${firstLine(error)})`, {
      cause: error,
    });
  }
}

/** The installed `@sparticuz/chromium` package: its folder and version. */
async function shippedPackage(): Promise<{ directory: string; version: string }> {
  // The package exports only its entry point, whose depth inside the package changes between releases
  // (build/index.js, build/cjs/index.cjs): its folder is the nearest one above it holding its manifest.
  let directory = dirname(createRequire(import.meta.url).resolve('@sparticuz/chromium'));
  while (!existsSync(join(directory, 'package.json')) && dirname(directory) !== directory) directory = dirname(directory);
  const manifest: unknown = JSON.parse(await readFile(join(directory, 'package.json'), 'utf8'));
  const version = typeof manifest === 'object' && manifest !== null && 'version' in manifest ? String(manifest.version) : 'unknown';
  return { directory, version };
}

/**
 * The Chromium inside `@sparticuz/chromium`, unpacked under `node_modules/.cache/study-helper-chromium/<version>`
 * on first use (about 200 MB, a few seconds), with the environment it needs to start.
 */
export async function shippedChromium(): Promise<ChromiumCandidate> {
  const root = findProjectRoot();
  const { version } = await shippedPackage();
  const cache = join(root, 'node_modules', '.cache', 'study-helper-chromium');
  const unpacked = join(cache, version);
  if (!existsSync(join(unpacked, 'chromium'))) await unpack(root, cache, unpacked);
  const inherited = process.env.LD_LIBRARY_PATH;
  const libraries = join(unpacked, 'al2023', 'lib');
  return {
    source: '@sparticuz/chromium',
    executablePath: join(unpacked, 'chromium'),
    env: {
      ...definedOnly(process.env),
      LD_LIBRARY_PATH: inherited === undefined || inherited === '' ? libraries : `${libraries}:${inherited}`,
      FONTCONFIG_FILE: join(unpacked, 'fonts.conf'),
    },
  };
}

function definedOnly(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

/** The package's `executablePath()` unpacks into `tmpdir()`; AWS_EXECUTION_ENV makes it unpack the al2023 libraries too. */
const unpackScript = `const { default: chromium } = await import('@sparticuz/chromium'); process.stdout.write(await chromium.executablePath());`;

async function unpack(root: string, cache: string, unpacked: string): Promise<void> {
  await mkdir(cache, { recursive: true });
  const staging = await mkdtemp(join(cache, 'unpacking-'));
  try {
    await execFileAsync(process.execPath, ['--input-type=module', '-e', unpackScript], {
      cwd: root,
      env: { ...process.env, TMPDIR: staging, AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs20.x' },
      timeout: 120_000,
    });
    for (const part of ['chromium', join('al2023', 'lib', 'libnss3.so'), join('fonts', 'fonts', 'Open_Sans')]) {
      if (!existsSync(join(staging, part))) throw new Error(`@sparticuz/chromium did not unpack ${part}`);
    }
    // The package's own fonts.conf names /tmp/fonts; this one names the fonts it unpacked here.
    await writeFile(
      join(staging, 'fonts.conf'),
      `<?xml version="1.0"?>\n<fontconfig>\n  <dir>${join(unpacked, 'fonts')}</dir>\n  <cachedir>${join(unpacked, 'fonts-cache')}</cachedir>\n</fontconfig>\n`,
    );
    await rename(staging, unpacked);
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    // Another test process unpacked it first: use theirs.
    if (existsSync(join(unpacked, 'chromium'))) return;
    throw error;
  }
}
