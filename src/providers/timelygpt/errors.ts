/** TimelyGPT's failures on the wire (docs/api.md "TimelyGPT wire details"). */

export type TimelyGptEndpoint = 'authenticate' | 'completion';

/**
 * A non-2xx from TimelyGPT. `endpoint` matters for 401: from `authenticate` it is a bad key,
 * from `llm-completion` an expired token (re-authenticated once before it reaches the classifier).
 */
export class TimelyGptHttpError extends Error {
  override readonly name = 'TimelyGptHttpError';
  readonly status: number;
  readonly endpoint: TimelyGptEndpoint;
  readonly headers: Headers;
  readonly body: unknown;

  constructor(endpoint: TimelyGptEndpoint, status: number, body: unknown, headers: Headers) {
    super(`${status} ${describeBody(body)}`);
    this.status = status;
    this.endpoint = endpoint;
    this.headers = headers;
    this.body = body;
  }
}

function describeBody(body: unknown): string {
  if (typeof body === 'object' && body !== null) {
    const { message, error } = body as { message?: unknown; error?: unknown };
    if (typeof message === 'string') return message;
    if (typeof error === 'string') return error;
  }
  return typeof body === 'string' && body.length > 0 ? body.slice(0, 200) : 'no body';
}
