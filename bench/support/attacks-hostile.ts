/**
 * The isolation bench's third round of hostile clients: HTTP pipelining, bodies whose error would list every
 * field, jobs on invented keys whose calls hang, heavy `options.notes`, and GET floods of the operational
 * documents. Each comes from an address of its own (127.0.0.20 and up), the steady client on 127.0.0.1.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { AttackContext, Outcomes } from './attacks.js';
import { count, fetchFrom, floodFrom, upload, victimJob } from './attacks.js';

const until = (deadline: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())));

/** Counts the status lines in what a socket reads, across chunk edges (a line cut in two is counted once). */
function statusCounter(): { add(chunk: Buffer): number } {
  // Shorter than the 9 characters of `HTTP/1.1 `: a line found in it was never counted before.
  let tail = '';
  return {
    add(chunk) {
      const text = tail + chunk.toString('latin1');
      tail = text.slice(-8);
      return (text.match(/HTTP\/1\.1 /g) ?? []).length;
    },
  };
}

/**
 * `sockets` connections from `localAddress`, each writing `requests` pipelined `GET /healthz` at once and,
 * when `reading`, the next batch once all of a batch are answered, until the deadline (was: 64 × 2,000 took
 * a victim's p99 from 15 ms to 5 s; 16 × 10,000 never read, to 1.1 s and RSS 437 MB).
 */
export async function pipelinedHealthz(context: AttackContext, sockets: number, requests: number, reading: boolean, localAddress: string): Promise<Outcomes> {
  const address = new URL(context.url);
  const batch = 'GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n'.repeat(requests);
  const open: Socket[] = [];
  let answers = 0;
  let batches = 0;
  let closedByServer = 0;
  for (let index = 0; index < sockets; index += 1) {
    const socket = connect({ port: Number(address.port), host: address.hostname, localAddress });
    socket.on('error', () => undefined);
    const counter = statusCounter();
    let inBatch = 0;
    if (reading) {
      socket.on('data', (chunk: Buffer) => {
        const seen = counter.add(chunk);
        answers += seen;
        inBatch += seen;
        if (inBatch >= requests && Date.now() < context.deadline) {
          inBatch -= requests;
          batches += 1;
          socket.write(batch);
        }
      });
    } else {
      socket.pause();
    }
    socket.on('close', () => {
      if (Date.now() < context.deadline) closedByServer += 1;
    });
    socket.write(batch);
    batches += 1;
    open.push(socket);
  }
  await until(context.deadline);
  for (const socket of open) socket.destroy();
  return { [`batches of ${requests} written`]: batches, ...(reading ? { 'answers read': answers } : {}), 'sockets closed by the server': closedByServer };
}

/**
 * A 1.45 MB body of 130,000 unknown fields, 8 connections (was: a 1.58 MB 400 listing every field, ~200 ms
 * of the loop each; the victim's p99 16 ms → 3.5–4.3 s).
 */
export function unknownFields(context: AttackContext): Promise<Outcomes> {
  const fields: Record<string, number> = {};
  for (let index = 0; index < 130_000; index += 1) fields[`f${String(index).padStart(6, '0')}`] = 1;
  const body = new Blob([JSON.stringify({ task: 'notes', text: 'Photosynthesis.', ...fields })]);
  return floodFrom(context, '127.0.0.21', 8, (fetcher) =>
    fetcher(`${context.url}/v1/generate`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gpt-key': context.hostileKey }, body }),
  );
}

/**
 * One address creates 4 jobs, each on its own invented key whose calls hang (the emulator's `emu-hang-`
 * keys); a second in, the victim (127.0.0.1) runs one job, which must succeed within 10 s (was: the 4 took
 * every JOB_CONCURRENCY slot and the victim's job stayed queued > 120 s). The hostile jobs are cancelled at
 * the end of the window.
 */
export async function hangingKeyJobs(context: AttackContext, pdf: Uint8Array, victimKey: string): Promise<Outcomes> {
  const hostile = fetchFrom('127.0.0.22');
  const outcomes: Outcomes = {};
  try {
    const { documentId, outcome } = await upload(context.url, pdf, 'attack.pdf', hostile.fetch);
    if (documentId === undefined) return { [`upload ${outcome}`]: 1 };
    const jobs: { id: string; key: string }[] = [];
    for (let index = 0; index < 4; index += 1) {
      const key = `emu-hang-bench-${Date.now()}-${index}`;
      const response = await hostile.fetch(`${context.url}/v1/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gpt-key': key }, body: JSON.stringify({ documentId }) });
      const { jobId } = (await response.json()) as { jobId?: string };
      count(outcomes, `hostile job ${response.status}`);
      if (jobId !== undefined) jobs.push({ id: jobId, key });
    }
    const victim = await victimJob(context, pdf, victimKey);
    count(outcomes, victim);
    await until(context.deadline);
    for (const job of jobs) await hostile.fetch(`${context.url}/v1/jobs/${job.id}`, { method: 'DELETE', headers: { 'x-gpt-key': job.key } }).catch(() => undefined);
    return outcomes;
  } finally {
    await hostile.close();
  }
}

/**
 * A 1.4 MB notes object of 20,000 concepts on a 17-character text (mcq), 8 connections (was: weighed by the
 * text alone, one slot each: the victim's p99 16 → 265–386 ms, RSS 506 MB).
 */
export function heavyNotes(context: AttackContext): Promise<Outcomes> {
  const keyConcepts = Array.from({ length: 20_000 }, (_, index) => ({ id: `c${index}`, term: `T${index}`, definition: `D${index}`, importance: 'high' }));
  const body = new Blob([JSON.stringify({ task: 'mcq', text: 'Photosynthesis!!!', options: { count: 3, notes: { keyConcepts, sections: [], glossary: [] } } })]);
  return floodFrom(context, '127.0.0.23', 8, (fetcher) =>
    fetcher(`${context.url}/v1/generate`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gpt-key': context.hostileKey }, body }),
  );
}

/** 64 keep-alive connections asking for `path` as fast as answers come (was: ~1,100 a second, the victim's p99 +240 ms). */
export function getFlood(context: AttackContext, path: string, localAddress: string): Promise<Outcomes> {
  return floodFrom(context, localAddress, 64, (fetcher) => fetcher(`${context.url}${path}`));
}
