/**
 * How to start a worker thread whose entry is a module of this project, compiled or not: the `.js` file
 * next to the calling module once compiled to dist; under tsx/vitest (the caller is a `.ts` file) the
 * `.ts` file, loaded through tsx's `tsImport`, because a worker thread cannot be relied on to run a
 * `--import` loader before its entry. Shared by the PDF extract workers and the token-count worker.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';

/** A file to start, or (from TypeScript source) a bootstrap to evaluate. */
export type WorkerEntry = { kind: 'file'; url: URL } | { kind: 'eval'; url: URL; code: string };

/** The entry `baseName` (no extension) next to the module at `moduleUrl`. */
export function workerEntry(baseName: string, moduleUrl: string): WorkerEntry {
  if (!new URL(moduleUrl).pathname.endsWith('.ts')) {
    return { kind: 'file', url: new URL(`./${baseName}.js`, moduleUrl) };
  }
  const url = new URL(`./${baseName}.ts`, moduleUrl);
  const tsxApi = tsxEsmApiUrl(moduleUrl);
  const code = `import(${JSON.stringify(tsxApi)}).then((api) => api.tsImport(${JSON.stringify(url.href)}, ${JSON.stringify(moduleUrl)}));`;
  return { kind: 'eval', url, code };
}

/** Starts a worker from `entry`. */
export function startWorker(entry: WorkerEntry, options: { resourceLimits?: ResourceLimits; workerData?: unknown } = {}): Worker {
  return entry.kind === 'file' ? new Worker(entry.url, options) : new Worker(entry.code, { ...options, eval: true });
}

/** The ESM build of `tsx/esm/api` (its CJS build cannot register hooks from an eval'd worker). */
function tsxEsmApiUrl(moduleUrl: string): string {
  const manifestPath = createRequire(moduleUrl).resolve('tsx/package.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
    exports: Record<string, { import: { default: string } }>;
  };
  const target = manifest.exports['./esm/api']?.import.default;
  if (target === undefined) throw new Error('tsx has no ./esm/api export: cannot run a worker from TypeScript source.');
  return new URL(target, pathToFileURL(manifestPath)).href;
}
