/**
 * Each address's share of the upload body bytes the main thread reads (UPLOAD_MB_PER_SECOND,
 * UPLOAD_BURST_MB). Thirty 19.5 MB uploads from one address were multipart-split, hashed and written at the
 * socket's full speed, and every other client's latency rose. The rules tested here, through real HTTP from
 * distinct loopback addresses (the server's own count of the bytes it read from each connection is the
 * measure, never a duration):
 * - an address's uploads take their body bytes from its bucket as they are parsed; past the bucket, no more
 *   of them is read than it refills, while another address's upload is read whole at once;
 * - an upload that could not arrive within the request deadline at that rate (with what the address's other
 *   uploads still owe) is refused 429 TOO_MANY_REQUESTS with Retry-After before its body is read;
 * - a paced upload whose place in the PDF queue another address takes is answered 503 at once, its body not
 *   read on, and the other address's upload is served;
 * - an upload over MAX_UPLOAD_MB is answered 413 on its declared length, or as soon as its file passes the
 *   limit, never read to its end;
 * - the table of buckets holds at most 10 000 addresses, and keeps an address's bucket while its uploads are
 *   in flight.
 */
import { IncomingMessage } from 'node:http';
import { connect, Socket, type AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { createUploadShare } from '../../src/http/upload-share.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { staticGateway, testConfig } from '../http/support.js';

const mebibyte = 1024 * 1024;

const apps: FastifyInstance[] = [];
const clients: Socket[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.destroy();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

interface Served {
  readonly port: number;
  readonly app: FastifyInstance;
  /** Bytes the server has read from the connection of the client at `localPort` (its `bytesRead`). */
  readBy(localPort: number): number;
}

/**
 * The service with an upload share of `mbPerSecond` MiB a second and `burstMb` deep, MAX_UPLOAD_MB 1 and
 * REQUEST_TIMEOUT_MS 90 s: an admitted upload has 80 s (the headers' 10 s are taken off), in which the
 * shares below carry more than one upload of 1 MiB, so the bucket is never raised.
 */
async function listen(mbPerSecond: number, burstMb: number): Promise<Served> {
  const app = await buildApp({
    config: testConfig({ REFUSAL_DELAY_MS: '0', MAX_UPLOAD_MB: '1', RATE_LIMIT_UPLOADS: '0', UPLOAD_MB_PER_SECOND: String(mbPerSecond), UPLOAD_BURST_MB: String(burstMb), PDF_WORKERS: '1' }),
    gateway: staticGateway(),
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
  });
  apps.push(app);
  const sockets = new Map<number, Socket>();
  app.server.on('connection', (socket: Socket) => sockets.set(socket.remotePort ?? 0, socket));
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { port: (app.server.address() as AddressInfo).port, app, readBy: (localPort) => sockets.get(localPort)?.bytesRead ?? 0 };
}

interface Answer {
  readonly status: number;
  readonly head: string;
  readonly body: { error?: { code?: string; message?: string; retryAfterSeconds?: number } };
}

interface Upload {
  /** The client's port: the server's connection of this upload (`readBy`). */
  readonly localPort: number;
  /** Bytes of the request: head and declared body. */
  readonly declared: number;
  /** The answer, once the server has sent it (the client stops sending then). */
  readonly answer: Promise<Answer>;
}

/**
 * `POST /v1/documents` from `from` of a form whose file is `file`, sent as fast as the socket takes it.
 * The body's length is declared.
 */
async function upload(port: number, from: string, file: Uint8Array): Promise<Upload> {
  const boundary = 'uploadshareboundary';
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.pdf"\r\nContent-Type: application/pdf\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const body = Buffer.concat([head, file, tail]);
  const socket = connect({ host: '127.0.0.1', port, localAddress: from });
  clients.push(socket);
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  let text = '';
  const answer = new Promise<Answer>((resolve) => {
    const settle = (): void => {
      const at = text.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/iu.exec(text)?.[1];
      if (at < 0 || length === undefined || text.length < at + 4 + Number(length)) return;
      sending = false;
      resolve({ status: Number(text.slice(9, 12)), head: text.slice(0, at), body: JSON.parse(text.slice(at + 4, at + 4 + Number(length))) as Answer['body'] });
    };
    socket.on('data', (data: Buffer) => {
      text += data.toString('latin1');
      settle();
    });
  });
  let sending = true;
  const requestHead = `POST /v1/documents HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${body.length}\r\n\r\n`;
  socket.write(requestHead);
  void (async () => {
    for (let at = 0; at < body.length && sending && !socket.destroyed; at += 64 * 1024) {
      if (!socket.write(body.subarray(at, at + 64 * 1024))) await new Promise((resolve) => socket.once('drain', resolve));
    }
  })();
  return { localPort: socket.localPort ?? 0, declared: requestHead.length + body.length, answer };
}

/** `bytes` bytes that are not a PDF: read whole, then refused 415 (no extraction). */
function notPdf(bytes: number): Uint8Array {
  return new Uint8Array(bytes).fill(0x41);
}

describe("an address's share of upload bytes", () => {
  it("reads no more of an address's uploads than its bucket and refill allow, while another address's upload is read whole", async () => {
    // 0.015 MiB a second, 1.2 MiB deep.
    const rate = 0.015 * mebibyte;
    const burst = 1.2 * mebibyte;
    const served = await listen(0.015, 1.2);
    const startedAt = performance.now();
    // 1 MB at full speed takes most of 127.0.0.2's bucket; the next 1 MB then waits on the refill
    // (admitted: its 0.75 MB past the bucket take 47 s at 0.015 MiB a second, within the 80 s it has).
    const first = await upload(served.port, '127.0.0.2', notPdf(1_000_000));
    expect((await first.answer).status).toBe(415);
    const held = await upload(served.port, '127.0.0.2', notPdf(1_000_000));
    // Another address: its own full bucket, its 1 MB read whole and answered.
    const other = await upload(served.port, '127.0.0.3', notPdf(1_000_000));
    const otherAnswer = await other.answer;
    expect(otherAnswer.status).toBe(415);
    expect(otherAnswer.body.error?.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(served.readBy(other.localPort)).toBe(other.declared);
    // Meanwhile the server read from 127.0.0.2 no more than its bucket and what refilled since the start
    // (wall time only widens the bound), plus the socket reads the bucket may run into debt by (one each
    // time it stops reading; three allowed); the rest of its second upload is still unread.
    const elapsedSeconds = (performance.now() - startedAt) / 1000;
    const allowed = burst + rate * elapsedSeconds + 3 * 64 * 1024;
    expect(served.readBy(first.localPort) + served.readBy(held.localPort)).toBeLessThanOrEqual(allowed);
    expect(served.readBy(held.localPort)).toBeLessThan(held.declared);
    // The held upload was made to wait once, the others never: no refusal counts it, the pace counter does.
    const metrics = (await served.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/^studyhelper_paced_total\{pace="upload_bytes"\} 1$/mu);
    expect(metrics).not.toMatch(/^studyhelper_refusals_total\{[^}]*what="upload_bytes"/mu);
  }, 30_000);

  it('refuses 429 with Retry-After, unread, an upload that would make the address\'s uploads miss their deadline', async () => {
    const rate = 0.015 * mebibyte;
    const burst = 1.2 * mebibyte;
    const served = await listen(0.015, 1.2);
    // 1 MB at full speed, then 1 MB paced: admitted, it arrives in 47 s.
    const first = await upload(served.port, '127.0.0.4', notPdf(1_000_000));
    expect((await first.answer).status).toBe(415);
    const inFlight = await upload(served.port, '127.0.0.4', notPdf(1_000_000));
    // One more 1 MB: the two would have arrived only after 0.015 MiB a second had refilled 1.7 MB (~110 s),
    // past the 80 s of the upload in flight. Refused at once, before its body is read.
    const refused = await upload(served.port, '127.0.0.4', notPdf(1_000_000));
    const answer = await refused.answer;
    expect(answer.status).toBe(429);
    expect(answer.body.error?.code).toBe('TOO_MANY_REQUESTS');
    expect(answer.body.error?.message).toContain('UPLOAD_MB_PER_SECOND');
    expect(served.readBy(refused.localPort)).toBeLessThan(refused.declared / 2);
    // Retry-After: when the upload in flight will have arrived: the bytes the two first uploads sent past the
    // bucket, at the rate, less what refilled since they began (a few seconds).
    const expected = (first.declared + inFlight.declared - burst) / rate;
    const retry = answer.body.error?.retryAfterSeconds ?? 0;
    expect(retry).toBeLessThanOrEqual(Math.ceil(expected) + 1);
    expect(retry).toBeGreaterThanOrEqual(Math.floor(expected) - 10);
    expect(answer.head).toMatch(new RegExp(`\r\nretry-after: ${retry}\r\n`, 'iu'));
    // The upload in flight is still being read, at the share's pace.
    expect(served.readBy(inFlight.localPort)).toBeLessThan(inFlight.declared);
    // Counted once, under its own bound, in `studyhelper_refusals_total`.
    const metrics = (await served.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/^studyhelper_refusals_total\{limit="rate",what="upload_bytes"\} 1$/mu);
  }, 30_000);

  it("answers a paced upload whose place another address takes 503 at once, unread, and serves the other's", async () => {
    // One worker and 16 waiting: 17 places. 127.0.0.6 holds them all with 200 KB uploads paced at 0.045 MiB
    // a second once its 1 MiB bucket is spent: together they take ~70 s to arrive.
    const served = await listen(0.045, 1);
    expect((await (await upload(served.port, '127.0.0.6', notPdf(1_000_000))).answer).status).toBe(415);
    const paced: Upload[] = [];
    for (let index = 0; index < 17; index += 1) paced.push(await upload(served.port, '127.0.0.6', notPdf(200_000)));
    const answers = paced.map((held, index) => held.answer.then((answer) => ({ index, answer })));
    // Every place is held: 127.0.0.7's upload takes the newest of 127.0.0.6's.
    const pdf = await englishTextPdf(1);
    const victim = await upload(served.port, '127.0.0.7', pdf);
    const displaced = await Promise.race(answers);
    expect(displaced.answer.status).toBe(503);
    expect(displaced.answer.body.error?.code).toBe('PDF_EXTRACTOR_BUSY');
    expect(displaced.answer.head.toLowerCase()).toContain('connection: close');
    const taken = paced[displaced.index];
    expect(taken).toBeDefined();
    // Answered before its body was read on (paced, it would have taken the bucket's refill to read).
    expect(served.readBy(taken?.localPort ?? 0)).toBeLessThan(taken?.declared ?? 0);
    const victimAnswer = await victim.answer;
    expect(victimAnswer.status).toBe(201);
  }, 60_000);
});

describe('an upload over MAX_UPLOAD_MB', () => {
  it('is refused 413 on a declared length past the route\'s largest body, and at once past MAX_UPLOAD_MB while it streams, the rest unread', async () => {
    // A share far above what the test sends: nothing here is paced.
    const served = await listen(100, 100);
    // MAX_UPLOAD_MB 1: a body declared past 1 MiB and the form's 2 MiB is refused on its headers.
    const declaredOver = await upload(served.port, '127.0.0.7', notPdf(3_500_000));
    const refused = await declaredOver.answer;
    expect(refused.status).toBe(413);
    expect(refused.body.error?.code).toBe('FILE_TOO_LARGE');
    // What came with its headers, a few socket reads; not the 1 MiB a streamed file would be read to.
    expect(served.readBy(declaredOver.localPort)).toBeLessThan(512 * 1024);
    // Declared within the form's room, its file passes 1 MiB while it streams: answered then, with
    // `Connection: close`, the last 1.4 MB never read (a few socket reads of it at most).
    const streamedOver = await upload(served.port, '127.0.0.7', notPdf(2_500_000));
    const cut = await streamedOver.answer;
    expect(cut.status).toBe(413);
    expect(cut.body.error?.code).toBe('FILE_TOO_LARGE');
    expect(cut.head.toLowerCase()).toContain('connection: close');
    expect(served.readBy(streamedOver.localPort)).toBeLessThan(1_048_576 + 512 * 1024);
  }, 30_000);
});

describe('the table of upload buckets', () => {
  /** A request as the share sees it (only its `close` matters): Node's own class, on a socket never connected. */
  const request = (): IncomingMessage => new IncomingMessage(new Socket());

  it('holds at most 10 000 addresses, whatever they hold', () => {
    // Every bucket emptied (none refilled: the clock stands still), one with an upload still in flight.
    const share = createUploadShare({ bytesPerSecond: 1_000, burstBytes: 10_000, now: () => 0 });
    const held = request();
    share.admit(held, '198.51.100.1', 10_000, 60_000);
    share.pacer.fed(held, 10_000);
    for (let n = 0; n < 10_001; n += 1) {
      const sent = request();
      const release = share.admit(sent, `203.0.${Math.floor(n / 256)}.${n % 256}`, 10_000, 60_000);
      share.pacer.fed(sent, 10_000);
      release();
    }
    expect(share.size()).toBe(10_000);
  });

  it('keeps a bucket while an upload draws on it, and forgets it once released and refilled', () => {
    let now = 0;
    // 1 000 bytes a second, 10 000 deep: an emptied bucket is full again after 10 s.
    const share = createUploadShare({ bytesPerSecond: 1_000, burstBytes: 10_000, now: () => now });
    const held = request();
    const release = share.admit(held, '198.51.100.1', 5_000, 60_000);
    share.pacer.fed(held, 5_000);
    // 60 s later its bucket has refilled, and is the least recently seen; the upload still draws on it: kept.
    now = 60_000;
    share.admit(request(), '192.0.2.1', 1, 60_000)();
    expect(share.size()).toBe(2);
    // Released, it is forgotten once refilled, as is the other.
    release();
    now = 120_000;
    share.admit(request(), '192.0.2.2', 1, 60_000)();
    expect(share.size()).toBe(1);
  });
});
