/**
 * Test support for the HTTP layer: a small in-memory Gateway (for the routes that only read or control
 * breakers, so the app can be tested apart from the actor system) and a log capture.
 */
import { Writable } from 'node:stream';
import type {
  BreakerAction,
  BreakerTransition,
  CallRecord,
  Gateway,
  GenerateInput,
  GenerateOutcome,
  ProviderStatus,
} from '../../src/actors/types.js';
import { loadConfig } from '../../src/config.js';
import type { Config } from '../../src/config.js';
import type { StoredDocument } from '../../src/documents/index.js';
import { providerIds } from '../../src/providers/index.js';
import type { ProviderId } from '../../src/providers/index.js';

export function testConfig(env: NodeJS.ProcessEnv = {}): Config {
  // WORKER_NICE 0: on the shared, oversubscribed test machine a nice-19 worker waits behind every other
  // process (seconds for a job's token count); scheduling is measured by bench/priority.bench.ts and
  // test/isolation/worker-priority.test.ts, not by the behaviour tests.
  return loadConfig({ LOG_LEVEL: 'silent', RETRY_BACKOFF_MS: '5,10', PROVIDER_TIMEOUT_MS: '2000', WORKER_NICE: '0', ...env });
}

export interface StaticGateway extends Gateway {
  readonly controlled: { id: ProviderId; action: BreakerAction }[];
  emitTransition(transition: BreakerTransition): void;
  emitCall(record: CallRecord): void;
  emitFallback(from: ProviderId, to: ProviderId): void;
  listenerCount(): number;
  stopped: boolean;
  /** Makes generate() wait for this promise first (to hold a request in flight). */
  hold: Promise<void> | undefined;
  /** Every generate() input, in order. */
  readonly generateCalls: GenerateInput<unknown>[];
}

/** A gateway whose providers are all closed; generate() fails as PROVIDERS_UNAVAILABLE (never used here). */
export function staticGateway(): StaticGateway {
  const states = new Map<ProviderId, ProviderStatus>(
    providerIds.map((id) => [
      id,
      {
        id,
        model: `${id}-model`,
        breaker: { state: 'closed', consecutiveFailures: 0, openedAt: null, retryAt: null, threshold: 5, recoveryMs: 60_000, minDistinctKeys: 2, distinctKeys: 0, forced: false },
        stats: { calls: 0, successes: 0, failures: 0, ignored: 0, rejected: 0, opens: 0 },
        keys: { quarantined: 0, cooling: 0 },
      },
    ]),
  );
  const transitionListeners = new Set<(t: BreakerTransition) => void>();
  const callListeners = new Set<(r: CallRecord) => void>();
  const fallbackListeners = new Set<(from: ProviderId, to: ProviderId) => void>();
  const gateway: StaticGateway = {
    controlled: [],
    stopped: false,
    hold: undefined,
    generateCalls: [],
    async generate<T>(input: GenerateInput<T>): Promise<GenerateOutcome<T>> {
      gateway.generateCalls.push(input as GenerateInput<unknown>);
      if (gateway.hold) await gateway.hold;
      return { status: 'failed', httpStatus: 503, code: 'PROVIDERS_UNAVAILABLE', message: 'static gateway', attempts: [] };
    },
    providers: () => [...states.values()],
    provider(id) {
      const status = states.get(id);
      if (status === undefined) throw new Error('unknown provider');
      return status;
    },
    keyHealth: (id) => ({ provider: id, state: 'healthy' }),
    controlBreaker(id, action) {
      gateway.controlled.push({ id, action });
      const status = gateway.provider(id);
      const next: ProviderStatus = {
        ...status,
        breaker: { ...status.breaker, state: action === 'forceOpen' ? 'open' : 'closed', forced: action === 'forceOpen' },
      };
      states.set(id, next);
      return next;
    },
    onBreakerTransition(listener) {
      transitionListeners.add(listener);
      return () => transitionListeners.delete(listener);
    },
    onCall(listener) {
      callListeners.add(listener);
      return () => callListeners.delete(listener);
    },
    onFallback(listener) {
      fallbackListeners.add(listener);
      return () => fallbackListeners.delete(listener);
    },
    onCost: () => () => {},
    async stop() {
      gateway.stopped = true;
    },
    emitTransition: (t) => transitionListeners.forEach((l) => l(t)),
    emitCall: (r) => callListeners.forEach((l) => l(r)),
    emitFallback: (from, to) => fallbackListeners.forEach((l) => l(from, to)),
    listenerCount: () => transitionListeners.size + callListeners.size + fallbackListeners.size,
  };
  return gateway;
}

/** A writable stream collecting pino's JSON lines. */
export function logCapture(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  let pending = '';
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      pending += chunk.toString();
      const parts = pending.split('\n');
      pending = parts.pop() ?? '';
      lines.push(...parts.filter((line) => line.length > 0));
      callback();
    },
  });
  return { stream, lines };
}

/** The limits a scenario may set beyond the environment: those derived in src/config.ts (`derivedLimits`). */
export interface LimitOverrides {
  readonly admission?: Partial<Config['admission']>;
  readonly server?: Partial<Config['server']>;
  readonly pdf?: Partial<Config['pdf']>;
  readonly jobs?: Partial<Config['jobs']>;
}

/** `config` with some derived limits set for a scenario (smaller queues, shares, buffers, deadlines). */
export function withLimits(config: Config, limits: LimitOverrides): Config {
  return {
    ...config,
    admission: { ...config.admission, ...limits.admission },
    server: { ...config.server, ...limits.server },
    pdf: { ...config.pdf, ...limits.pdf },
    jobs: { ...config.jobs, ...limits.jobs },
  };
}

/** Puts a one-page document (`doc-1`, a sentence on photosynthesis) into `store`, for the job routes; returns its id. */
export async function putTestDocument(store: { put(doc: StoredDocument): Promise<void> }, sha256 = 'e'.repeat(64)): Promise<string> {
  await store.put({
    documentId: 'doc-1',
    sha256,
    fileName: 'a.pdf',
    pageCount: 1,
    pagesUsed: 1,
    wordCount: 5,
    charCount: 40,
    warnings: [],
    text: 'Photosynthesis turns light into glucose.',
    createdAt: Date.now(),
  });
  return 'doc-1';
}
