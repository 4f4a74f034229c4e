/**
 * Fastify's pino logger, configured so that no key header can reach a log line: the request serializer
 * never copies headers (it logs salted fingerprints of the keys instead) nor the URL as sent (`safeUrl`: no
 * query value, no key-shaped path segment), and redaction covers every secret header should anything log
 * raw headers anyway.
 */
import type { FastifyRequest, FastifyServerOptions } from 'fastify';
import type { LogLevel } from '../config.js';
import { readProviderKeys, secretHeaders } from './keys.js';
import { safeUrl } from './safe-url.js';

export interface LogOptions {
  readonly level: LogLevel;
  /** Where the JSON lines go (stdout when absent); tests pass a capturing stream. */
  readonly stream?: NodeJS.WritableStream;
}

const redactPaths = secretHeaders.flatMap((name) => [
  `req.headers["${name}"]`,
  `request.headers["${name}"]`,
  `headers["${name}"]`,
  `res.headers["${name}"]`,
]);

function serializeRequest(request: FastifyRequest): Record<string, unknown> {
  const keys = readProviderKeys(request.headers);
  const fingerprints = Object.fromEntries(Object.entries(keys).map(([provider, key]) => [provider, key.fingerprint]));
  return {
    method: request.method,
    // Never the URL as sent: a key in its path or query would be logged verbatim.
    url: safeUrl(request.url, Object.values(keys)),
    remoteAddress: request.ip,
    ...(Object.keys(fingerprints).length > 0 ? { keyFingerprints: fingerprints } : {}),
  };
}

/** The `logger` option of `fastify()`. */
export function loggerOptions(options: LogOptions): Exclude<FastifyServerOptions['logger'], boolean | undefined> {
  return {
    level: options.level,
    redact: { paths: redactPaths, censor: '[redacted]' },
    serializers: { req: serializeRequest },
    ...(options.stream ? { stream: options.stream } : {}),
  };
}
