import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { sseWriter } from '../../src/http/sse.js';

const servers: Server[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
});

describe('sseWriter (every event stream writes through it: /v1/jobs/:id/events, /v1/providers/events)', () => {
  it('drops a client that does not read once more than the bound is queued for it, and says so once', async () => {
    const bound = 8192;
    let drops = 0;
    let refusedAfterDrop = 0;
    let maxQueued = 0;
    const finished = new Promise<void>((resolve) => {
      const server = createServer((_request, response) => {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        const sse = sseWriter(response, bound, () => {
          drops += 1;
        });
        const chunk = { text: 'x'.repeat(1000) };
        const push = (): void => {
          for (let index = 0; index < 50; index += 1) {
            if (!sse.event('progress', chunk)) {
              // Once dropped, every further write is refused without queueing anything.
              if (!sse.event('progress', chunk)) refusedAfterDrop += 1;
              resolve();
              return;
            }
            maxQueued = Math.max(maxQueued, response.writableLength);
          }
          setImmediate(push);
        };
        push();
      });
      servers.push(server);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        if (address === null || typeof address === 'string') return;
        const client = connect(address.port, '127.0.0.1');
        client.on('error', () => undefined);
        client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
        // Never reads a byte.
        client.pause();
      });
    });
    await finished;
    expect(drops).toBe(1);
    expect(refusedAfterDrop).toBe(1);
    // What was ever queued stayed within the bound plus one event (the write that crossed it).
    expect(maxQueued).toBeLessThanOrEqual(bound + 1100);
  });
});
