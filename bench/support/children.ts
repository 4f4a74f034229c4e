/**
 * The parent side: each bench part (emulator, load generator, service, baselines) runs in its own Node
 * process so the measurement crosses real process boundaries and the load generator never shares an
 * event loop with what it measures.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Usage } from './child-ipc.js';
import { childEntry } from './compile.js';

export const supportDirectory = dirname(fileURLToPath(import.meta.url));

export interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  /** The `ready` message's fields. */
  readonly info: Record<string, unknown>;
  request<T>(type: string, fields?: Record<string, unknown>): Promise<T>;
  usage(resetPeak?: boolean): Promise<Usage>;
  stop(): Promise<void>;
}

export interface ChildOptions {
  /** File name under bench/support. */
  readonly entry: string;
  readonly env?: Record<string, string>;
  readonly execArgv?: readonly string[];
  readonly startTimeoutMs?: number;
}

export async function startChild(name: string, options: ChildOptions): Promise<Child> {
  const entry = childEntry(options.entry);
  const child = fork(entry.file, [], {
    execArgv: [...entry.execArgv, ...(options.execArgv ?? [])],
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let nextId = 1;
  const info = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start in time`)), options.startTimeoutMs ?? 30_000);
    child.once('exit', (code) => reject(new Error(`${name} exited (${String(code)}) before it was ready`)));
    child.on('message', (raw: unknown) => {
      const message = raw as Record<string, unknown>;
      if (message['type'] === 'ready') {
        clearTimeout(timer);
        resolve(message);
        return;
      }
      const pending = waiting.get(Number(message['id']));
      if (pending === undefined) return;
      waiting.delete(Number(message['id']));
      if (typeof message['error'] === 'string') pending.reject(new Error(`${name}: ${message['error']}`));
      else pending.resolve(message['value']);
    });
  });
  child.on('exit', () => {
    for (const pending of waiting.values()) pending.reject(new Error(`${name} exited`));
    waiting.clear();
  });
  const request = <T>(type: string, fields: Record<string, unknown> = {}): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve: (value) => resolve(value as T), reject });
      child.send({ ...fields, id, type });
    });
  return {
    name,
    process: child,
    info,
    request,
    usage: (resetPeak = false) => request<Usage>('usage', { resetPeak }),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.send({ id: 0, type: 'exit' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
