/**
 * Issue 26, one process without Redis: a job survives a restart of its process (JOBS_DIR). A real service
 * process (`src/main.ts`, no REDIS_URL) runs a job whose provider calls go through a recording proxy in
 * front of the emulator (the test's own oracle of what was asked and answered); it is killed (SIGKILL)
 * mid-job and started again on the same directory. Then the job reads `interrupted` (JOB_INTERRUPTED,
 * resumable), other keys get 403, the same keys resume it (202), and it succeeds without any step the
 * killed process was answered being asked of the provider again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { postJson, request } from '../http/blackbox-support.js';
import { freePort } from '../fleet/support.js';

const key = 'test-claude-key-0001-restart';
const otherKey = 'test-claude-key-0002-restart';

interface Seen {
  readonly body: string;
  answered: boolean;
}

/** A recording proxy to the emulator's Anthropic endpoint; `hold(seen)` true leaves the call unanswered. */
interface RecordingProxy {
  readonly url: string;
  readonly seen: Seen[];
  hold: (index: number) => boolean;
  close(): Promise<void>;
}

async function startProxy(emulator: Emulator): Promise<RecordingProxy> {
  const held = new Set<ServerResponse>();
  const seenCalls: Seen[] = [];
  const state = { hold: (_index: number) => false };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const seen: Seen = { body, answered: false };
      seenCalls.push(seen);
      if (state.hold(seenCalls.length - 1)) {
        held.add(res);
        return;
      }
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string' && name !== 'host' && name !== 'content-length' && name !== 'connection') headers[name] = value;
      }
      void (async () => {
        const upstream = await fetch(`${emulator.anthropicBaseUrl}${req.url ?? ''}`, { method: req.method ?? 'POST', headers, body });
        const text = await upstream.text();
        res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
        res.end(text, () => {
          seen.answered = upstream.status === 200;
        });
      })().catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    seen: seenCalls,
    get hold() {
      return state.hold;
    },
    set hold(decide: (index: number) => boolean) {
      state.hold = decide;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What a step is: the request body without what may differ between two processes' SDK calls. */
function stepOf(body: string): string {
  const parsed = JSON.parse(body) as { system?: unknown; messages?: unknown };
  return JSON.stringify({ system: parsed.system, messages: parsed.messages });
}

interface Running {
  readonly url: string;
  readonly child: ChildProcess;
  readonly exited: Promise<unknown>;
}

/** `src/main.ts` in its own process, without REDIS_URL, on `jobsDir`; resolves once `/healthz` answers. */
async function startProcess(jobsDir: string, proxy: RecordingProxy, emulator: Emulator): Promise<Running> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    JOBS_DIR: jobsDir,
    ANTHROPIC_BASE_URL: proxy.url,
    OPENAI_BASE_URL: emulator.openaiBaseUrl,
    TIMELYGPT_BASE_URL: emulator.timelygptBaseUrl,
    LOG_LEVEL: 'warn',
    WORKER_NICE: '0',
    // Small parts: the job is many provider steps, so it can die between them.
    JOB_PART_BUDGET_TOKENS: '64',
    PROVIDER_TIMEOUT_MS: '30000',
  };
  delete env.REDIS_URL;
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 50_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/healthz`)).ok) return { url, child, exited };
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error('service process did not start');
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function kill(running: Running | undefined): Promise<void> {
  if (running === undefined || running.child.exitCode !== null || running.child.signalCode !== null) return;
  running.child.kill('SIGKILL');
  await running.exited;
}

interface ViewBody {
  status: string;
  resumable?: boolean;
  error?: { code: string };
  meta?: { attempts: { outcome: string }[] };
}

async function readUntil(url: string, jobId: string, predicate: (body: ViewBody) => boolean, withinMs: number): Promise<ViewBody> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const result = await request(`${url}/v1/jobs/${jobId}`);
    if (result.status === 200 && predicate(result.body as ViewBody)) return result.body as ViewBody;
    if (Date.now() > deadline) throw new Error(`job ${jobId}: not as expected within ${withinMs} ms: ${result.status} ${result.text}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

let emulator: Emulator;
let proxy: RecordingProxy;
let jobsDir: string;
const started: Running[] = [];

beforeAll(async () => {
  emulator = await startEmulator({ host: '127.0.0.1', port: 0 });
  proxy = await startProxy(emulator);
  jobsDir = await mkdtemp(join(tmpdir(), 'study-helper-restart-'));
});

afterAll(async () => {
  await Promise.all(started.map(kill));
  await proxy?.close();
  await emulator?.close();
  if (jobsDir !== undefined) await rm(jobsDir, { recursive: true, force: true });
});

describe('a job of a process without Redis, killed mid-job', () => {
  it('reads interrupted after the process starts again on the same directory, and resumes without asking a finished step again', async () => {
    // The first process is answered its first three provider steps, then waits on the rest forever.
    proxy.hold = (index) => index >= 3;
    const first = await startProcess(jobsDir, proxy, emulator);
    started.push(first);
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(await englishTextPdf(4))], { type: 'application/pdf' }), 'doc.pdf');
    const uploaded = await request(`${first.url}/v1/documents`, { method: 'POST', body: form });
    expect(uploaded.status, uploaded.text).toBe(201);
    const created = await postJson(
      `${first.url}/v1/jobs`,
      { documentId: uploaded.body.documentId, providers: ['claude'], options: { lang: 'en', mcqCount: 2, fillCount: 2 } },
      { 'x-claude-key': key },
    );
    expect(created.status, created.text).toBe(202);
    const jobId = created.body.jobId as string;

    await readUntil(
      first.url,
      jobId,
      (body) => body.status === 'running' && (body.meta?.attempts.filter((a) => a.outcome === 'succeeded').length ?? 0) >= 3,
      90_000,
    );
    // The fourth step is asked (and held): the first three are finished parts of the job.
    while (proxy.seen.length < 4) await new Promise((resolve) => setTimeout(resolve, 20));
    const answeredBefore = proxy.seen.filter((seen) => seen.answered).map((seen) => stepOf(seen.body));
    expect(answeredBefore).toHaveLength(3);
    // Stored as each part finishes: the three answered steps are in the job's file before the kill.
    const file = join(jobsDir, 'jobs', `${jobId}.json`);
    const succeededOnDisk = async (): Promise<number> => {
      try {
        const stored = JSON.parse(await readFile(file, 'utf8')) as { record: ViewBody };
        return stored.record.meta?.attempts.filter((a) => a.outcome === 'succeeded').length ?? 0;
      } catch {
        return 0;
      }
    };
    const onDiskBy = Date.now() + 10_000;
    while ((await succeededOnDisk()) < 3 && Date.now() < onDiskBy) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await succeededOnDisk()).toBe(3);

    await kill(first);
    const askedBeforeRestart = proxy.seen.length;
    proxy.hold = () => false;
    const second = await startProcess(jobsDir, proxy, emulator);
    started.push(second);

    const interrupted = await readUntil(second.url, jobId, () => true, 5000);
    expect(interrupted).toMatchObject({ status: 'interrupted', resumable: true, error: { code: 'JOB_INTERRUPTED' } });

    const resumeUrl = `${second.url}/v1/jobs/${jobId}/resume`;
    const stranger = await request(resumeUrl, { method: 'POST', headers: { 'x-claude-key': otherKey } });
    expect(stranger.status, stranger.text).toBe(403);
    expect(stranger.body.error.code).toBe('JOB_FORBIDDEN');
    const resumed = await request(resumeUrl, { method: 'POST', headers: { 'x-claude-key': key } });
    expect(resumed.status, resumed.text).toBe(202);
    expect(resumed.body).toEqual({ jobId, status: 'queued' });

    const finished = await readUntil(second.url, jobId, (body) => body.status === 'succeeded' || body.status === 'failed', 90_000);
    expect(finished.status).toBe('succeeded');
    // The oracle: no step the killed process was answered is asked of the provider again.
    const askedAfter = proxy.seen.slice(askedBeforeRestart).map((seen) => stepOf(seen.body));
    expect(askedAfter.length).toBeGreaterThan(0);
    expect(askedAfter.filter((step) => answeredBefore.includes(step))).toEqual([]);
    expect(finished.meta?.attempts).toHaveLength(3 + askedAfter.length);
  }, 240_000);
});
