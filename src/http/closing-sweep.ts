/**
 * What holds the server's close open, cleared while it closes (docs/operations.md "Shutdown"). Node closes
 * the connections that are idle when `close()` begins, then waits for the others, and stops enforcing its
 * header and request deadlines. Three kinds of connection would then hold `close()`: one that goes idle later
 * (a response that ends after shutdown began past onSend's `Connection: close`, an event stream) until the
 * client's keep-alive or ours (72 s) ends; and one whose request is still arriving (half its headers, or a
 * body trickled a byte at a time) for as long as its client likes; and one opened that has sent nothing yet,
 * which Node does not count as idle (seen holding a test's close). While the server closes, the idle ones and
 * those that sent nothing are closed at once (and as they go idle), and a request still incomplete
 * `headersTimeoutMs` after shutdown began (or after it started, if later) has its connection closed. A
 * request that has arrived is answered.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';

interface Exchange {
  /** The request the connection carries now; undefined between requests (or before the first). */
  request: IncomingMessage | undefined;
  /** When the connection opened, or its last response ended: when what it carries now began. */
  since: number;
}

/** Notes each connection's request as it goes; call `start` when the server begins to close. */
export function closingSweep(server: Server, headersTimeoutMs: number): { start(): void } {
  const exchanges = new Map<Socket, Exchange>();
  server.on('connection', (socket: Socket) => {
    exchanges.set(socket, { request: undefined, since: performance.now() });
    socket.once('close', () => exchanges.delete(socket));
  });
  server.on('request', (request: IncomingMessage, response) => {
    const exchange = exchanges.get(request.socket);
    if (exchange === undefined) return;
    exchange.request = request;
    response.once('finish', () => {
      if (exchange.request !== request) return;
      exchange.request = undefined;
      exchange.since = performance.now();
    });
  });
  return {
    start() {
      if (!server.listening) return;
      const startedAt = performance.now();
      const sweep = setInterval(() => {
        server.closeIdleConnections();
        const now = performance.now();
        for (const [socket, { request, since }] of exchanges) {
          // Connected, nothing sent yet: Node does not count it among the idle ones, though it is.
          if (request === undefined && socket.bytesRead === 0) socket.destroy();
          else if ((request === undefined || !request.complete) && now - Math.max(since, startedAt) > headersTimeoutMs) socket.destroy();
        }
      }, 100);
      server.once('close', () => clearInterval(sweep));
    },
  };
}
