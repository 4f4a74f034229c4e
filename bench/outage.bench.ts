/**
 * Outage: the first provider of the chain dies (HTTP 500s, or hanging until the deadline)
 * while a second stays healthy, under steady load. Over time: success rate, latency before / while
 * the breaker is still closed / while it is open / after recovery, calls that reached the dead
 * provider (emulator counters), and the time back to closed once it recovers; for both fallback
 * policies. Baseline: the healthy provider alone under the same load, measured in the same script
 * right before each outage run (A B A B).
 *
 * One bad user: ten healthy clients (ten keys) beside one client whose requests all
 * time out (an `emu-hang-` key, eight requests at once), claude only, with the quorum of distinct keys
 * (BREAKER_MIN_DISTINCT_KEYS=2) and, in the same script right before it, without it (=1): whether the
 * breaker opens, the healthy clients' success rate, and the bad client's calls reaching claude per
 * recovery window (emulator counters by key).
 * `BENCH_OUTAGE_ONLY=bad-user` runs that scenario alone.
 */
import { writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Child } from './support/children.js';
import type { LoadResult } from './support/load.child.js';
import { percentile, signed } from './support/stats.js';
import { benchText, claudeKey, gptKey, keyCalls, keyIds, providerCalls, resetFaults, resetStats, setFault, startEmulatorChild, startLoadChild, startServiceChild } from './support/index.js';
import { benchmarksFile, renderBenchSection, round, writeBenchmarkSection, type BenchGoal } from './report.js';
import { timelineSvg } from './support/plot.js';

const threshold = 5;
const retryMax = 2;
const recoveryMs = Number(process.env.BENCH_RECOVERY_MS ?? 1000);
const timeoutMs = Number(process.env.BENCH_PROVIDER_TIMEOUT_MS ?? 300);
const connections = Number(process.env.BENCH_OUTAGE_CONNECTIONS ?? 10);
/** Phase lengths (ms): healthy, dead, recovered. */
const healthyMs = 2000;
const deadMs = 5000;
const recoveredMs = 3000;
const policies = ['retry-then-fallback', 'fallback-first'] as const;
const faults = ['http500', 'hang'] as const;

type Policy = (typeof policies)[number];
type Fault = (typeof faults)[number];

interface Events {
  readonly faultOn: number;
  readonly opened: number | undefined;
  readonly recovered: number;
  readonly closed: number | undefined;
  readonly callsBeforeOpen: number;
  readonly callsWhileOpen: number;
}

interface OutageRun {
  readonly policy: Policy;
  readonly fault: Fault;
  readonly baseline: LoadResult;
  readonly load: LoadResult;
  readonly startedAt: number;
  readonly events: Events;
}

const body = JSON.stringify({ task: 'notes', text: benchText, providers: ['claude', 'gpt'], options: { lang: 'en' } });
const baselineBody = JSON.stringify({ task: 'notes', text: benchText, providers: ['gpt'], options: { lang: 'en' } });
const headers = { 'x-claude-key': claudeKey, 'x-gpt-key': gptKey };

interface BreakerView {
  readonly state: string;
}

async function claudeBreaker(serviceUrl: string): Promise<string> {
  const response = await fetch(`${serviceUrl}/v1/providers`);
  const providers = ((await response.json()) as { providers: { id: string; breaker: BreakerView }[] }).providers;
  return providers.find((provider) => provider.id === 'claude')?.breaker.state ?? 'unknown';
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const now = (): number => performance.timeOrigin + performance.now();

/** Drives the fault while the load runs; polls the breaker every 20 ms. */
async function outageScript(emulatorUrl: string, serviceUrl: string, fault: Fault, startedAt: number): Promise<Events> {
  await sleep(Math.max(0, startedAt + healthyMs - now()));
  await resetStats(emulatorUrl);
  await setFault(emulatorUrl, { provider: 'claude', fault });
  const faultOn = now();
  let opened: number | undefined;
  let callsBeforeOpen = 0;
  while (now() < faultOn + deadMs) {
    if (opened === undefined && (await claudeBreaker(serviceUrl)) !== 'closed') {
      opened = now();
      callsBeforeOpen = await providerCalls(emulatorUrl, 'claude');
    }
    await sleep(20);
  }
  const callsDuringOutage = await providerCalls(emulatorUrl, 'claude');
  await resetFaults(emulatorUrl);
  const recovered = now();
  let closed: number | undefined;
  while (now() < recovered + recoveredMs) {
    if (closed === undefined && (await claudeBreaker(serviceUrl)) === 'closed') closed = now();
    await sleep(20);
  }
  return { faultOn, opened, recovered, closed, callsBeforeOpen, callsWhileOpen: callsDuringOutage - callsBeforeOpen };
}

async function runOutage(emulator: Child & { url: string }, load: Awaited<ReturnType<typeof startLoadChild>>, policy: Policy, fault: Fault): Promise<OutageRun> {
  const service = await startServiceChild(emulator, {
    PROVIDERS_DEFAULT_ORDER: 'claude,gpt',
    FALLBACK_MODE: policy,
    BREAKER_FAILURE_THRESHOLD: String(threshold),
    BREAKER_RECOVERY_MS: String(recoveryMs),
    RETRY_MAX: String(retryMax),
    RETRY_BACKOFF_MS: '20,40',
    PROVIDER_TIMEOUT_MS: String(timeoutMs),
    // Every connection carries the same claude key: the provider dies for that one key, so the
    // quorum of distinct keys is off here (the one-bad-user scenario below is about the quorum).
    BREAKER_MIN_DISTINCT_KEYS: '1',
    // One client (one key pair, one address) drives every connection: its admission shares (default 8
    // generations in flight per client, 32 per address) are raised so that the run measures the
    // outage, not the share's 429s, as the overhead bench does.
    MAX_INFLIGHT_GENERATIONS: '256',
    MAX_INFLIGHT_GENERATIONS_PER_CLIENT: '256',
  });
  try {
    const url = `${service.url}/v1/generate`;
    // Warm-up, then A: the healthy provider alone under the same load.
    await load.run({ url, body, headers, connections, duration: 1 });
    const baseline = await load.run({ url, body: baselineBody, headers, connections, duration: 2 });
    const seconds = (healthyMs + deadMs + recoveredMs) / 1000;
    const startedAt = now();
    const [result, events] = await Promise.all([
      load.run({ url, body, headers, connections, duration: seconds, timeline: true, timeoutSeconds: 10 }),
      outageScript(emulator.url, service.url, fault, startedAt),
    ]);
    process.stdout.write(
      `${policy} / ${fault}: ${result.ok}/${result.requests} ok, opened after ${events.opened === undefined ? '—' : round(events.opened - events.faultOn, 0)} ms, ` +
        `${events.callsBeforeOpen} dead calls before open, ${events.callsWhileOpen} while open, closed ${events.closed === undefined ? '—' : round(events.closed - events.recovered, 0)} ms after recovery\n`,
    );
    return { policy, fault, baseline, load: result, startedAt, events };
  } finally {
    await service.stop();
  }
}

interface Phase {
  readonly name: string;
  readonly from: number;
  readonly to: number;
}

function phases(run: OutageRun): Phase[] {
  const { events } = run;
  const opened = events.opened ?? events.recovered;
  return [
    { name: 'before', from: -Infinity, to: events.faultOn },
    { name: 'dead, breaker closed', from: events.faultOn, to: opened },
    { name: 'dead, breaker open', from: opened, to: events.recovered },
    { name: 'after recovery', from: events.recovered, to: Infinity },
  ];
}

/** Responses whose request started inside the phase (start = end − latency). */
function phaseStats(run: OutageRun, phase: Phase): { count: number; success: number; p50: number; p99: number } {
  const inside = (run.load.timeline ?? []).filter(([end, latency]) => {
    const start = run.startedAt + end - latency;
    return start >= phase.from && start < phase.to;
  });
  const latencies = Float64Array.from(inside.map(([, latency]) => latency)).sort();
  const success = inside.filter(([, , status]) => status >= 200 && status < 300).length;
  return { count: inside.length, success, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) };
}

function report(runs: readonly OutageRun[], plots: readonly string[]): string {
  const budget = threshold * (1 + retryMax);
  const rows: Array<Array<string | number>> = [];
  const judged: Array<{ run: string; success: number; p99Delta: number; before: number; whileOpen: number; windows: number }> = [];
  for (const run of runs) {
    const stats = phases(run).map((phase) => ({ phase, ...phaseStats(run, phase) }));
    const cells = stats.map((s) => (s.count === 0 ? '—' : `${round((100 * s.success) / s.count, 1)}% · ${round(s.p50, 1)} / ${round(s.p99, 1)}`));
    const { events } = run;
    const openDelay = events.opened === undefined ? 'never' : `${round(events.opened - events.faultOn, 0)} ms`;
    const closeDelay = events.closed === undefined ? 'not within the window' : `${round(events.closed - events.recovered, 0)} ms`;
    rows.push([run.policy, run.fault, `${round(run.baseline.p50, 1)} / ${round(run.baseline.p99, 1)}`, ...cells, openDelay, events.callsBeforeOpen, events.callsWhileOpen, closeDelay]);
    const all = run.load.timeline ?? [];
    const success = all.length === 0 ? 0 : all.filter(([, , status]) => status >= 200 && status < 300).length / all.length;
    const open = stats[2];
    judged.push({
      run: `${run.policy}/${run.fault}`,
      success,
      p99Delta: open === undefined ? Number.NaN : open.p99 - run.baseline.p99,
      before: events.callsBeforeOpen,
      whileOpen: events.callsWhileOpen,
      windows: Math.ceil((events.recovered - (events.opened ?? events.recovered)) / recoveryMs),
    });
  }
  const each = (text: (j: (typeof judged)[number]) => string): string => judged.map((j) => `${j.run} ${text(j)}`).join(', ');
  return renderBenchSection({
    bench: 'outage',
    title: 'outage: one provider dead, a second healthy',
    settings: `threshold ${threshold}, recovery ${recoveryMs} ms, \`RETRY_MAX\`=${retryMax}, timeout ${timeoutMs} ms, ${connections} connections`,
    measures:
      `A fresh service per run under \`POST /v1/generate\` (claude then gpt): ${healthyMs / 1000} s healthy, ${deadMs / 1000} s claude dead ` +
      `(\`http500\` or \`hang\`), ${recoveredMs / 1000} s recovered; A = gpt alone just before. Cells: success · p50 / p99 ms, by the phase a request started in.`,
    columns: ['policy', 'fault', 'A p50 / p99', 'before', 'dead, closed', 'dead, open', 'after recovery', 'opened after', 'dead calls before open', 'while open', 'closed after recovery'],
    rows,
    goals: [
      { rule: 'every request succeeds', met: judged.every((j) => j.success === 1), measured: each((j) => `${round(j.success * 100, 2)}%`) },
      { rule: 'p99 with the breaker open ≤ gpt alone + 1 ms', met: judged.every((j) => j.p99Delta <= 1), measured: each((j) => `${signed(j.p99Delta)} ms`) },
      { rule: `≤ ${threshold} × (1 + ${retryMax}) = ${budget} calls reach the dead provider before it opens`, met: judged.every((j) => j.before <= budget), measured: each((j) => String(j.before)) },
      { rule: `≤ 1 call per ${recoveryMs} ms recovery window while open`, met: judged.every((j) => j.whileOpen <= j.windows), measured: each((j) => `${j.whileOpen} in ${j.windows}`) },
    ],
    note: plots.map((plot) => `![${plot}](${plot})`).join(' '),
  });
}

/** One bad user: ten healthy clients and one whose requests all hang, claude only. */
const healthyClients = 10;
const badConnections = Number(process.env.BENCH_BAD_USER_CONNECTIONS ?? 8);
const badUserSeconds = Number(process.env.BENCH_BAD_USER_SECONDS ?? 8);
/**
 * The deadline of this scenario: long enough that a healthy call on this loaded shared machine never
 * reaches it (a healthy timeout would be a second key failing, and the quorum would rightly open).
 */
const badUserTimeoutMs = Number(process.env.BENCH_BAD_USER_TIMEOUT_MS ?? 500);
const badKey = 'emu-hang-bench-bad-user-0001';
const claudeOnly = JSON.stringify({ task: 'notes', text: benchText, providers: ['claude'], options: { lang: 'en' } });
const healthyHeaders = Array.from({ length: healthyClients }, (_, index) => ({
  'x-claude-key': `bench-fake-claude-key-client-${String(index).padStart(2, '0')}`,
}));

interface BadUserRun {
  readonly quorum: number;
  readonly healthy: LoadResult;
  /** The healthy clients' answers by HTTP status. */
  readonly healthyStatuses: Readonly<Record<string, number>>;
  readonly bad: LoadResult;
  /** The provider breaker's openings during the run, and whether it was ever seen other than closed. */
  readonly opens: number;
  readonly seenOpen: boolean;
  /** Calls of the bad key that reached claude, per recovery window. */
  readonly badCallsPerWindow: readonly number[];
  readonly healthyCalls: number;
}

const benchAdminToken = 'bench-admin-token-not-a-secret';

async function resetClaudeBreaker(serviceUrl: string): Promise<void> {
  const response = await fetch(`${serviceUrl}/v1/providers/claude/breaker`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${benchAdminToken}` },
    body: JSON.stringify({ action: 'reset' }),
  });
  if (!response.ok) throw new Error(`breaker reset refused: ${response.status}`);
}

async function claudeOpens(serviceUrl: string): Promise<number> {
  const response = await fetch(`${serviceUrl}/v1/providers`);
  const providers = ((await response.json()) as { providers: { id: string; stats: { opens: number } }[] }).providers;
  return providers.find((provider) => provider.id === 'claude')?.stats.opens ?? 0;
}

async function runBadUser(
  emulator: Child & { url: string },
  healthyLoad: Awaited<ReturnType<typeof startLoadChild>>,
  badLoad: Awaited<ReturnType<typeof startLoadChild>>,
  quorum: number,
): Promise<BadUserRun> {
  const service = await startServiceChild(emulator, {
    PROVIDERS_DEFAULT_ORDER: 'claude,gpt',
    BREAKER_FAILURE_THRESHOLD: String(threshold),
    BREAKER_RECOVERY_MS: String(recoveryMs),
    BREAKER_MIN_DISTINCT_KEYS: String(quorum),
    RETRY_MAX: String(retryMax),
    RETRY_BACKOFF_MS: '20,40',
    PROVIDER_TIMEOUT_MS: String(badUserTimeoutMs),
    ADMIN_TOKEN: benchAdminToken,
  });
  try {
    const url = `${service.url}/v1/generate`;
    await healthyLoad.run({ url, body: claudeOnly, rotateHeaders: healthyHeaders, connections: healthyClients, duration: 1 });
    // A warm-up call can outlast the deadline (the token-counting worker starts on the first text):
    // the measured run starts from a closed breaker with no streak.
    await resetClaudeBreaker(service.url);
    await resetStats(emulator.url);
    const opensBefore = await claudeOpens(service.url);
    const startedAt = now();
    const samples: number[] = [];
    let seenOpen = false;
    let running = true;
    const watch = (async () => {
      while (running) {
        if ((await claudeBreaker(service.url)) !== 'closed') seenOpen = true;
        const elapsed = now() - startedAt;
        const window = Math.floor(elapsed / recoveryMs);
        samples[window] = await keyCalls(emulator.url, 'claude', badKeyId);
        await sleep(50);
      }
    })();
    const [healthy, bad] = await Promise.all([
      healthyLoad.run({ url, body: claudeOnly, rotateHeaders: healthyHeaders, connections: healthyClients, duration: badUserSeconds, timeoutSeconds: 10, timeline: true }),
      badLoad.run({ url, body: claudeOnly, headers: { 'x-claude-key': badKey }, connections: badConnections, duration: badUserSeconds, timeoutSeconds: 10 }),
    ]);
    running = false;
    await watch;
    const total = await keyCalls(emulator.url, 'claude', badKeyId);
    const cumulative: number[] = [];
    for (let index = 0; index < samples.length; index += 1) cumulative[index] = samples[index] ?? cumulative[index - 1] ?? 0;
    const perWindow = cumulative.map((value, index) => value - (index === 0 ? 0 : (cumulative[index - 1] ?? 0)));
    // Calls counted after the last sample (the loads' last in-flight requests) join the last window.
    if (perWindow.length > 0) perWindow[perWindow.length - 1] = (perWindow.at(-1) ?? 0) + total - (cumulative.at(-1) ?? 0);
    const healthyCalls = (await providerCalls(emulator.url, 'claude')) - total;
    const opens = (await claudeOpens(service.url)) - opensBefore;
    const healthyStatuses: Record<string, number> = {};
    for (const [, , status] of healthy.timeline ?? []) healthyStatuses[status] = (healthyStatuses[status] ?? 0) + 1;
    process.stdout.write(
      `one bad user, BREAKER_MIN_DISTINCT_KEYS=${quorum}: healthy ${healthy.ok}/${healthy.requests} ok ${JSON.stringify(healthyStatuses)}, bad ${bad.ok}/${bad.requests} ok, ` +
        `breaker opened ${opens} time(s), bad calls per ${recoveryMs} ms window ${perWindow.join(' ')}\n`,
    );
    return { quorum, healthy, healthyStatuses, bad, opens, seenOpen, badCallsPerWindow: perWindow, healthyCalls };
  } finally {
    await service.stop();
  }
}

/** The emulator's fingerprint of the bad key: the one key of a lone bad request after a reset. */
let badKeyId = '';

async function findBadKeyId(emulator: Child & { url: string }, load: Awaited<ReturnType<typeof startLoadChild>>): Promise<string> {
  const service = await startServiceChild(emulator, { RETRY_MAX: '0', PROVIDER_TIMEOUT_MS: String(timeoutMs) });
  try {
    // Warm the service (its first request starts the token-counting worker), then the lone bad request.
    await load.run({ url: `${service.url}/v1/generate`, body: claudeOnly, headers: healthyHeaders[0], connections: 1, amount: 2 });
    await resetStats(emulator.url);
    const probe = await load.run({ url: `${service.url}/v1/generate`, body: claudeOnly, headers: { 'x-claude-key': badKey }, connections: 1, amount: 1 });
    const ids = await keyIds(emulator.url, 'claude');
    if (ids.length !== 1 || ids[0] === undefined)
      throw new Error(`expected one key at the emulator, got ${ids.length} (${JSON.stringify(probe)})`);
    return ids[0];
  } finally {
    await service.stop();
  }
}

function badUserReport(runs: readonly BadUserRun[]): string {
  const rows = runs.map((run) => {
    const healthyRate = run.healthy.requests === 0 ? 0 : (100 * run.healthy.ok) / run.healthy.requests;
    const windows = run.badCallsPerWindow;
    const mean = windows.length === 0 ? 0 : windows.reduce((sum, value) => sum + value, 0) / windows.length;
    return [
      run.quorum,
      `${run.opens}${run.seenOpen && run.opens === 0 ? ' (seen open)' : ''}`,
      `${round(healthyRate, 2)}% (${run.healthy.ok}/${run.healthy.requests})`,
      `${round(run.healthy.p50, 1)} / ${round(run.healthy.p99, 1)}`,
      `${run.bad.requests} (${run.bad.ok} ok)`,
      `${round(mean, 1)} / ${Math.max(0, ...windows)}`,
    ];
  });
  const withQuorum = runs.find((run) => run.quorum === 2);
  const goals: BenchGoal[] = [];
  if (withQuorum !== undefined) {
    const rate = withQuorum.healthy.requests === 0 ? 0 : withQuorum.healthy.ok / withQuorum.healthy.requests;
    const peak = Math.max(0, ...withQuorum.badCallsPerWindow);
    const bound = Math.ceil((badConnections * (recoveryMs + badUserTimeoutMs)) / badUserTimeoutMs);
    goals.push(
      { rule: 'with the quorum (=2) the breaker stays closed', met: withQuorum.opens === 0 && !withQuorum.seenOpen, measured: `${withQuorum.opens} openings` },
      { rule: 'every healthy request succeeds', met: rate === 1, measured: `${round(rate * 100, 2)}%` },
      {
        rule: `the bad client's calls per window stay within its admission share (${badConnections} in flight, ${badUserTimeoutMs} ms deadline: ≤ ${bound})`,
        met: peak <= bound,
        measured: `at most ${peak}`,
      },
    );
  }
  return renderBenchSection({
    bench: 'outage',
    title: 'outage-bad-user: one bad key beside ten healthy clients',
    settings: '`BENCH_OUTAGE_ONLY=bad-user` runs this part alone',
    measures:
      `${healthyClients} healthy clients (one claude key each) and one client whose key the emulator never answers (${badConnections} connections), ` +
      `${badUserSeconds} s of claude-only \`POST /v1/generate\`, without then with the distinct-key quorum (\`BREAKER_MIN_DISTINCT_KEYS\`).`,
    columns: ['quorum', 'breaker openings', 'healthy success', 'healthy p50 / p99 ms', 'bad requests', `bad calls per ${recoveryMs} ms window, mean / max`],
    rows,
    goals,
  });
}

async function main(): Promise<void> {
  const emulator = await startEmulatorChild();
  const load = await startLoadChild();
  const badLoad = await startLoadChild();
  const runs: OutageRun[] = [];
  const badUserRuns: BadUserRun[] = [];
  const onlyBadUser = process.env.BENCH_OUTAGE_ONLY === 'bad-user';
  try {
    if (!onlyBadUser) {
      for (const fault of faults) {
        for (const policy of policies) runs.push(await runOutage(emulator, load, policy, fault));
      }
    }
    badKeyId = await findBadKeyId(emulator, badLoad);
    for (const quorum of [1, 2]) badUserRuns.push(await runBadUser(emulator, load, badLoad, quorum));
  } finally {
    await load.stop();
    await badLoad.stop();
    await emulator.stop();
  }
  writeBenchmarkSection('outage-bad-user', badUserReport(badUserRuns));
  if (onlyBadUser) return;
  const plotDirectory = join(dirname(benchmarksFile), 'benchmarks');
  mkdirSync(plotDirectory, { recursive: true });
  const plots: string[] = [];
  for (const fault of faults) {
    const name = `outage-${fault}.svg`;
    const series = runs
      .filter((run) => run.fault === fault)
      .map((run) => ({
        label: run.policy,
        points: (run.load.timeline ?? []).map(([end, latency, status]) => ({ x: (end - latency) / 1000, y: latency, failed: status < 200 || status >= 300 })),
        marks: [
          { x: (run.events.faultOn - run.startedAt) / 1000, label: 'claude dead' },
          ...(run.events.opened === undefined ? [] : [{ x: (run.events.opened - run.startedAt) / 1000, label: 'open' }]),
          { x: (run.events.recovered - run.startedAt) / 1000, label: 'recovered' },
          ...(run.events.closed === undefined ? [] : [{ x: (run.events.closed - run.startedAt) / 1000, label: 'closed' }]),
        ],
      }));
    writeFileSync(join(plotDirectory, name), timelineSvg(`Latency of each request over time, claude ${fault}, gpt healthy`, series));
    plots.push(`benchmarks/${name}`);
  }
  writeBenchmarkSection('outage', report(runs, plots));
}

await main();
