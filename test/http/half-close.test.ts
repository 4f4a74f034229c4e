/**
 * A refusal reaches a client that has finished sending. A client that sends a JSON body over
 * the route's limit and then half-closes its socket (FIN after the last byte) must still read its
 * 413 `REQUEST_TOO_LARGE`, though the refusal is held back REFUSAL_DELAY_MS: the socket stays open for
 * the answer. The real service on loopback, a raw TCP client.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startService, type Service } from '../../src/http/service.js';

let service: Service;
let port: number;

beforeAll(async () => {
  // MAX_TEXT_CHARS 200 000 (the default): /v1/generate's body limit is 200 000 × 6 + 1 MiB ≈ 2.2 MiB.
  service = await startService(loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', REFUSAL_DELAY_MS: '300' }));
  port = Number(new URL(service.url).port);
});

afterAll(async () => {
  await service.close();
});

/** Writes `head` then `body` at once, half-closes, and resolves with everything read until the server closes. */
function sendAndHalfClose(head: string, body: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (data: Buffer) => {
      answer += data.toString('latin1');
    });
    // The server may stop reading the rest of the body: the client's late writes fail, the answer stands.
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(answer));
    socket.setTimeout(10_000, () => {
      socket.destroy();
      reject(new Error('no close within 10 s'));
    });
    socket.write(head);
    socket.write(body);
    socket.end();
  });
}

/** A chunked body of `megabytes` MiB: one JSON object whose text field is `a`s. */
function chunkedJson(megabytes: number): Buffer {
  const text = Buffer.alloc(megabytes * 1024 * 1024, 'a');
  const json = Buffer.concat([Buffer.from('{"task":"notes","text":"'), text, Buffer.from('"}')]);
  return Buffer.concat([Buffer.from(`${json.length.toString(16)}\r\n`), json, Buffer.from('\r\n0\r\n\r\n')]);
}

describe('a client that finished sending and half-closed', () => {
  it('gets the 413 for a chunked JSON body over the limit, though the refusal is held back', async () => {
    const head =
      'POST /v1/generate HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n' +
      'Transfer-Encoding: chunked\r\nx-claude-key: test-claude-key-0001-halfclose\r\n\r\n';
    const answer = await sendAndHalfClose(head, chunkedJson(3));
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
    expect(answer).toContain('"code":"REQUEST_TOO_LARGE"');
  });

  it('gets the answer to a whole request it sent before its FIN', async () => {
    const answer = await sendAndHalfClose('GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n', Buffer.alloc(0));
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  });
});
