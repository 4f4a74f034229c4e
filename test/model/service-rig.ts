/**
 * The system under test of the model-based tests: the real service (config → real SDK adapters → actor
 * system → Fastify on 127.0.0.1) over real HTTP to the provider emulator, built in-process by
 * test/http/blackbox-support.ts. What a model's event makes the service see (a request with a key, an
 * emulator fault, an operator's control) and what a model's state reads back (`GET /v1/providers`,
 * `GET /v1/keys/status`, the attempts of an answer or an error body) go through these helpers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anthropicWire } from '../../src/emulator/anthropic.js';
import type { FaultSpec } from '../../src/emulator/index.js';
import { openaiWire } from '../../src/emulator/openai.js';
import { timelygptWire } from '../../src/emulator/timelygpt.js';
import { providerIds, type ProviderId } from '../../src/providers/index.js';
import { redisTestUrl, uniquePrefix } from '../fleet/support.js';
import { adminToken, postJson, request, startHarness, studyText, type Harness, type HttpResult } from '../http/blackbox-support.js';

export type { Harness, HttpResult };

/**
 * The two ways every model suite runs the service: one instance alone, and one with REDIS_URL (the real
 * Redis of REDIS_TEST_URL, under a prefix of its own), where breakers, key health and job views are the
 * fleet's: the same walk must hold there too.
 */
export const serviceModes = ['alone', 'with Redis'] as const;
export type ServiceMode = (typeof serviceModes)[number];

/** The settings that put the service in `mode` (`name`: the suite, in its Redis prefix). */
export function modeEnv(mode: ServiceMode, name: string): NodeJS.ProcessEnv {
  return mode === 'alone' ? {} : { REDIS_URL: redisTestUrl, REDIS_PREFIX: uniquePrefix(name) };
}

/**
 * A walk of every provider at once (each on its own breaker and keys), on a service `start` makes for
 * each mode in turn and `stop` closes.
 */
export function walkEachProvider(
  title: string,
  steps: {
    readonly start: (mode: ServiceMode) => Promise<void>;
    readonly stop: () => Promise<void>;
    readonly walk: (provider: ProviderId) => Promise<void>;
  },
): void {
  for (const mode of serviceModes) {
    describe(`${title}, ${mode}`, () => {
      beforeAll(() => steps.start(mode));
      afterAll(() => steps.stop());
      describe.concurrent('each provider', () => {
        for (const provider of providerIds) {
          it(`${provider}: every path of the edge cover`, () => steps.walk(provider), 120_000);
        }
      });
    });
  }
}

/** The service with the settings of `env` (short timings), quiet logs, room for the held probes. */
export function startModelService(env: NodeJS.ProcessEnv): Promise<Harness> {
  return startHarness({
    LOG_LEVEL: 'silent',
    RETRY_MAX: '0',
    MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '64',
    REFUSAL_DELAY_MS: '0',
    // The walks read key status and generate many times a minute from one address: the per-address rates are off.
    RATE_LIMIT_KEY_STATUS: '0',
    RATE_LIMIT_GENERATIONS: '0',
    ...env,
  });
}

let keySequence = 0;

/** An obviously fake key no other step uses (`prefix` picks an emulator fault: docs/emulator.md). */
export function freshKey(provider: ProviderId, prefix = 'test-'): string {
  keySequence += 1;
  return `${prefix}${provider}-key-mbt-${process.pid}-${keySequence}`;
}

const keyHeader = (provider: ProviderId): string => `x-${provider}-key`;

/** `POST /v1/generate` of a small notes task to `providers` (in order), each with its key. */
export function generate(
  harness: Harness,
  chain: readonly { provider: ProviderId; key: string }[],
  signal?: AbortSignal,
): Promise<HttpResult> {
  const headers = Object.fromEntries(chain.map((link) => [keyHeader(link.provider), link.key]));
  return postJson(
    `${harness.url}/v1/generate`,
    {
      task: 'notes',
      text: studyText,
      providers: chain.map((link) => link.provider),
      options: { lang: 'en' },
    },
    headers,
    signal,
  );
}

export interface AttemptView {
  readonly provider: ProviderId;
  readonly outcome: 'succeeded' | 'failed' | 'skipped';
  readonly errorClass?: string;
  readonly reason?: string;
  readonly httpStatus?: number;
  readonly countedByBreaker: boolean;
  readonly retry: number;
}

/** The attempts of an answer (`meta.attempts`) or of an error body (`error.attempts`). */
export function attemptsOf(result: HttpResult): AttemptView[] {
  const attempts = (result.body?.meta?.attempts ?? result.body?.error?.attempts) as AttemptView[] | undefined;
  if (attempts === undefined) throw new Error(`no attempts in ${result.status} ${result.text.slice(0, 300)}`);
  return attempts;
}

export interface BreakerItem {
  readonly state: 'closed' | 'open' | 'halfOpen';
  readonly consecutiveFailures: number;
  readonly openedAt: string | null;
  readonly retryAt: string | null;
  readonly recoveryMs: number;
  readonly distinctKeys: number;
  readonly forced: boolean;
}

export interface ProviderItem {
  readonly id: ProviderId;
  readonly breaker: BreakerItem;
  readonly stats: { calls: number; successes: number; failures: number; ignored: number; rejected: number; opens: number };
  readonly keys: { quarantined: number; cooling: number };
}

/** The provider's item of `GET /v1/providers`. */
export async function providerItem(harness: Harness, provider: ProviderId): Promise<ProviderItem> {
  const result = await request(`${harness.url}/v1/providers`);
  expect(result.status).toBe(200);
  const item = (result.body.providers as ProviderItem[]).find((candidate) => candidate.id === provider);
  if (item === undefined) throw new Error(`no ${provider} in GET /v1/providers`);
  return item;
}

export interface KeyStatusItem {
  readonly provider: ProviderId;
  readonly state: 'healthy' | 'quarantined' | 'cooling';
  readonly errorClass?: string;
  readonly until?: string;
}

/** The key's item of `GET /v1/keys/status`. */
export async function keyStatus(harness: Harness, provider: ProviderId, key: string): Promise<KeyStatusItem> {
  const result = await request(`${harness.url}/v1/keys/status`, { headers: { [keyHeader(provider)]: key } });
  expect(result.status, result.text).toBe(200);
  const [item] = result.body.providers as KeyStatusItem[];
  if (item === undefined) throw new Error('no item in GET /v1/keys/status');
  return item;
}

/** The operator's `POST /v1/providers/:id/breaker`. */
export async function controlBreaker(
  harness: Harness,
  provider: ProviderId,
  action: 'reset' | 'forceOpen' | 'release',
): Promise<ProviderItem> {
  const result = await postJson(
    `${harness.url}/v1/providers/${provider}/breaker`,
    { action },
    { authorization: `Bearer ${adminToken}` },
  );
  expect(result.status, result.text).toBe(200);
  return result.body as ProviderItem;
}

/** Generation calls the emulator has seen for `provider` (with `key` only, if given). */
export function upstreamCalls(harness: Harness, provider: ProviderId, key?: string): number {
  const counters = harness.emulator.stats()[provider];
  return key === undefined ? counters.calls : (counters.byKey[harness.emulator.fingerprint(key)] ?? 0);
}

/** Polls `read` every 10 ms until `done` holds (never a fixed sleep); fails after `timeoutMs`. */
export async function eventually<T>(read: () => Promise<T> | T, done: (value: T) => boolean, what: string, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Waits until the wall clock is past `isoTime` (a `retryAt` or an `until` the service showed). */
export async function pastTime(isoTime: string | null | undefined): Promise<void> {
  if (isoTime === null || isoTime === undefined) throw new Error('no time to wait for');
  const at = Date.parse(isoTime);
  await eventually(() => Date.now(), (now) => now > at, `the time ${isoTime}`);
}

/** What a user-side failure looks like on the provider's own wire (the emulator's bodies). */
export type WireFailure = 'auth' | 'quota' | 'rateLimit';

const wires = { claude: anthropicWire, gpt: openaiWire, timelygpt: timelygptWire } as const;

/**
 * A `respond` fault answering the provider's own body for `kind` to the next `count` generation calls
 * (any key). The rate limit's `retry-after` is dropped, so a cooling key waits KEY_COOLING_MS.
 */
export function wireFault(provider: ProviderId, kind: WireFailure, count = 1): FaultSpec {
  const wire = wires[provider].error(kind, { key: 'test-key-mbt-0001' });
  const { 'retry-after': _dropped, ...headers } = (wire.headers ?? {}) as Record<string, string>;
  return { provider, fault: 'respond', count, status: wire.status, body: wire.body, headers };
}

/**
 * The user-side failures that must never count for the provider's breaker, each as a request the
 * service makes on a key of its own: the emulator's per-key 401, 429 and quota answers, and for
 * TimelyGPT both of its 401s (`authenticate`'s, for a bad key, and `llm-completion`'s twice in a row,
 * after the automatic re-authentication).
 */
export function userSideFailures(provider: ProviderId): { name: string; errorClass: string; run: (harness: Harness) => Promise<HttpResult> }[] {
  const byKey = (name: string, prefix: string, errorClass: string) => ({
    name,
    errorClass,
    run: (harness: Harness) => generate(harness, [{ provider, key: freshKey(provider, prefix) }]),
  });
  const failures = [
    byKey('401 (bad key)', 'emu-bad-', 'auth'),
    byKey('429 (rate limit)', 'emu-ratelimit-', 'rate_limited'),
    byKey('quota', 'emu-quota-', 'quota_exhausted'),
  ];
  if (provider !== 'timelygpt') return failures;
  return [
    ...failures,
    {
      name: '401 at llm-completion, again after re-authenticating',
      errorClass: 'auth',
      run: (harness: Harness) => {
        harness.fault(wireFault('timelygpt', 'auth', 2));
        return generate(harness, [{ provider, key: freshKey(provider) }]);
      },
    },
  ];
}
