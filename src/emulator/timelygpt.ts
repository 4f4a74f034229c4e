/**
 * TimelyGPT, as the emulator speaks it (docs/providers.md, docs/api.md "TimelyGPT wire details"):
 * `GET {base}/sdk-auth/authenticate` with `X-Timely-API: <key>` → a JWT-looking access token;
 * `POST {base}/llm-completion` with `Authorization: Bearer <token>`.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FaultBoard } from './faults.js';
import { keyFault, serveGeneration, type GenerationOptions, type ProviderWire, type WireErrorKind } from './generation.js';
import { bearerToken, headerValue, parseJsonObject, readBody, send, type WireResponse } from './http-io.js';
import { textOfContent } from './anthropic.js';
import { readContinuation } from './continuation.js';

function timelyError(statusCode: number, error: string, message: string): WireResponse {
  return { status: statusCode, body: { success: false, error, message, statusCode } };
}

const errors: Readonly<Record<WireErrorKind, (message: string | undefined) => WireResponse>> = {
  auth: () => timelyError(401, 'Unauthorized', 'Invalid API key'),
  permission: () => timelyError(403, 'Forbidden', 'This API key may not use this model'),
  quota: () => timelyError(402, 'Payment Required', 'Insufficient credits'),
  rateLimit: () => ({ ...timelyError(429, 'Too Many Requests', 'Rate limit exceeded'), headers: { 'retry-after': '7' } }),
  http500: () => timelyError(500, 'Internal Server Error', 'Internal server error'),
  http503: () => timelyError(503, 'Service Unavailable', 'Service unavailable'),
  overloaded: () => timelyError(503, 'Service Unavailable', 'Model is overloaded'),
  badRequest: (message) => timelyError(400, 'Bad Request', message ?? 'Invalid request'),
  notFound: (message) => timelyError(404, 'Not Found', `Model not found: ${message ?? 'unknown'}`),
  contextTooLong: () => timelyError(413, 'Payload Too Large', 'Input is too long for this model'),
};

export const timelygptWire: ProviderWire = {
  provider: 'timelygpt',
  error: (kind, detail) => errors[kind](detail.message),
  commonHeaders: (sequence) => ({ 'x-request-id': `tgpt-emu-${sequence}` }),
  success: ({ text }) => ({ status: 200, body: { type: 'final_response', message: text } }),
};

interface IssuedToken {
  readonly key: string;
  expired: boolean;
}

const maxIssuedTokens = 10_000;

/** Tokens the emulated TimelyGPT has issued (in memory, bounded, oldest dropped first). */
export class TokenIssuer {
  readonly #secret = randomBytes(32);
  readonly #tokens = new Map<string, IssuedToken>();
  #issued = 0;

  issue(key: string, fingerprint: string): string {
    this.#issued += 1;
    const now = Math.floor(Date.now() / 1000);
    const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
    const unsigned = `${encode({ alg: 'HS256', typ: 'JWT' })}.${encode({ sub: fingerprint, iat: now, exp: now + 3600, jti: this.#issued })}`;
    const token = `${unsigned}.${createHmac('sha256', this.#secret).update(unsigned).digest('base64url')}`;
    this.#tokens.set(token, { key, expired: false });
    if (this.#tokens.size > maxIssuedTokens) {
      const oldest = this.#tokens.keys().next().value;
      if (oldest !== undefined) this.#tokens.delete(oldest);
    }
    return token;
  }

  find(token: string | undefined): IssuedToken | undefined {
    return token === undefined ? undefined : this.#tokens.get(token);
  }
}

export async function handleTimelyAuthenticate(
  request: IncomingMessage,
  response: ServerResponse,
  board: FaultBoard,
  issuer: TokenIssuer,
): Promise<void> {
  await readBody(request);
  board.countAuth();
  const key = headerValue(request, 'x-timely-api');
  if (!key) return send(response, timelyError(401, 'Unauthorized', 'X-Timely-API header is required'));
  if (keyFault(key) === 'auth') return send(response, errors.auth(undefined));
  const token = issuer.issue(key, board.fingerprint(key));
  return send(response, { status: 200, body: { success: true, data: { access_token: token } } });
}

export async function handleTimelyCompletion(
  request: IncomingMessage,
  response: ServerResponse,
  board: FaultBoard,
  issuer: TokenIssuer,
  options: GenerationOptions,
): Promise<void> {
  const raw = await readBody(request);
  const issued = issuer.find(bearerToken(request));
  board.countCall('timelygpt', issued?.key);
  if (!issued || issued.expired) return send(response, timelyError(401, 'Unauthorized', 'Invalid or expired token'));
  if (board.peek('timelygpt')?.fault === 'tokenExpired') {
    // The `tokenExpired` fault: every token used while it is active answers 401 once, then stays expired.
    board.consume('timelygpt');
    issued.expired = true;
    return send(response, timelyError(401, 'Unauthorized', 'Token has expired'));
  }
  const body = parseJsonObject(raw);
  if (!body) return send(response, errors.badRequest('Invalid JSON body'));
  if (!Array.isArray(body['messages'])) return send(response, errors.badRequest('messages must be an array'));
  const messages = body['messages'] as { role?: unknown; content?: unknown }[];
  const system = [
    typeof body['instructions'] === 'string' ? body['instructions'] : '',
    ...messages.filter((message) => message.role === 'system').map((message) => textOfContent(message.content)),
  ].join('\n');
  const wireMessages = messages
    .filter((message) => message.role !== 'system')
    .map((message) => ({ role: typeof message.role === 'string' ? message.role : 'user', text: textOfContent(message.content) }));
  const userText = wireMessages.map((message) => message.text).join('\n');
  const continuation = readContinuation(wireMessages);
  const model = typeof body['model'] === 'string' ? body['model'] : 'timelygpt';
  // TimelyGPT's documented API answers whole (`stream: false`): no stream is served.
  serveGeneration(timelygptWire, board, options, response, {
    key: issued.key,
    model,
    system,
    userText,
    ...(continuation === undefined ? {} : { continuation }),
    stream: false,
    includeUsage: false,
  });
  return undefined;
}
