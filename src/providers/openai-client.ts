/**
 * The `openai` client the GPT adapter shares across its calls (issue 15). It holds no user's key: each
 * call carries its own key (a `Secret`) and its own abort signal in its request options, and the client
 * reads both where the SDK uses them, without the per-call work the SDK's general options cost:
 * - the key is written once into the request's finished headers by `prepareRequest` (the SDK's hook for
 *   headers that depend on the request), instead of a per-request `headers` set that the SDK parses and
 *   merges twice (once for the body's headers, once over the default headers);
 * - the call's signal is the signal `fetch` follows, instead of the SDK listening on it to abort a
 *   controller of its own (a listener per call, and a timer per call for `timeout`, which the provider
 *   actor's deadline on that signal makes redundant).
 * Measured in one process, 50 calls in flight (docs/performance.md, "The HTTP path outside the machines").
 */
import OpenAI, { type ClientOptions } from 'openai';
import type { ApiKey } from '../machines/types.js';

/** Where a call's key travels in its request options: a symbol, so no SDK option or header set is touched. */
const callKeyOption = Symbol('callKey');

/** Request options of one call: its abort signal and its key, for the shared client's `create`. */
export interface CallOptions {
  readonly signal: AbortSignal;
  readonly [callKeyOption]: ApiKey;
}

/** The options one call passes to the shared client: the key stays a `Secret` until its headers are written. */
export function callOptions(apiKey: ApiKey, signal: AbortSignal): CallOptions {
  return { signal, [callKeyOption]: apiKey };
}

function keyOfCall(options: object): ApiKey {
  const key = (options as Partial<CallOptions>)[callKeyOption];
  // Never send the client's placeholder: a call without its key is a bug of the caller.
  if (key === undefined)
    throw new TypeError('An OpenAI call without its key: pass callOptions(apiKey, signal).');
  return key;
}

/** An `OpenAI` client that sends each call's own key and lets `fetch` follow each call's own signal. */
export class PerCallKeyOpenAI extends OpenAI {
  /** The client's `fetch` option (the SDK keeps its own copy private), else the global `fetch`. */
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    super(options);
    this.#fetch = options.fetch ?? fetch;
  }

  protected override async prepareRequest(
    request: RequestInit,
    context: { url: string; options: object },
  ): Promise<void> {
    const headers = request.headers;
    if (!(headers instanceof Headers))
      throw new TypeError('The OpenAI SDK handed over its headers in an unexpected form.');
    headers.set('authorization', `Bearer ${keyOfCall(context.options).reveal()}`);
  }

  /**
   * With the call's signal, `fetch` follows it directly: the signal already carries the call's deadline
   * and its caller going away, and the SDK reports an abort by reading `options.signal.aborted` after
   * `fetch` rejects, as it does when its own controller aborts. Without one, the SDK's own way.
   */
  override fetchWithTimeout(
    url: RequestInfo,
    init: RequestInit | undefined,
    ms: number,
    controller: AbortController,
  ): Promise<Response> {
    if (init?.signal == null) return super.fetchWithTimeout(url, init, ms, controller);
    // Upper case as the SDK sends it (undici leaves some methods as given).
    return this.#fetch(url, { ...init, method: (init.method ?? 'GET').toUpperCase() });
  }
}
