/**
 * The hostile client of the isolation bench: each attack runs from the bench parent until
 * its deadline and reports what the hostile client got back (status or code counts), so the report
 * can show the refusals beside the steady client's figures. PDFs are built here at run time.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { createDeflate } from 'node:zlib';
import { Agent, FormData as UndiciFormData, fetch as undiciFetch } from 'undici';

export type Outcomes = Record<string, number>;

export interface AttackContext {
  readonly url: string;
  readonly deadline: number;
  readonly hostileKey: string;
}

export function count(outcomes: Outcomes, label: string): void {
  outcomes[label] = (outcomes[label] ?? 0) + 1;
}

/** The answer's status and contract code ("413 TEXT_TOO_LARGE"), or the network error's name. */
async function outcomeOf(request: Promise<Response>): Promise<string> {
  try {
    const response = await request;
    return answerLabel(response.status, await response.text());
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return `network ${cause ?? (error instanceof Error ? error.name : 'error')}`;
  }
}

/** An answer's outcome label: its status, and its error code when the body carries one. */
function answerLabel(status: number | undefined, body: string): string {
  const code = /"code":"([A-Z_]+)"/.exec(body)?.[1];
  return code === undefined ? String(status) : `${status} ${code}`;
}

/** `workers` loops each sending `send()` until the deadline. */
async function flood(context: AttackContext, workers: number, send: () => Promise<Response>): Promise<Outcomes> {
  const outcomes: Outcomes = {};
  const loop = async (): Promise<void> => {
    while (Date.now() < context.deadline) count(outcomes, await outcomeOf(send()));
  };
  await Promise.all(Array.from({ length: workers }, loop));
  return outcomes;
}

function generate(context: AttackContext, body: string | Blob): Promise<Response> {
  return fetch(`${context.url}/v1/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gpt-key': context.hostileKey },
    body,
    signal: AbortSignal.timeout(Math.max(1000, context.deadline - Date.now() + 5000)),
  });
}

/** 100 KB of `a` without a space, four at a time (was: 10 s per request and /healthz 8 s). */
export function unspacedText(context: AttackContext): Promise<Outcomes> {
  const body = JSON.stringify({ task: 'notes', text: 'a'.repeat(100_000) });
  return flood(context, 4, () => generate(context, body));
}

/**
 * A 10 MB text, four at a time (was: 368 upstream calls each, RSS 159 → 489 MB). Encoded once: a string
 * body is encoded again for every request, 10 MB of this process's CPU and garbage each time on the cores
 * the service shares here (an attacker elsewhere costs the service nothing of that).
 */
export function hugeText(context: AttackContext): Promise<Outcomes> {
  const body = new Blob([JSON.stringify({ task: 'notes', text: 'lorem ipsum '.repeat(875_000) })]);
  return flood(context, 4, () => generate(context, body));
}

/** Uploads `pdf` (from 127.0.0.1 unless `fetcher` is another address's); the document id, or the outcome when refused. */
export async function upload(url: string, pdf: Uint8Array, name = 'attack.pdf', fetcher: typeof fetch = fetch): Promise<{ documentId?: string; outcome: string }> {
  const { body, contentType } = await multipartUpload(pdf, name);
  try {
    const response = await fetcher(`${url}/v1/documents`, {
      method: 'POST',
      body,
      headers: { 'content-type': contentType },
      signal: AbortSignal.timeout(120_000),
    });
    const text = await response.text();
    const code = /"code":"([A-Z_]+)"/.exec(text)?.[1];
    const documentId = /"documentId":"([^"]+)"/.exec(text)?.[1];
    return { ...(documentId === undefined ? {} : { documentId }), outcome: code === undefined ? String(response.status) : `${response.status} ${code}` };
  } catch (error) {
    return { outcome: `network ${error instanceof Error ? error.name : 'error'}` };
  }
}

/**
 * `pdf` as a multipart body in the field `file`, encoded by the platform's own FormData. Sent as bytes
 * with its content type: the npm undici that `fetchFrom` uses does not take the platform's FormData
 * (another class) and sent it as the text `[object FormData]`, which the service answered 415.
 */
async function multipartUpload(pdf: Uint8Array, name: string): Promise<{ body: Uint8Array<ArrayBuffer>; contentType: string }> {
  const form = new FormData();
  form.append('file', new Blob([Uint8Array.from(pdf)], { type: 'application/pdf' }), name);
  const encoded = new Response(form);
  return { body: new Uint8Array(await encoded.arrayBuffer()), contentType: encoded.headers.get('content-type') ?? '' };
}

/** Job-slot flooding: eight loops creating jobs over one small document as fast as answers come. */
export async function jobFlood(context: AttackContext, pdf: Uint8Array): Promise<Outcomes> {
  const { documentId, outcome } = await upload(context.url, pdf);
  if (documentId === undefined) return { [`upload ${outcome}`]: 1 };
  const body = JSON.stringify({ documentId });
  return flood(context, 8, () =>
    fetch(`${context.url}/v1/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gpt-key': context.hostileKey }, body }),
  );
}

/** Raw sockets sending `text` one byte every `everyMs` until the deadline; counts those the server closed. */
async function trickleSockets(context: AttackContext, sockets: number, text: string, everyMs: number, first = ''): Promise<Outcomes> {
  const address = new URL(context.url);
  const open: Socket[] = [];
  const outcomes: Outcomes = {};
  let closedByServer = 0;
  let answered408 = 0;
  for (let index = 0; index < sockets; index += 1) {
    const socket = connect(Number(address.port), address.hostname);
    socket.on('error', () => undefined);
    if (first !== '') socket.write(first);
    let position = 0;
    const timer = setInterval(() => {
      if (socket.destroyed || position >= text.length) return;
      socket.write(text[position] ?? '');
      position += 1;
    }, everyMs);
    socket.on('data', (chunk: Buffer) => {
      if (chunk.toString().startsWith('HTTP/1.1 408')) answered408 += 1;
    });
    socket.on('close', () => {
      clearInterval(timer);
      if (Date.now() < context.deadline) closedByServer += 1;
    });
    open.push(socket);
  }
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, context.deadline - Date.now())));
  for (const socket of open) socket.destroy();
  outcomes[`sockets ${sockets}`] = sockets;
  outcomes['closed by the server before the end'] = closedByServer;
  outcomes['408 REQUEST_TIMEOUT'] = answered408;
  return outcomes;
}

/** Slowloris: 200 sockets trickling headers and 50 trickling a request body, a byte every 500 ms each. */
export async function slowClients(context: AttackContext): Promise<Outcomes> {
  const headers = `GET /healthz HTTP/1.1\r\nHost: x\r\n${'x-slow: loris\r\n'.repeat(200)}\r\n`;
  const body = JSON.stringify({ task: 'notes', text: 'x'.repeat(100_000) });
  const bodyRequest = `POST /v1/generate HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\nx-gpt-key: ${context.hostileKey}\r\ncontent-length: ${body.length}\r\n\r\n`;
  const [headerSockets, bodySockets] = await Promise.all([
    trickleSockets(context, 200, headers, 500),
    // The headers go at once; then the body trickles.
    trickleSockets(context, 50, body, 500, bodyRequest),
  ]);
  return { ...prefix('headers: ', headerSockets), ...prefix('bodies: ', bodySockets) };
}

function prefix(label: string, outcomes: Outcomes): Outcomes {
  return Object.fromEntries(Object.entries(outcomes).map(([key, value]) => [`${label}${key}`, value]));
}

/** 200 clients open the live breaker stream and never read a byte after its status line. */
export async function nonReadingSse(context: AttackContext): Promise<Outcomes> {
  const address = new URL(context.url);
  const sockets: Socket[] = [];
  const outcomes: Outcomes = {};
  let closedByServer = 0;
  for (let index = 0; index < 200; index += 1) {
    const socket = connect(Number(address.port), address.hostname);
    socket.on('error', () => undefined);
    socket.write('GET /v1/providers/events HTTP/1.1\r\nHost: x\r\n\r\n');
    // The first bytes say whether the stream was opened or refused; nothing is read after them.
    socket.once('data', (chunk: Buffer) => {
      socket.pause();
      const text = chunk.toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 'unreadable';
      const code = /"code":"([A-Z_]+)"/.exec(text)?.[1];
      const key = `streams: ${status}${code === undefined ? '' : ` ${code}`}`;
      outcomes[key] = (outcomes[key] ?? 0) + 1;
    });
    socket.on('close', () => {
      if (Date.now() < context.deadline) closedByServer += 1;
    });
    sockets.push(socket);
  }
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, context.deadline - Date.now())));
  for (const socket of sockets) socket.destroy();
  return { ...outcomes, 'closed by the server before the end': closedByServer };
}

/**
 * Uploads from `loops` loops until the deadline, from an address of their own (127.0.0.10 unless told:
 * the steady client's address keeps its own upload rate, and each attack its own), each upload the next of `pdfs`.
 */
export async function pdfFlood(context: AttackContext, pdfs: Uint8Array | readonly Uint8Array[], loops = 2, localAddress = '127.0.0.10'): Promise<Outcomes> {
  const list = pdfs instanceof Uint8Array ? [pdfs] : pdfs;
  const client = fetchFrom(localAddress);
  const outcomes: Outcomes = {};
  let next = 0;
  const loop = async (): Promise<void> => {
    while (Date.now() < context.deadline) {
      const pdf = list[next % list.length] as Uint8Array;
      next += 1;
      count(outcomes, (await upload(context.url, pdf, 'attack.pdf', client.fetch)).outcome);
    }
  };
  try {
    await Promise.all(Array.from({ length: loops }, loop));
  } finally {
    await client.close();
  }
  return outcomes;
}

/**
 * What the victim itself got from something besides its steady requests (an upload, a job), as an
 * outcome label: `victim ok: …` or `victim FAILED: …`. The bench counts the failed ones as victim errors.
 */
export const victimFailed = 'victim FAILED: ';
function victimOutcome(ok: boolean, what: string): string {
  return `${ok ? 'victim ok: ' : victimFailed}${what}`;
}

/**
 * The PDF queue taken by one address (was: 18 small PDFs of ~4 s each from one address filled the worker
 * and its 16-slot queue, and every other address got 503 PDF_EXTRACTOR_BUSY for a minute): 18 loops from
 * 127.0.0.11 upload `slowPdf`, while the victim (127.0.0.1) uploads `victimPdf` every 2 s: each must be 201.
 */
export async function pdfQueueFlood(context: AttackContext, slowPdf: Uint8Array, victimPdf: Uint8Array): Promise<Outcomes> {
  const victim: Outcomes = {};
  const victimLoop = async (): Promise<void> => {
    // The flood fills the queue first.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    while (Date.now() < context.deadline) {
      const { outcome } = await upload(context.url, victimPdf, 'victim.pdf');
      count(victim, victimOutcome(outcome === '201', `upload ${outcome}`));
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  };
  const [flood] = await Promise.all([pdfFlood(context, slowPdf, 18, '127.0.0.11'), victimLoop()]);
  return { ...flood, ...victim };
}

// ---------------------------------------------------------------- hostile PDFs, built at run time

/** A PDF from numbered object bodies (object n is `objects[n - 1]`), with a correct xref table. */
function assemblePdf(objects: readonly (string | Buffer)[], rootObject = 1): Buffer {
  const chunks: Buffer[] = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
  const offsets: number[] = [];
  let length = chunks[0]?.length ?? 0;
  objects.forEach((body, index) => {
    offsets.push(length);
    const part = Buffer.concat([Buffer.from(`${index + 1} 0 obj\n`, 'latin1'), typeof body === 'string' ? Buffer.from(body, 'latin1') : body, Buffer.from('\nendobj\n', 'latin1')]);
    chunks.push(part);
    length += part.length;
  });
  const xref = [`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`, ...offsets.map((offset) => `${String(offset).padStart(10, '0')} 00000 n \n`)].join('');
  chunks.push(Buffer.from(`${xref}trailer\n<< /Size ${objects.length + 1} /Root ${rootObject} 0 R >>\nstartxref\n${length}\n%%EOF\n`, 'latin1'));
  return Buffer.concat(chunks);
}

function streamObject(dictionary: string, data: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`<< ${dictionary} /Length ${data.length} >>\nstream\n`, 'latin1'), data, Buffer.from('\nendstream', 'latin1')]);
}

async function deflate(parts: AsyncIterable<Buffer> | Iterable<Buffer>): Promise<Buffer> {
  const deflater = createDeflate({ level: 9 });
  const out: Buffer[] = [];
  deflater.on('data', (chunk: Buffer) => out.push(chunk));
  const ended = new Promise<void>((resolve, reject) => {
    deflater.on('end', () => resolve());
    deflater.on('error', reject);
  });
  for await (const part of parts) {
    if (!deflater.write(part)) await new Promise((resolve) => deflater.once('drain', resolve));
  }
  deflater.end();
  await ended;
  return Buffer.concat(out);
}

const font = '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>';

/** 50 pages that all point at one compressed content stream of ~200 000 text-show operators. */
export async function sharedContentPdf(pages = 50): Promise<Buffer> {
  const operators = Buffer.from(`BT /F1 1 Tf ${'(x) Tj 0 0 Td '.repeat(200_000)}ET`, 'latin1');
  const content = streamObject('/Filter /FlateDecode', await deflate([operators]));
  const pageIds = Array.from({ length: pages }, (_, index) => 5 + index);
  const objects: (string | Buffer)[] = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(' ')}] /Count ${pages} >>`,
    font,
    content,
    ...pageIds.map(() => '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>'),
  ];
  return assemblePdf(objects);
}

/** One page whose content stream inflates to `gigabytes` GB of zeros (about 1 MB compressed per GB). */
export async function flateBombPdf(gigabytes = 1): Promise<Buffer> {
  const zeros = Buffer.alloc(1024 * 1024);
  function* chunks(): Generator<Buffer> {
    for (let index = 0; index < 1024 * gigabytes; index += 1) yield zeros;
  }
  const content = streamObject('/Filter /FlateDecode', await deflate(chunks()));
  return assemblePdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [4 0 R] /Count 1 >>',
    content,
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R >>',
  ]);
}

/** A page tree that claims 2^30 pages and holds one. */
export function hugePageCountPdf(): Buffer {
  const content = streamObject('', Buffer.from('BT /F1 12 Tf 72 712 Td (One real page of text.) Tj ET', 'latin1'));
  return assemblePdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [5 0 R] /Count ${2 ** 30} >>`,
    font,
    content,
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>',
  ]);
}

// ---------------------------------------------------------------- attacks from an address of their own

/**
 * A fetch from `localAddress` (127.0.0.2 and up: Linux routes all of 127/8 to loopback), so that the
 * per-address limits see the hostile client apart from the steady one (127.0.0.1).
 */
export function fetchFrom(localAddress: string): { fetch: typeof fetch; close(): Promise<void> } {
  // undici's connector drops `localAddress`: the socket is made here (a run at 09:2x UTC sent every
  // fetch-based attack from 127.0.0.1, the steady client's own address).
  const agent = new Agent({
    connections: 256,
    connect: (options, callback) => {
      const socket = connect({ host: options.hostname, port: Number(options.port), localAddress });
      socket.once('connect', () => callback(null, socket));
      socket.once('error', (error) => callback(error, null));
      return socket;
    },
  });
  return {
    fetch: ((input: string | URL, init?: RequestInit) =>
      undiciFetch(input, { ...(init as object), ...(init?.body instanceof FormData ? { body: undiciForm(init.body) } : {}), dispatcher: agent } as never)) as unknown as typeof fetch,
    close: () => agent.close(),
  };
}

/**
 * The same form as undici's own FormData: undici's fetch (the npm package, not Node's built-in one) sends a
 * global FormData as the text `[object FormData]`, and every upload from another address was refused 415.
 */
function undiciForm(form: FormData): UndiciFormData {
  const copy = new UndiciFormData();
  for (const [name, value] of form.entries()) {
    if (typeof value === 'string') copy.append(name, value);
    else copy.append(name, value, value.name);
  }
  return copy;
}

/** A new made-up key for every request: each would be a new client if clients were only their keys. */
let inventedKeys = 0;
function inventedKey(): string {
  inventedKeys += 1;
  return `bench-invented-key-${String(inventedKeys).padStart(8, '0')}`;
}

/** `workers` loops sending `send(fetch)` from `localAddress` until the deadline. */
export async function floodFrom(context: AttackContext, localAddress: string, workers: number, send: (fetcher: typeof fetch) => Promise<Response>): Promise<Outcomes> {
  const client = fetchFrom(localAddress);
  try {
    return await flood(context, workers, () => send(client.fetch));
  } finally {
    await client.close();
  }
}

/** 2 MB of `[` (a million deep), a new key each, four connections (was: /healthz p99 10.2 s, RSS 949 MB). */
export function nestedJson(context: AttackContext): Promise<Outcomes> {
  const body = new Blob(['['.repeat(2_000_000)]);
  return floodFrom(context, '127.0.0.2', 4, (fetcher) =>
    fetcher(`${context.url}/v1/generate`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gpt-key': inventedKey() }, body }),
  );
}

/** 32 connections of generations, a new key per request (was: 244–389 provider calls a second, victim p99 +330 ms). */
export function inventedKeyGenerations(context: AttackContext): Promise<Outcomes> {
  const body = JSON.stringify({ task: 'notes', text: 'Photosynthesis turns light into chemical energy in the chloroplast.', options: { lang: 'en' } });
  return floodFrom(context, '127.0.0.3', 32, (fetcher) =>
    fetcher(`${context.url}/v1/generate`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gpt-key': inventedKey() }, body }),
  );
}

/**
 * Eight loops creating jobs, a new key per job, from one address (was: a victim's job waited 64 s and
 * > 150 s, normally < 1 s). A second in, the victim (127.0.0.1, its own key) starts one job on its own
 * document and waits for it: it must succeed within 10 s.
 */
export async function inventedKeyJobs(context: AttackContext, pdf: Uint8Array, victimKey: string): Promise<Outcomes> {
  const hostile = fetchFrom('127.0.0.4');
  const { documentId, outcome } = await upload(context.url, pdf, 'attack.pdf', hostile.fetch);
  await hostile.close();
  if (documentId === undefined) return { [`upload ${outcome}`]: 1 };
  const body = JSON.stringify({ documentId });
  const [flood, victim] = await Promise.all([
    floodFrom(context, '127.0.0.4', 8, (fetcher) =>
      fetcher(`${context.url}/v1/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gpt-key': inventedKey() }, body }),
    ),
    victimJob(context, pdf, victimKey),
  ]);
  return { ...flood, [victim]: 1 };
}

/** The victim's one job, started a second into the attack: its outcome label with the time it took. */
export async function victimJob(context: AttackContext, pdf: Uint8Array, key: string): Promise<string> {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const { documentId, outcome } = await upload(context.url, pdf, 'victim.pdf');
  if (documentId === undefined) return victimOutcome(false, `upload ${outcome}`);
  const started = Date.now();
  const headers = { 'content-type': 'application/json', 'x-gpt-key': key };
  const created = await fetch(`${context.url}/v1/jobs`, { method: 'POST', headers, body: JSON.stringify({ documentId }) });
  const { jobId } = (await created.json()) as { jobId?: string };
  if (created.status !== 202 || jobId === undefined) return victimOutcome(false, `job ${created.status}`);
  const giveUp = Math.max(context.deadline, started + 10_000) + 20_000;
  while (Date.now() < giveUp) {
    const view = (await (await fetch(`${context.url}/v1/jobs/${jobId}`, { headers })).json()) as { status?: string };
    if (view.status !== 'queued' && view.status !== 'running') {
      const seconds = (Date.now() - started) / 1000;
      return victimOutcome(view.status === 'succeeded' && seconds <= 10, `job ${view.status ?? 'unreadable'} in ${Math.ceil(seconds)} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return victimOutcome(false, 'job not done in time');
}

/** Candidate keys checked as fast as answers come, 16 connections (was: 9,300 a second). */
export function keyStatusFlood(context: AttackContext): Promise<Outcomes> {
  return floodFrom(context, '127.0.0.5', 16, (fetcher) => fetcher(`${context.url}/v1/keys/status`, { headers: { 'x-gpt-key': inventedKey() } }));
}

/**
 * `count` connections from one address, each a POST whose body never finishes, held to the deadline
 * (was: 22,000 of them used up the file limit and every other client's connections were reset).
 */
export async function connectionFlood(context: AttackContext, count = 15_000): Promise<Outcomes> {
  const address = new URL(context.url);
  const sockets: Socket[] = [];
  let connected = 0;
  let failed = 0;
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const socket = connect({ port: Number(address.port), host: address.hostname, localAddress: '127.0.0.6' });
      sockets.push(socket);
      socket.once('connect', () => {
        connected += 1;
        socket.write('POST /v1/generate HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"task":');
        resolve();
      });
      socket.once('error', () => {
        failed += 1;
        resolve();
      });
      socket.once('close', () => resolve());
    });
  for (let started = 0; started < count && Date.now() < context.deadline; started += 500) await Promise.all(Array.from({ length: Math.min(500, count - started) }, one));
  const openAfterFlood = sockets.filter((socket) => !socket.destroyed).length;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, context.deadline - Date.now())));
  for (const socket of sockets) socket.destroy();
  return { [`connections tried ${count}`]: count, connected, failed, 'still open after the flood': openAfterFlood };
}

/** The notes of a 7 MB Anthropic answer: valid material whose summary is padded to `bytes`. */
export function bigAnswerBody(bytes = 7 * 1024 * 1024): unknown {
  const notes = {
    keyConcepts: [{ id: 'c1', term: 'Photosynthesis', definition: 'How plants turn light into chemical energy.', importance: 'high' }],
    sections: [{ title: 'Light', summary: `Plants capture light. ${'Chlorophyll absorbs light in the chloroplast. '.repeat(Math.ceil(bytes / 46))}`, bullets: ['Light is captured.'] }],
    glossary: [{ term: 'Chlorophyll', definition: 'The green pigment that absorbs light.' }],
  };
  return {
    id: 'msg_bench_big',
    type: 'message',
    role: 'assistant',
    model: 'claude-bench',
    content: [{ type: 'text', text: JSON.stringify(notes) }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 100, output_tokens: 4000 },
  };
}

/**
 * Sixteen generations at a time whose provider (Claude; the emulator's `respond` fault, set by the bench)
 * answers 7 MB of valid notes (was: /healthz up to 6.8 s, RSS 122 → 613 MB, and the 7 MB answer served).
 */
export function bigAnswers(context: AttackContext): Promise<Outcomes> {
  const body = JSON.stringify({ task: 'notes', text: 'Photosynthesis turns light into chemical energy.', providers: ['claude'], options: { lang: 'en' } });
  return floodFrom(context, '127.0.0.7', 16, (fetcher) =>
    fetcher(`${context.url}/v1/generate`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-claude-key': 'bench-big-answer-claude-key-0001' }, body }),
  );
}

// ---------------------------------------------------------------- upload bodies and amplifying PDFs

/** An upload's multipart body, encoded before the measured window. */
export type EncodedUpload = Awaited<ReturnType<typeof multipartUpload>>;

/** `pdf` as the multipart body of an upload (encode a big one once, outside the window). */
export function encodeUpload(pdf: Uint8Array, name = 'big.pdf'): Promise<EncodedUpload> {
  return multipartUpload(pdf, name);
}

/**
 * `uploads` uploads of one encoded body at once from one address, each loop sending at least one and
 * again as each is answered until the deadline (was: 30 uploads of 19.5 MB took the service's RSS to
 * 1.41–1.52 GB, each body held whole before the queue or the address's share was looked at). The body
 * is encoded once, before the window, so the bench's own process does not spend the window encoding
 * 20 MB (a run that encoded inside it started 9 of the 30 before the deadline).
 */
export async function uploadBodyFlood(context: AttackContext, upload: EncodedUpload, uploads = 30, localAddress = '127.0.0.20'): Promise<Outcomes> {
  const outcomes: Outcomes = {};
  const loop = async (): Promise<void> => {
    do count(outcomes, await postBody(new URL('/v1/documents', context.url), localAddress, upload));
    while (Date.now() < context.deadline);
  };
  await Promise.all(Array.from({ length: uploads }, loop));
  return outcomes;
}

/**
 * POSTs `upload` through node:http from `localAddress` and returns its outcome label (as `outcomeOf`). Not
 * through fetch: undici's fetch copies a byte body per request, and re-sending the refused 20 MB uploads took
 * this process (the hostile client) 8.5-8.8 s of CPU in an 8 s window, a core of the two the service and the
 * victim share, where a real attacker's CPU is its own. node:http hands the one buffer to the socket as it is.
 */
function postBody(url: URL, localAddress: string, upload: EncodedUpload): Promise<string> {
  return new Promise((resolve) => {
    let status: number | undefined;
    let text = '';
    const label = (): string => answerLabel(status, text);
    const request = httpRequest(
      {
        host: url.hostname,
        port: Number(url.port),
        path: url.pathname,
        method: 'POST',
        localAddress,
        agent: false,
        timeout: 120_000,
        headers: { 'content-type': upload.contentType, 'content-length': upload.body.byteLength },
      },
      (response) => {
        status = response.statusCode;
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          if (text.length < 4096) text += chunk;
        });
        response.on('end', () => resolve(label()));
        response.on('error', () => resolve(label()));
      },
    );
    request.on('timeout', () => request.destroy(new Error('timeout')));
    // A refusal closes the connection while the body is still being sent: the answer read is the outcome.
    request.on('error', (error: NodeJS.ErrnoException) => resolve(status === undefined ? `network ${error.code ?? error.message}` : label()));
    request.end(upload.body);
  });
}

/** A real two-page PDF grown to `bytes` by an unreferenced stream of random bytes (an image-heavy upload's size). */
export async function paddedPdf(bytes: number): Promise<Uint8Array> {
  const { PDFDocument, StandardFonts } = await import('pdf-lib');
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  for (let page = 1; page <= 2; page += 1) pdf.addPage([595, 842]).drawText(`Padded upload, page ${page}.`, { x: 50, y: 780, size: 12, font });
  const { randomBytes } = await import('node:crypto');
  pdf.context.register(pdf.context.stream(randomBytes(Math.max(0, bytes - 4096))));
  return pdf.save({ useObjectStreams: false });
}
