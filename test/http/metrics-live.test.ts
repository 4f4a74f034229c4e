/**
 * /metrics of the real service: process metrics carry our prefix once
 * (`studyhelper_process_cpu_user_seconds_total`, not `studyhelper_process_process_…`), and a generation
 * whose client goes away while the upstream call runs is counted as `outcome="aborted"`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJson, request, startHarness, studyText } from './blackbox-support.js';
import type { Harness } from './blackbox-support.js';

let harness: Harness;

beforeAll(async () => {
  harness = await startHarness({ PROVIDER_TIMEOUT_MS: '10000', RETRY_MAX: '0' });
});

afterAll(async () => {
  await harness.close();
});

async function metrics(): Promise<string> {
  const response = await request(`${harness.url}/metrics`);
  expect(response.status).toBe(200);
  return response.text;
}

/** The value of one sample line, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function until<T>(read: () => Promise<T | undefined>, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('GET /metrics of the running service', () => {
  it('names the process metrics studyhelper_process_* and studyhelper_nodejs_*, prefix once', async () => {
    const text = await metrics();
    expect(text).toMatch(/^studyhelper_process_cpu_user_seconds_total \d/m);
    expect(text).toMatch(/^studyhelper_process_resident_memory_bytes \d/m);
    expect(text).toMatch(/^# TYPE studyhelper_nodejs_eventloop_lag_seconds gauge$/m);
    expect(text).not.toContain('studyhelper_process_process_');
    expect(text).not.toContain('studyhelper_process_nodejs_');
  });

  it('counts a call whose client disconnected as outcome="aborted", outside the duration histogram', async () => {
    const aborted = 'studyhelper_provider_calls_total{provider="claude",outcome="aborted",error_class="aborted"}';
    const durations = 'studyhelper_attempt_duration_seconds_count{provider="claude"}';
    const before = await metrics();
    expect(sample(before, aborted)).toBeUndefined();
    const durationsBefore = sample(before, durations) ?? 0;

    harness.fault({ provider: 'claude', fault: 'slow', ms: 5000 });
    const callsBefore = harness.emulator.stats().claude.calls;
    const client = new AbortController();
    const pending = postJson(
      `${harness.url}/v1/generate`,
      { task: 'notes', text: studyText, providers: ['claude'], options: { lang: 'en' } },
      { 'x-claude-key': 'test-claude-key-0001-metrics' },
      client.signal,
    ).catch((error: unknown) => error);
    // The call is at the emulator (which answers only after 5 s): now the client goes away.
    await until(async () => (harness.emulator.stats().claude.calls > callsBefore ? true : undefined), 'the upstream call');
    client.abort();
    expect(await pending).toBeInstanceOf(Error);

    const count = await until(async () => sample(await metrics(), aborted), 'the aborted call in /metrics');
    expect(count).toBe(1);
    const after = await metrics();
    expect(sample(after, durations) ?? 0).toBe(durationsBefore);
    expect(after).not.toMatch(/studyhelper_provider_calls_total\{provider="claude",outcome="(failed|succeeded)"/);
    // The breaker never hears an aborted call as a failure.
    const providers = await request(`${harness.url}/v1/providers`);
    const claude = (providers.body.providers as { id: string; breaker: { consecutiveFailures: number } }[]).find((provider) => provider.id === 'claude');
    expect(claude?.breaker.consecutiveFailures).toBe(0);
  });
});
