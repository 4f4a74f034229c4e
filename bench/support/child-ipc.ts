/**
 * The child side of a bench process: announces itself with a `ready` message over IPC and answers the
 * parent's requests (`usage`, `gc`, plus any handlers the child adds). Every child reports its own CPU
 * time and memory, so a figure belongs to the process that spent it, not to the load generator.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { constants, monitorEventLoopDelay, PerformanceObserver, type ELDHistogram } from 'node:perf_hooks';

export interface Usage {
  /** process.cpuUsage(): user + system µs since the process started. */
  readonly cpuMicros: number;
  readonly rss: number;
  readonly heapUsed: number;
  /** Highest RSS sampled (every 100 ms) since the last `usage` request with `resetPeak`. */
  readonly peakRss: number;
  /** The garbage collector's pauses of the main thread since the process started, µs (perf_hooks `gc` entries). */
  readonly gcMicros: number;
  /** Young-generation collections (scavenges) since the process started. */
  readonly minorGcs: number;
  /** Full (mark-compact) collections since the process started. */
  readonly majorGcs: number;
}

type Handler = (message: Record<string, unknown>) => Promise<unknown>;

/** This process's event-loop delay, measured from the first `loopDelay` request on (none before it: no cost). */
let loopDelay: ELDHistogram | undefined;
let profiler: Session | undefined;
let peakRss = process.memoryUsage.rss();
const sampler = setInterval(() => {
  const rss = process.memoryUsage.rss();
  if (rss > peakRss) peakRss = rss;
}, 100);
sampler.unref();

let gcMicros = 0;
let minorGcs = 0;
let majorGcs = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gcMicros += entry.duration * 1000;
    const kind = (entry as PerformanceEntry & { readonly detail?: { readonly kind?: number } }).detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MINOR) minorGcs += 1;
    else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) majorGcs += 1;
  }
}).observe({ entryTypes: ['gc'] });

function usage(resetPeak: boolean): Usage {
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  const result = {
    cpuMicros: cpu.user + cpu.system,
    rss: memory.rss,
    heapUsed: memory.heapUsed,
    peakRss: Math.max(peakRss, memory.rss),
    gcMicros,
    minorGcs,
    majorGcs,
  };
  if (resetPeak) peakRss = memory.rss;
  return result;
}

/** Starts answering the parent; `ready` is sent at once. */
export function serveParent(ready: Record<string, unknown>, handlers: Record<string, Handler> = {}): void {
  const send = process.send?.bind(process);
  if (send === undefined) throw new Error('bench child started without an IPC channel (use startChild)');
  const builtIn: Record<string, Handler> = {
    usage: async (message) => usage(message['resetPeak'] === true),
    /** The event loop's delay since the last reset, p99 and max, in ms; `reset` starts a new window. */
    loopDelay: async (message) => {
      if (loopDelay === undefined) {
        loopDelay = monitorEventLoopDelay({ resolution: 5 });
        loopDelay.enable();
      }
      const value = { p99Ms: loopDelay.percentile(99) / 1e6, maxMs: loopDelay.max / 1e6 };
      if (message['reset'] === true) loopDelay.reset();
      return value;
    },
    gc: async () => {
      const collect = (globalThis as { gc?: () => void }).gc;
      if (collect === undefined) throw new Error('start the child with --expose-gc');
      collect();
      collect();
      return usage(true);
    },
    /** CPU profile of this process between `profileStart` and `profileStop` (written to `file`). */
    profileStart: async () => {
      profiler ??= new Session();
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.start');
      return {};
    },
    profileStop: async (message) => {
      if (profiler === undefined) throw new Error('profileStart first');
      const { profile } = await profiler.post('Profiler.stop');
      writeFileSync(String(message['file']), JSON.stringify(profile));
      profiler.disconnect();
      profiler = undefined;
      return {};
    },
    exit: async () => {
      setImmediate(() => process.exit(0));
      return {};
    },
  };
  process.on('message', (raw: unknown) => {
    const message = raw as Record<string, unknown>;
    const id = message['id'];
    const type = String(message['type']);
    const handler = handlers[type] ?? builtIn[type];
    if (handler === undefined) {
      send({ id, error: `unknown request ${type}` });
      return;
    }
    handler(message).then(
      (value) => send({ id, value }),
      (error: unknown) => send({ id, error: error instanceof Error ? error.message : String(error) }),
    );
  });
  // The parent going away ends the child (no orphans holding ports).
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', ...ready });
}
