/**
 * Provider-wide faults set through the control endpoint, and the emulator's call counters.
 * One active fault per provider: a new one replaces the old. `remaining: null` lasts until reset.
 */
import { createHash, randomBytes } from 'node:crypto';

const emulatedProviders = ['claude', 'gpt', 'timelygpt'] as const;
export type EmulatedProvider = (typeof emulatedProviders)[number];

const faultNames = [
  'http500',
  'http503',
  'overloaded',
  'hang',
  'slow',
  'reset',
  'cut',
  'stall',
  'garbage',
  'fenced',
  'stringNumbers',
  'truncated',
  'invalidOutput',
  'wrongLanguage',
  'tokenExpired',
  'respond',
  'streamError',
  'malformedChunk',
  'slowFirstToken',
  'fullUsage',
] as const;
export type FaultName = (typeof faultNames)[number];

/** A fault as the control endpoint takes it. `respond` replays `status`/`body`/`headers` verbatim. */
export interface FaultSpec {
  readonly provider: EmulatedProvider;
  readonly fault: FaultName;
  readonly count?: number;
  /** `slow`: delay before the answer; `slowFirstToken`: delay between the stream's opening and its first token. */
  readonly ms?: number;
  /** Stream faults (`cut`, `stall`, `streamError`, `malformedChunk`): text chunks sent before the fault acts. */
  readonly after?: number;
  /** `streamError`: which of the provider's errors the in-band event carries (default `http500`). */
  readonly error?: StreamErrorKind;
  /** `respond`: the exact response to serve; `streamError`: the in-band error's exact body (instead of `error`'s). */
  readonly status?: number;
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** The errors a `streamError` can name, in the emulator's own words (each provider renders its real body). */
const streamErrorKinds = [
  'auth',
  'permission',
  'quota',
  'rateLimit',
  'http500',
  'http503',
  'overloaded',
  'badRequest',
  'notFound',
  'contextTooLong',
] as const;
export type StreamErrorKind = (typeof streamErrorKinds)[number];

export function isStreamErrorKind(value: unknown): value is StreamErrorKind {
  return typeof value === 'string' && (streamErrorKinds as readonly string[]).includes(value);
}

interface ActiveFault {
  readonly spec: FaultSpec;
  remaining: number | null;
}

export interface ProviderCounters {
  /** Generation calls (messages, chat completions, llm-completion), whatever their outcome. */
  calls: number;
  /** TimelyGPT token exchanges. */
  authCalls: number;
  /** Calls per salted key fingerprint (never the key). */
  byKey: Record<string, number>;
  /** Streamed answers whose client closed the connection before their end (e.g. past its answer ceiling). */
  streamsCut: number;
}

export type EmulatorStats = Record<EmulatedProvider, ProviderCounters>;

export function isEmulatedProvider(value: unknown): value is EmulatedProvider {
  return typeof value === 'string' && (emulatedProviders as readonly string[]).includes(value);
}

export function isFaultName(value: unknown): value is FaultName {
  return typeof value === 'string' && (faultNames as readonly string[]).includes(value);
}

function emptyCounters(): ProviderCounters {
  return { calls: 0, authCalls: 0, byKey: {}, streamsCut: 0 };
}

export class FaultBoard {
  readonly #faults = new Map<EmulatedProvider, ActiveFault>();
  readonly #salt = randomBytes(16);
  #stats: EmulatorStats = { claude: emptyCounters(), gpt: emptyCounters(), timelygpt: emptyCounters() };

  set(spec: FaultSpec): void {
    this.#faults.set(spec.provider, { spec, remaining: spec.count ?? null });
  }

  reset(): void {
    this.#faults.clear();
  }

  /** The provider's active fault, without using it up. */
  peek(provider: EmulatedProvider): FaultSpec | undefined {
    return this.#faults.get(provider)?.spec;
  }

  /** Uses up one call of the provider's active fault and returns it. */
  consume(provider: EmulatedProvider): FaultSpec | undefined {
    const active = this.#faults.get(provider);
    if (!active) return undefined;
    if (active.remaining !== null) {
      active.remaining -= 1;
      if (active.remaining <= 0) this.#faults.delete(provider);
    }
    return active.spec;
  }

  /** A short salted fingerprint: counters can tell keys apart without holding them. */
  fingerprint(key: string): string {
    return createHash('sha256').update(this.#salt).update(key).digest('hex').slice(0, 12);
  }

  countCall(provider: EmulatedProvider, key: string | undefined): void {
    const counters = this.#stats[provider];
    counters.calls += 1;
    const id = key ? this.fingerprint(key) : 'anonymous';
    counters.byKey[id] = (counters.byKey[id] ?? 0) + 1;
  }

  countStreamCut(provider: EmulatedProvider): void {
    this.#stats[provider].streamsCut += 1;
  }

  countAuth(): void {
    this.#stats.timelygpt.authCalls += 1;
  }

  stats(): EmulatorStats {
    return structuredClone(this.#stats);
  }

  resetStats(): void {
    this.#stats = { claude: emptyCounters(), gpt: emptyCounters(), timelygpt: emptyCounters() };
  }
}
