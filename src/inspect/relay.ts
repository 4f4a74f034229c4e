/**
 * The INSPECT relay: a WebSocket server the in-process inspector sends to and a viewer page (which embeds
 * Stately's inspector) reads from. Ours rather than `@statelyai/inspect/server`, which listens on every
 * interface, accepts any Origin and throws EADDRINUSE out of the process. This one:
 * - listens on `host` (INSPECT_HOST, loopback by default) and `port` (INSPECT_PORT);
 * - accepts a WebSocket only without an Origin (a Node client: the inspector) or from its own page's
 *   origin, so no other web page can read the events; answers its page only to a loopback Host
 *   (no DNS rebinding);
 * - reports a failed listen (busy port) as a rejected `start`, for the caller to log and carry on;
 * - holds bounded memory: the events kept for a late viewer are bounded in count and bytes, and a viewer
 *   that does not read (more than `maxViewerBacklogBytes` queued for it) is disconnected, so a client that
 *   never reads cannot make the process hold every event sent since.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { WebSocket, WebSocketServer } from 'ws';

export interface RelayOptions {
  readonly host: string;
  /** 0 picks a free port (tests). */
  readonly port: number;
  /** Stately's viewer, embedded by the page. */
  readonly viewerUrl?: string;
  /** Bytes of events kept for a viewer that connects late (default 4 MiB). */
  readonly maxBufferedBytes?: number;
  /** Bytes queued for one viewer before it is disconnected as not reading (default 4 MiB). */
  readonly maxViewerBacklogBytes?: number;
}

export interface Relay {
  /** The port it listens on. */
  readonly port: number;
  /** The WebSocket URL the inspector sends to. */
  readonly url: string;
  /** The viewer page. */
  readonly pageUrl: string;
  /** Connections open now (the inspector and the viewers). */
  readonly connections: number;
  stop(): Promise<void>;
}

/** Events kept for a viewer that connects late: at most this many, and at most `maxBufferedBytes`. */
const bufferedEvents = 200;
const defaultMaxBytes = 4 * 1024 * 1024;

/** Starts the relay; rejects (with the listen error, e.g. EADDRINUSE) when it cannot listen. */
export async function startRelay(options: RelayOptions): Promise<Relay> {
  const server = createServer();
  const listening = await listen(server, options.host, options.port);
  const hostForUrl = options.host.includes(':') ? `[${options.host}]` : options.host;
  const pageUrl = `http://${hostForUrl}:${listening}`;
  const allowedOrigins = new Set([pageUrl, `http://localhost:${listening}`, `http://127.0.0.1:${listening}`, `http://[::1]:${listening}`]);
  const allowedHosts = new Set([`${hostForUrl}:${listening}`, `localhost:${listening}`, `127.0.0.1:${listening}`, `[::1]:${listening}`]);
  const url = `ws://${hostForUrl}:${listening}`;

  server.on('request', (request, response) => {
    if (!allowedHosts.has(request.headers.host ?? '')) {
      response.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' }).end('Forbidden host.');
      return;
    }
    response
      .writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
      })
      .end(bridgePage(url, options.viewerUrl ?? 'https://stately.ai/inspect'));
  });

  const wss = new WebSocketServer({
    server,
    maxPayload: 1024 * 1024,
    verifyClient: (info: { origin: string; req: IncomingMessage }, done: (allowed: boolean, code?: number, message?: string) => void) => {
      if (isAllowedOrigin(info.req.headers.origin, allowedOrigins)) done(true);
      else done(false, 403, 'Forbidden origin');
    },
  });
  const maxBufferedBytes = options.maxBufferedBytes ?? defaultMaxBytes;
  const maxBacklog = options.maxViewerBacklogBytes ?? defaultMaxBytes;
  const buffer: string[] = [];
  let bufferedBytes = 0;
  // A viewer with more than the backlog queued is not reading: disconnected, not queued for without bound.
  const sendTo = (client: WebSocket, message: string): void => {
    if (client.bufferedAmount > maxBacklog) {
      client.terminate();
      return;
    }
    client.send(message);
  };
  wss.on('connection', (socket) => {
    for (const message of buffer) sendTo(socket, message);
    socket.on('error', () => socket.terminate());
    socket.on('message', (data) => {
      const message = Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]).toString('utf8');
      buffer.push(message);
      bufferedBytes += Buffer.byteLength(message);
      while (buffer.length > bufferedEvents || (bufferedBytes > maxBufferedBytes && buffer.length > 0)) bufferedBytes -= Buffer.byteLength(buffer.shift() ?? '');
      for (const client of wss.clients) if (client !== socket && client.readyState === WebSocket.OPEN) sendTo(client, message);
    });
  });

  return {
    port: listening,
    url,
    pageUrl,
    get connections() {
      return wss.clients.size;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** No Origin (not a browser) or one of the relay's own page origins. */
function isAllowedOrigin(origin: string | undefined, allowed: ReadonlySet<string>): boolean {
  return origin === undefined || allowed.has(origin);
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => {
      server.off('listening', onListening);
      reject(error);
    };
    const onListening = (): void => {
      server.off('error', onError);
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

/** The viewer page: the Stately inspector in a frame, fed the relay's events. */
function bridgePage(wsUrl: string, viewerUrl: string): string {
  return `<!DOCTYPE html>
<html>
<head>
  <meta charset="utf-8">
  <title>Stately Inspector (study-helper)</title>
  <style>* { margin: 0; padding: 0; } html, body { height: 100%; } iframe { width: 100%; height: 100%; border: none; }</style>
</head>
<body>
  <iframe id="inspector" src=${JSON.stringify(viewerUrl)}></iframe>
  <script>
    const iframe = document.getElementById('inspector');
    const buffer = [];
    let connected = false;
    window.addEventListener('message', (e) => {
      if (e.data && e.data.type === '@statelyai.connected') {
        connected = true;
        for (const event of buffer) iframe.contentWindow.postMessage(event, '*');
        buffer.length = 0;
      }
    });
    const ws = new WebSocket(${JSON.stringify(wsUrl)});
    ws.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (connected) iframe.contentWindow.postMessage(data, '*');
      else buffer.push(data);
    };
  </script>
</body>
</html>`;
}
