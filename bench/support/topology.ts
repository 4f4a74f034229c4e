/**
 * The processes the HTTP benches share: the emulator, the load generator, the service and the
 * baselines, each a child of the bench; plus the request each variant is loaded with.
 */
import type { Child } from './children.js';
import { startChild } from './children.js';
import type { LoadRequest, LoadResult } from './load.child.js';

/** A short English text: one notes call, no splitting. */
export const benchText =
  'Photosynthesis converts light energy into chemical energy stored in glucose. Chlorophyll absorbs mostly blue and red light. ' +
  'The light reactions take place in the thylakoid membranes; the Calvin cycle fixes carbon dioxide in the stroma.';

export const gptKey = 'bench-fake-gpt-key-0001';
export const claudeKey = 'bench-fake-claude-key-0001';

export async function startEmulatorChild(): Promise<Child & { readonly url: string }> {
  const child = await startChild('emulator', { entry: 'emulator.child.ts' });
  return Object.assign(child, { url: String(child.info['url']) });
}

export function serviceEnv(emulator: Child, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    ANTHROPIC_BASE_URL: String(emulator.info['anthropicBaseUrl']),
    OPENAI_BASE_URL: String(emulator.info['openaiBaseUrl']),
    TIMELYGPT_BASE_URL: String(emulator.info['timelygptBaseUrl']),
    CLAUDE_MODEL: 'claude-bench',
    GPT_MODEL: 'gpt-bench',
    TIMELYGPT_MODEL: 'timely-bench',
    ...extra,
  };
}

/**
 * The Node flags the service ships with (package.json's start script, the Dockerfile's CMD): the benches
 * measure the service as it runs in production. test/packaging/node-flags.test.ts holds the places together.
 */
export const serviceNodeFlags: readonly string[] = ['--max-semi-space-size=16'];
/** BENCH_SERVICE_FLAGS: more Node flags for the service's process, space-separated (`--trace-gc` to read its collections). */
const extraServiceFlags = (process.env.BENCH_SERVICE_FLAGS ?? '').split(' ').filter((flag) => flag !== '');

export async function startServiceChild(
  emulator: Child,
  extra: Record<string, string> = {},
  execArgv: readonly string[] = [],
): Promise<Child & { readonly url: string }> {
  const child = await startChild('service', {
    entry: 'service.child.ts',
    env: serviceEnv(emulator, extra),
    execArgv: ['--expose-gc', ...serviceNodeFlags, ...extraServiceFlags, ...execArgv],
  });
  return Object.assign(child, { url: String(child.info['url']) });
}

export async function startLoadChild(): Promise<Child & { run(load: LoadRequest): Promise<LoadResult> }> {
  const child = await startChild('load', { entry: 'load.child.ts' });
  return Object.assign(child, { run: (load: LoadRequest) => child.request<LoadResult>('run', { load }) });
}

/** POST once and return status and JSON body (sanity checks before measuring). */
export async function postJson(url: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON: keep the text for the error message.
  }
  return { status: response.status, body: parsed };
}
