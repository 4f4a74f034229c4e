/**
 * Pipelined requests, bounded per connection. Node's HTTP server hands every request it parses to the app at
 * once, and parses whatever one socket read brought: 2,000 pipelined `GET /healthz` in one 64 KiB read became
 * ~1,900 requests routed, logged and answered in a single turn of the event loop, and 64 such sockets stalled
 * every other client for seconds. Pausing the socket alone does not help: the read already taken is parsed
 * whole, in one call into the parser.
 *
 * The mechanism: Node's server parses a connection's bytes through the one `data` listener it puts on the
 * socket (`socketOnData`; once anything else listens to `data`, Node stops feeding its parser from C++ and
 * the bytes flow through that listener). Here that listener is taken off and called with the bytes one
 * request head at a time: a request's head ends at the first CRLF CRLF (Node's parser is strict and accepts
 * no other end), so each call can complete at most a request or two. Before each call the connection's
 * requests still unanswered are counted (a request counts from Node's `request` event to its response's
 * `close`); while it has `maxOutstanding` of them, the rest of what it sent is kept unparsed and the socket
 * is paused, so the kernel's buffers fill and the client stops sending. Each answer lets the next request be
 * parsed. A pipelining client is thereby served like a keep-alive client sending one request after another,
 * and holds at most the bytes of one read unparsed. Bodies pass unchanged (they hold CRLF CRLF rarely, and a
 * cut there only makes one more call).
 *
 * Node pauses a socket itself while its answers are not read (`socket._paused`, its `socketOnData` asserts
 * it is clear): nothing is fed then, and Node's own `resume` brings the feeding back.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** What Node keeps on an HTTP server's socket that the feeding must respect (`_http_server.js`). */
interface HttpServerSocket extends Socket {
  /** Set while the connection has a parser; cleared when Node frees it (closed, upgraded). */
  parser?: unknown;
  /** Node's own pause: its answers are not being read. */
  _paused?: boolean;
}

interface Connection {
  /** Requests parsed and not yet answered. */
  outstanding: number;
  /** Feeds what is kept, as far as the bound allows. */
  feed(): void;
}

/** The end of a request's head: Node's parser accepts no other. */
const headEnd = Buffer.from('\r\n\r\n');

/** Requests one connection may have unanswered before the rest of what it sent waits unparsed. */
const maxPipelinedRequests = 2;

/** Puts the bound on `server`; call before it listens, after the framework made it (its listeners come first). */
export function boundPipelining(server: Server, maxOutstanding: number = maxPipelinedRequests): void {
  const connections = new WeakMap<Socket, Connection>();
  server.on('connection', (socket: HttpServerSocket) => {
    if (socket.destroyed || socket.parser === undefined || socket.parser === null) return;
    const listeners = socket.listeners('data');
    // Node's one listener, or a server other than Node's plain HTTP one: then nothing is bounded here.
    if (listeners.length !== 1) return;
    const parse = listeners[0] as (chunk: Buffer) => void;
    socket.removeListener('data', parse);
    let kept: Buffer | undefined;
    const connection: Connection = {
      outstanding: 0,
      feed() {
        while (kept !== undefined) {
          if (socket.destroyed || socket.parser === undefined || socket.parser === null) {
            kept = undefined;
            return;
          }
          // Node holds the socket (its answers are not read) or the connection has its requests in flight.
          if (socket._paused === true || connection.outstanding >= maxOutstanding) {
            socket.pause();
            return;
          }
          const end = kept.indexOf(headEnd);
          const cut = end < 0 ? kept.length : end + headEnd.length;
          const piece = cut === kept.length ? kept : kept.subarray(0, cut);
          kept = cut === kept.length ? undefined : kept.subarray(cut);
          parse(piece);
        }
        // All fed: no more is read while the connection has its requests in flight; else read on, unless Node holds the socket.
        if (connection.outstanding >= maxOutstanding) socket.pause();
        else if (socket.isPaused() && socket._paused !== true && connection.outstanding < maxOutstanding && !socket.destroyed) socket.resume();
      },
    };
    connections.set(socket, connection);
    // Node's wrapper of `on` stops its parser's own reading when a `data` listener is added: the bytes come here.
    socket.on('data', (chunk: Buffer) => {
      kept = kept === undefined ? chunk : Buffer.concat([kept, chunk]);
      connection.feed();
    });
    // Node resuming a socket it held (its answers were read): feed what waits first.
    socket.on('resume', () => connection.feed());
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const connection = connections.get(request.socket);
    if (connection === undefined) return;
    connection.outstanding += 1;
    // `close` follows `finish`, and comes too when the connection is lost before the answer ended.
    response.once('close', () => {
      connection.outstanding -= 1;
      // Not in the middle of Node's own close handling: the next request is parsed on the next tick.
      process.nextTick(() => connection.feed());
    });
  });
}
