/**
 * Pipelined requests, bounded per connection. Node's HTTP server hands every request it parses to the app at
 * once, and parses whatever one socket read brought: thousands of pipelined `GET /healthz` in one 64 KiB read
 * became as many requests routed, logged and answered in a single turn of the event loop, and a few dozen such
 * sockets stalled every other client for seconds. Pausing the socket alone does not help: the read already taken is parsed
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
 * parsed, in the event loop's next turn. A pipelining client is thereby served like a keep-alive client
 * sending one request after another, and holds at most the bytes of one read unparsed. Bodies pass unchanged
 * (they hold CRLF CRLF rarely, and a cut there only makes one more call).
 *
 * Served that way, a connection still makes a request per turn of the event loop without the round trip a
 * keep-alive client waits between them: the pipelined requests of one address (share address, as every
 * per-address bound) are paced, `pipelinedPerSecond` a second, a token bucket of as many.
 *
 * Every request of an address, pipelined or not, is paced too, at a rate no person's use comes near
 * (`requestsPerSecond`): keep-alive clients each waiting for their answers, 64 connections from one address asking
 * for a cheap document (`/metrics` from its cache) still made ~5,000 requests a second, and the main thread was
 * theirs. Past its share an address's next request waits unparsed, its socket read no further, as a pipelined one
 * does: nothing is answered for it, so the wait costs the process nothing.
 *
 * A client's FIN can come while what it sent before still waits here; Node's own `end` listener
 * (`socketOnEnd`: answer what was parsed, then close) is taken off the socket too and called once all is fed.
 *
 * Node pauses a socket itself while its answers are not read (`socket._paused`, its `socketOnData` asserts
 * it is clear): nothing is fed then, and Node's own `resume` brings the feeding back.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createAddressBuckets } from './address-buckets.js';
import { shareAddress } from './client-address.js';
import type { Pace } from './refusal-metrics.js';

/** What Node keeps on an HTTP server's socket that the feeding must respect (`_http_server.js`). */
interface HttpServerSocket extends Socket {
  /** Set while the connection has a parser; cleared when Node frees it (closed, upgraded). */
  parser?: unknown;
  /** Node's own pause: its answers are not being read. */
  _paused?: boolean;
  /** The socket's libuv stream: `reading` is whether it reads from the kernel (net.js keeps it). */
  _handle?: { reading?: boolean; readStart(): number; readStop(): number } | null;
}

interface Connection {
  /** Requests parsed and not yet answered. */
  outstanding: number;
  /**
   * A request was answered before its body had arrived, and the answer closes the connection (a refusal on
   * its headers, or of an upload halfway): nothing more it sent is parsed, Node closes the socket.
   */
  closing: boolean;
  /** The request whose body the bytes fed go to (the last one parsed). */
  current: IncomingMessage | undefined;
  /** Feeds what is kept, as far as the bound allows. */
  feed(): void;
}

/** The end of a request's head: Node's parser accepts no other. */
const headEnd = Buffer.from('\r\n\r\n');

/** Requests one connection may have unanswered before the rest of what it sent waits unparsed. */
const maxPipelinedRequests = 2;

/**
 * Pipelined requests one address may have parsed per second, and at once after a pause: a pipelined request
 * is one its client sent before the answer to the one before it came (no browser or common client does so).
 * Served one after another without a round trip between them, a few dozen connections pipelining `GET /healthz`
 * still made thousands of requests a second from one address; a keep-alive client waits for each answer.
 */
const pipelinedPerSecond = 100;

/** Requests one address may have parsed per second, and at most at once (REQUESTS_PER_SECOND_PER_ADDRESS). */
const requestsPerSecond = 200;

export interface PipeliningLimits {
  /** Requests one connection may have unanswered (default 2). */
  readonly maxOutstanding?: number;
  /** Pipelined requests one address may have parsed per second, and at most at once (default 100). */
  readonly perAddressPerSecond?: number;
  /** Requests, pipelined or not, one address may have parsed per second, and at most at once (default 200; 0: unpaced). */
  readonly requestsPerSecond?: number;
  /** A peer whose pipelining is not paced (a trusted proxy: it carries many clients). */
  readonly exempt?: (address: string) => boolean;
  /** The clock of the pacing (tests); `performance.now` when absent. */
  readonly now?: () => number;
  /** Paces the bodies of some requests (uploads: upload-share.ts); none paced when absent. */
  readonly bodyPacer?: BodyPacer;
  /** Told once per request its address's share made wait: its head (`requests`, `pipelined`) or its body. */
  readonly onPaced?: (pace: Pace) => void;
}

/**
 * Paces a request's body as it is read: `fed` is told of each piece of a body handed to the parser (at most
 * one socket read), and while `waitMs` answers more than 0 the socket reads nothing more from the kernel (the
 * client's sending stops once the buffers between are full). A request the pacer does not know answers 0.
 */
export interface BodyPacer {
  /** Milliseconds before more of `request`'s body may be parsed; 0: now. */
  waitMs(request: IncomingMessage): number;
  /** `bytes` of `request`'s body were handed to the parser. */
  fed(request: IncomingMessage, bytes: number): void;
}

/** Takes a token of `address`, or says how many milliseconds until there is one. */
type TakeToken = (address: string) => number;

/** An address's requests at `rate` a second, as many at once: the shares' buckets, a token a request. */
function tokenBuckets(rate: number, now: () => number): TakeToken {
  const buckets = createAddressBuckets({ bytesPerSecond: rate, burstBytes: rate, now });
  return (address) => {
    const bucket = buckets.bucketOf(address);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) * 1000) / rate);
  };
}

/** Puts the bound on `server`; call before it listens, after the framework made it (its listeners come first). */
export function boundPipelining(server: Server, limits: PipeliningLimits = {}): void {
  const maxOutstanding = limits.maxOutstanding ?? maxPipelinedRequests;
  const now = limits.now ?? ((): number => performance.now());
  const connections = new WeakMap<Socket, Connection>();
  const takePipelined = tokenBuckets(limits.perAddressPerSecond ?? pipelinedPerSecond, now);
  const requestRate = limits.requestsPerSecond ?? requestsPerSecond;
  const takeRequest = requestRate > 0 ? tokenBuckets(requestRate, now) : undefined;
  server.on('connection', (socket: HttpServerSocket) => {
    if (socket.destroyed || socket.parser === undefined || socket.parser === null) return;
    const listeners = socket.listeners('data');
    // Node's one listener (`socketOnData`), or a server other than Node's plain HTTP one: then nothing is bounded here.
    if (listeners.length !== 1 || listeners[0]?.name !== 'bound socketOnData') return;
    const parse = listeners[0] as (chunk: Buffer) => void;
    socket.removeListener('data', parse);
    // The client's FIN (`end`) may come while requests it sent before still wait here unparsed; Node's own
    // `end` listener would then answer only those it has parsed and close. It is called once all are fed.
    const onEnd = socket.listeners('end').find((listener) => listener.name === 'bound socketOnEnd') as (() => void) | undefined;
    let ended = false;
    let kept: Buffer | undefined;
    // The first request head of bytes that came while the connection had none in flight is not pipelined.
    let firstHeadFree = false;
    // The next request head has its token of the address's requests (it may still wait for a pipelined one).
    let headPaid = false;
    // The next request head was made to wait, and that was told (`onPaced`): a wait is told once per head.
    let headPaced = false;
    // The body whose wait for its share was told.
    let pacedBody: IncomingMessage | undefined;
    let retry: NodeJS.Timeout | undefined;
    const address = limits.exempt?.(socket.remoteAddress ?? '') === true ? undefined : shareAddress(socket.remoteAddress);
    socket.once('close', () => clearTimeout(retry));
    if (onEnd !== undefined) socket.removeListener('end', onEnd);
    const paced = (waitMs: number, pace: Pace): number => {
      if (waitMs > 0 && !headPaced) {
        headPaced = true;
        limits.onPaced?.(pace);
      }
      return waitMs;
    };
    /** Milliseconds before the next request head may be parsed; its tokens are taken once it may. */
    const headWaitMs = (from: string): number => {
      if (!headPaid && takeRequest !== undefined) {
        const waitMs = takeRequest(from);
        if (waitMs > 0) return paced(waitMs, 'requests');
        headPaid = true;
      }
      return firstHeadFree ? 0 : paced(takePipelined(from), 'pipelined');
    };
    /** Feeds again once `ms` have passed (one timer a connection: a wait already set stands). */
    const feedAfter = (ms: number): void => {
      retry ??= setTimeout(() => {
        retry = undefined;
        connection.feed();
      }, ms);
    };
    const endIfFed = (): void => {
      if (ended && kept === undefined && onEnd !== undefined) {
        ended = false;
        onEnd();
      }
    };
    /**
     * The body of the request being parsed fills its buffer and nobody reads it (a handler that refused the
     * request on its headers, or reads it slower than it comes). Node's parser stops reading the socket
     * then, but only where it reads the socket itself: fed from here, the socket would go on flowing and
     * the request would hold its whole body in memory. So the feeding stops too; Node resumes the socket
     * once the body is read again (and closes it unread after a refusal's `Connection: close`).
     */
    const bodyFull = (): boolean => {
      const request = connection.current;
      return request !== undefined && !request.complete && request.readableLength >= request.readableHighWaterMark;
    };
    /** The request whose body the next bytes are, while it has not all arrived. */
    const incompleteBody = (): IncomingMessage | undefined =>
      connection.current !== undefined && !connection.current.complete ? connection.current : undefined;
    /**
     * A paced body waits in the kernel, not here (nor does anything after a closing answer): what was read is
     * parsed at once and the socket stops reading from the kernel (as `pause` does for a socket reading into a
     * buffer of its own). Paused alone, it goes on reading into its stream's buffer, and bytes held there for
     * the seconds a share takes to refill outlived the young generation.
     */
    let readingHeld = false;
    // `resume` starts the handle's reading only when the stream asks for data, which it may not (a read it
    // asked for before the stop is still pending): the handle is started here too.
    const setReading = (reading: boolean): void => {
      readingHeld = !reading;
      if (reading) socket.resume();
      else socket.pause();
      const handle = (socket as HttpServerSocket)._handle;
      if (handle?.reading === !reading && !socket.destroyed) {
        handle.reading = reading;
        if (reading) handle.readStart();
        else handle.readStop();
      }
    };
    const connection: Connection = {
      outstanding: 0,
      closing: false,
      current: undefined,
      feed() {
        while (kept !== undefined) {
          if (socket.destroyed || socket.parser === undefined || socket.parser === null || connection.closing) {
            kept = undefined;
            if (connection.closing) setReading(false);
            return;
          }
          // Node holds the socket (its answers are not read) or the connection has its requests in flight.
          if (socket._paused === true || connection.outstanding >= maxOutstanding || bodyFull()) {
            socket.pause();
            return;
          }
          const body = incompleteBody();
          const end = kept.indexOf(headEnd);
          // A request head takes a token of its address's requests and, if pipelined, one of its pipelined
          // requests; without them it waits.
          if (end >= 0 && address !== undefined) {
            const waitMs = headWaitMs(address);
            if (waitMs > 0) {
              socket.pause();
              feedAfter(waitMs);
              return;
            }
          }
          if (end >= 0) {
            firstHeadFree = false;
            headPaid = false;
            headPaced = false;
          }
          const cut = end < 0 ? kept.length : end + headEnd.length;
          const piece = cut === kept.length ? kept : kept.subarray(0, cut);
          kept = cut === kept.length ? undefined : kept.subarray(cut);
          parse(piece);
          if (body !== undefined) limits.bodyPacer?.fed(body, piece.length);
        }
        endIfFed();
        // All fed: no more is read while the connection has its requests in flight, nor while a paced body's
        // share refills; else read on, unless Node holds the socket.
        const body = incompleteBody();
        const paceMs = body === undefined || limits.bodyPacer === undefined ? 0 : limits.bodyPacer.waitMs(body);
        if (connection.outstanding >= maxOutstanding || bodyFull()) socket.pause();
        else if (paceMs > 0) {
          if (pacedBody !== body) {
            pacedBody = body;
            limits.onPaced?.('upload_bytes');
          }
          setReading(false);
          feedAfter(paceMs);
        } else if (socket._paused !== true && !socket.destroyed) {
          if (readingHeld) setReading(true);
          else if (socket.isPaused()) socket.resume();
        }
      },
    };
    connections.set(socket, connection);
    // Node's wrapper of `on` stops its parser's own reading when a `data` listener is added: the bytes come here.
    socket.on('data', (chunk: Buffer) => {
      if (kept === undefined && connection.outstanding === 0) firstHeadFree = true;
      kept = kept === undefined ? chunk : Buffer.concat([kept, chunk]);
      connection.feed();
    });
    // Node resuming a socket it held (its answers were read): feed what waits first.
    socket.on('resume', () => connection.feed());
    if (onEnd !== undefined) {
      socket.on('end', () => {
        ended = true;
        endIfFed();
      });
    }
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const connection = connections.get(request.socket);
    if (connection === undefined) return;
    connection.outstanding += 1;
    connection.current = request;
    // `close` follows `finish`, and comes too when the connection is lost before the answer ended.
    response.once('close', () => {
      connection.outstanding -= 1;
      // Node reads an unread body to its end to throw it away (`_dump`), and closes the socket only once its
      // answer is flushed: what arrives meanwhile would be parsed for nothing.
      if (!request.complete && !response.shouldKeepAlive) connection.closing = true;
      // The next request is parsed after the event loop has polled for I/O again: an answer can end within
      // the same turn as its request (a cheap GET's write completes at once), and feeding on the next tick
      // chained a connection's 2,000 pipelined requests through one turn, every other client waiting.
      setImmediate(() => connection.feed());
    });
  });
}
