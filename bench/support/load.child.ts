/**
 * The load generator in its own process: autocannon, driven over IPC. Latencies come from autocannon's
 * per-response event (hrtime, sub-millisecond), so percentiles here are exact rather than autocannon's
 * whole-millisecond histogram.
 */
import autocannon from 'autocannon';
import { serveParent } from './child-ipc.js';
import { percentile } from './stats.js';

export interface LoadRequest {
  readonly url: string;
  readonly headers?: Record<string, string>;
  /**
   * Headers added to each request in turn (request i gets set i mod n): n clients, each with its own
   * keys, sharing the connections.
   */
  readonly rotateHeaders?: readonly Record<string, string>[];
  readonly body?: string;
  readonly connections: number;
  /** Seconds; ignored when `amount` is set. */
  readonly duration?: number;
  readonly amount?: number;
  readonly timeoutSeconds?: number;
  /** Return every response as [end ms since start, latency ms, status]. */
  readonly timeline?: boolean;
}

export interface LoadResult {
  readonly requests: number;
  readonly ok: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly elapsedMs: number;
  /**
   * Answers a second from the start to the last answer: autocannon ends a run of `amount` requests on its
   * next whole-second tick, so its own elapsed time would round a short run's rate down.
   */
  readonly requestsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly timeline?: readonly (readonly [number, number, number])[];
}

function run(request: LoadRequest): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const latencies: number[] = [];
    const timeline: [number, number, number][] = [];
    let ok = 0;
    let sent = 0;
    let lastAnswerMs = 0;
    const rotation = request.rotateHeaders ?? [];
    const started = performance.now();
    const instance = autocannon(
      {
        url: request.url,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...request.headers },
        ...(request.body === undefined ? {} : { body: request.body }),
        ...(rotation.length === 0
          ? {}
          : {
              requests: [
                {
                  setupRequest: (outgoing: { headers?: Record<string, string> }) => {
                    const turn = rotation[sent % rotation.length];
                    sent += 1;
                    return { ...outgoing, headers: { ...outgoing.headers, ...turn } };
                  },
                },
              ],
            }),
        connections: request.connections,
        ...(request.amount === undefined ? { duration: request.duration ?? 2 } : { amount: request.amount }),
        timeout: request.timeoutSeconds ?? 10,
      },
      (error, result) => {
        if (error) {
          reject(error);
          return;
        }
        const elapsedMs = performance.now() - started;
        const sorted = Float64Array.from(latencies).sort();
        resolve({
          requests: latencies.length,
          ok,
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          elapsedMs,
          requestsPerSecond: (latencies.length * 1000) / (lastAnswerMs > 0 ? lastAnswerMs : elapsedMs),
          p50: percentile(sorted, 0.5),
          p99: percentile(sorted, 0.99),
          ...(request.timeline === true ? { timeline } : {}),
        });
      },
    );
    instance.on('response', (_client: unknown, status: number, _bytes: number, latency: number) => {
      latencies.push(latency);
      lastAnswerMs = performance.now() - started;
      if (status >= 200 && status < 300) ok += 1;
      if (request.timeline === true) timeline.push([performance.now() - started, latency, status]);
    });
  });
}

serveParent({}, { run: async (message) => run(message['load'] as LoadRequest) });
