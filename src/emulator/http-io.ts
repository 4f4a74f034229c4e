/** Small node:http helpers shared by the emulated providers. */
import type { IncomingMessage, ServerResponse } from 'node:http';

export type WireHeaders = Readonly<Record<string, string>>;

/** One complete response: status, JSON (or raw text) body and extra headers. */
export interface WireResponse {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: WireHeaders;
}

export async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Parses a JSON body; undefined when it is not a JSON object. */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export function send(response: ServerResponse, wire: WireResponse): void {
  const text = typeof wire.body === 'string' ? wire.body : JSON.stringify(wire.body);
  const isJson = typeof wire.body !== 'string';
  response.writeHead(wire.status, {
    'content-type': isJson ? 'application/json' : 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...wire.headers,
  });
  response.end(text);
}

/** Headers and the first bytes of a 200, then nothing: the SDKs wait for the rest forever. */
export function stallAfterHeaders(response: ServerResponse, headers: WireHeaders): void {
  response.writeHead(200, { 'content-type': 'application/json', ...headers });
  response.write('{"id":"');
}

/** Headers and half of a promised body, then the socket is cut (undici: `TypeError: terminated`). */
export function cutMidBody(response: ServerResponse, body: unknown, headers: WireHeaders): void {
  const text = JSON.stringify(body);
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  response.write(text.slice(0, Math.floor(text.length / 2)), () => {
    response.socket?.destroy();
  });
}

/** The `garbage` fault: a 200 from something that is not the API (a proxy's HTML page). */
export const garbageBody =
  '<html><head><title>Gateway</title></head><body><h1>Temporarily unavailable</h1><p>upstream said nothing useful</p></body></html>';

export function headerValue(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

export function bearerToken(request: IncomingMessage): string | undefined {
  const authorization = headerValue(request, 'authorization');
  const match = authorization ? /^Bearer\s+(.+)$/i.exec(authorization) : null;
  return match?.[1]?.trim();
}

/** Rough token count the way the emulator reports usage: 4 characters a token. */
export function approximateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}
