/**
 * Server-Sent Events written with backpressure in mind. Node queues whatever a socket cannot
 * take yet in user space, without bound: a client that never reads would make the service hold every
 * event ever sent to it. Each stream here has a bounded buffer (64 KiB: `derivedLimits` in src/config.ts): when what is
 * queued for the client passes it, the client is not keeping up and is dropped (its socket destroyed);
 * it can reconnect and start again from the current state. Other streams are never affected.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { clientIdOf, createAdmission, type Admission } from './admission.js';

/** Default bound on the bytes queued for one SSE client (64 KiB in the service). */
export const defaultSseMaxBufferBytes = 64 * 1024;

export interface SseWriter {
  /** Writes one event (`event:` + `data:` as JSON). False when the stream is closed or was just dropped. */
  event(name: string, data: unknown): boolean;
  /** Writes raw protocol text (a comment line, `retry:`). Same answer as `event`. */
  raw(text: string): boolean;
}

/**
 * Wraps `response` (headers already written). `onDrop` runs once when the client is dropped for not
 * reading; the caller cleans up on the socket's `close` as usual.
 */
export function sseWriter(response: ServerResponse, maxBufferedBytes: number, onDrop?: () => void): SseWriter {
  let dropped = false;
  const raw = (text: string): boolean => {
    if (dropped || response.destroyed || response.writableEnded) return false;
    response.write(text);
    if (response.writableLength > maxBufferedBytes) {
      dropped = true;
      onDrop?.();
      response.destroy();
      return false;
    }
    return true;
  };
  return {
    raw,
    event: (name, data) => raw(renderEvent(name, data)),
  };
}

/**
 * Takes `reply` over from Fastify and starts an event stream on it: the 200 and its headers (no caching,
 * no proxy buffering) sent at once, and a bounded writer (`sseWriter`) for what follows.
 */
export function openEventStream(reply: FastifyReply, maxBufferedBytes: number, onDrop?: () => void): SseWriter {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  raw.flushHeaders();
  return sseWriter(raw, maxBufferedBytes, onDrop);
}

/** One event as it goes on the wire; render once, `raw` it to every stream that gets the same event. */
export function renderEvent(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * The event streams of one instance are bounded like generations: each holds a socket, a
 * timer's share and up to its buffer bound of memory, so one client opening thousands would take
 * them from everyone. A client is its remote address (a browser's event stream carries no key).
 */
export function createStreamAdmission(limits: { maxStreams: number; maxStreamsPerClient: number; retryAfterSeconds: number }): Admission {
  return createAdmission({
    maxInFlight: limits.maxStreams,
    maxPerClient: limits.maxStreamsPerClient,
    retryAfterSeconds: limits.retryAfterSeconds,
    labels: { what: 'event streams', perClientSetting: 'SSE_MAX_STREAMS_PER_CLIENT', totalSetting: 'SSE_MAX_STREAMS' },
  });
}

/** Takes a stream slot for the client at `remoteAddress`, or throws 429 / 503 (before the stream starts). */
export function enterStream(streams: Admission | undefined, remoteAddress: string): () => void {
  return streams === undefined ? () => {} : streams.enter(clientIdOf({}, remoteAddress));
}
