/**
 * A request refused on its headers (here: past its address's upload rate) before a byte of its body was
 * read is answered with `Connection: close`, and the rest of its body is not read: kept alive, Node reads an
 * unread body to its end to throw it away, at full speed, so a flood of refused 19 MB uploads cost the
 * service the whole of every body anyway.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../http/blackbox-support.js';

let harness: Harness;

beforeAll(async () => {
  harness = await startHarness({ RATE_LIMIT_UPLOADS: '1', MAX_UPLOAD_MB: '20' });
});

afterAll(async () => {
  await harness.close();
});

/** Sends a 19 MB upload as fast as the socket takes it; answers what came back and how much of the body the socket took. */
async function floodUpload(): Promise<{ answer: string; accepted: number; declared: number }> {
  const { hostname, port } = new URL(harness.url);
  const boundary = 'refusedbodyboundary';
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.pdf"\r\nContent-Type: application/pdf\r\n\r\n%PDF-1.7\n`;
  const declared = 19 * 1024 * 1024;
  const socket = connect(Number(port), hostname);
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  let answer = '';
  socket.on('data', (data: Buffer) => {
    answer += data.toString('latin1');
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(`POST /v1/documents HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${declared}\r\n\r\n${head}`);
  const chunk = Buffer.alloc(64 * 1024, 0x41);
  let accepted = head.length;
  let open = true;
  void closed.then(() => {
    open = false;
  });
  while (open && accepted + chunk.length <= declared) {
    const flushed = socket.write(chunk);
    accepted += chunk.length;
    if (!flushed) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), closed, new Promise((resolve) => setTimeout(resolve, 2_000))]);
  }
  await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  socket.destroy();
  return { answer, accepted, declared };
}

describe('a request refused before its body is read', () => {
  it('is answered at once with Connection: close, and the server stops reading what the client still sends', async () => {
    // The address's one upload of the window: a non-PDF, refused 415 after its (small) body was read.
    const form = new FormData();
    form.append('file', new Blob(['just text']), 'notes.txt');
    const first = await fetch(`${harness.url}/v1/documents`, { method: 'POST', body: form });
    expect(first.status).toBe(415);
    const flood = await floodUpload();
    expect(flood.answer).toMatch(/^HTTP\/1\.1 429 /u);
    expect(flood.answer.toLowerCase()).toContain('connection: close');
    expect(flood.answer).toContain('"code":"TOO_MANY_REQUESTS"');
    // Closed by the server while the client was still sending: far from the whole 19 MB went in (what
    // did fits the two sides' socket buffers).
    expect(flood.accepted).toBeLessThan(flood.declared / 2);
  }, 60_000);

  it('keeps the connection of a refused request whose body is small: it is read and dropped', async () => {
    const { hostname, port } = new URL(harness.url);
    const boundary = 'smallbodyboundary';
    const body = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.pdf"\r\nContent-Type: application/pdf\r\n\r\n%PDF-1.7\n${'A'.repeat(1000)}\r\n--${boundary}--\r\n`;
    const socket = connect(Number(port), hostname);
    socket.on('error', () => {});
    let answer = '';
    const twoAnswers = new Promise<void>((resolve) => {
      socket.on('data', (data: Buffer) => {
        answer += data.toString('latin1');
        if ((answer.match(/HTTP\/1\.1 /gu) ?? []).length >= 2) resolve();
      });
    });
    const upload = `POST /v1/documents HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    socket.write(upload);
    socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await Promise.race([twoAnswers, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    socket.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 429 /u);
    expect(answer.toLowerCase()).not.toContain('connection: close');
    expect(answer).toMatch(/HTTP\/1\.1 200 /u);
  }, 30_000);
});
