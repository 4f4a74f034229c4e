/**
 * INSPECT: the live actor system to Stately's inspector, offline (docs/web.md).
 * `startInspection()` starts the local relay (src/inspect/relay.ts: loopback only unless INSPECT_HOST says
 * otherwise, its own page's Origin only; its page embeds the Stately viewer, the one part that needs the
 * network) and connects `createWebSocketInspector` to it; pass `inspection.inspect` as `createGateway`'s
 * `inspect`. A relay that cannot listen (a busy INSPECT_PORT) is reported through `onWarning` and inspection
 * is off: the service runs on, and no event is sent to whatever holds that port.
 *
 * What leaves the process is sanitized first: **no string content leaves** except under a short list of
 * field names that carry machine-defined words (event types, provider ids, models, states, error classes);
 * every other string — document text, prompts, answers, messages — is replaced by its length
 * (`[string: 1234 chars]`), key-like fields are `[redacted]`, and `Secret`s serialise as a fingerprint.
 */
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import type { AnyEventObject, InspectionEvent, MachineContext, Observer } from 'xstate';
import { startRelay, type Relay } from './relay.js';

export interface InspectionOptions {
  /** The relay's interface (INSPECT_HOST, default 127.0.0.1). */
  readonly host?: string;
  /** The relay's port (INSPECT_PORT, default 8080; 0 picks a free one). */
  readonly port?: number;
  /** Start the relay in this process (default true); false: connect to one already running at `url`. */
  readonly relay?: boolean;
  /** The relay's WebSocket URL (default the started relay's, else `ws://127.0.0.1:<port>`). */
  readonly url?: string;
  /** Told when the relay cannot start (default: console.warn). */
  readonly onWarning?: (message: string) => void;
}

export interface Inspection {
  /** For `createGateway({ inspect })`; a no-op when the relay could not start. */
  readonly inspect: Observer<InspectionEvent>;
  /** The relay's viewer page (open it in a browser with network access), when started here. */
  readonly viewerUrl: string | undefined;
  /** The WebSocket URL the inspector sends to; undefined when inspection is off. */
  readonly url: string | undefined;
  stop(): Promise<void>;
}

const maxDepth = 8;
const secretName = /(api[-_]?key|^key$|token|secret|authorization|password)/i;
/** Fields whose strings are machine-defined words, not user data: they pass whole (still bounded). */
const wordFields = new Set([
  'type',
  'provider',
  'model',
  'status',
  'state',
  'phase',
  'errorClass',
  'outcome',
  'task',
  'stage',
  'code',
  'policy',
  'lang',
  'role',
  'id',
  'sessionId',
  'systemId',
  'fingerprint',
]);
const maxWordLength = 64;

function stringLength(value: string): string {
  return `[string: ${value.length} chars]`;
}

/**
 * A copy of `value` safe to hand to an inspector: strings only under the word fields (and at most 64
 * characters), every other string as its length, key-like fields redacted, class instances as their name.
 */
export function sanitizeForInspection(value: unknown, depth = 0, name = ''): unknown {
  if (typeof value === 'string') {
    if (secretName.test(name)) return '[redacted]';
    return wordFields.has(name) && value.length <= maxWordLength ? value : stringLength(value);
  }
  if (value === null || typeof value !== 'object') return value;
  if (depth >= maxDepth) return '[…]';
  const withJson = value as { toJSON?: () => unknown };
  if (typeof withJson.toJSON === 'function' && !Array.isArray(value)) {
    // Secrets serialise as their fingerprint: shown as such, whatever the field is called.
    const json = withJson.toJSON();
    if (typeof json === 'string' && /^\[secret [0-9a-f]+\]$/u.test(json)) return json;
    return sanitizeForInspection(json, depth + 1, name);
  }
  if (Array.isArray(value)) return value.slice(0, 50).map((item) => sanitizeForInspection(item, depth + 1, name));
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) {
    // Actor refs, AbortSignals, class instances: their name, not their insides.
    const constructorName = (value as { constructor?: { name?: string } }).constructor?.name ?? 'object';
    const id = (value as { id?: unknown }).id;
    return typeof id === 'string' && id.length <= maxWordLength ? `[${constructorName} ${id}]` : `[${constructorName}]`;
  }
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) copy[key] = sanitizeForInspection(item, depth + 1, key);
  return copy;
}

/** A state value (`'open'`, `{ running: 'calling' }`): the machine's own state names, kept. */
function sanitizeStateValue(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.length <= maxWordLength ? value : stringLength(value);
  if (value === null || typeof value !== 'object' || Array.isArray(value) || depth >= maxDepth) return sanitizeForInspection(value, depth);
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) copy[key] = sanitizeStateValue(item, depth + 1);
  return copy;
}

const sanitizeEvent = (event: AnyEventObject): AnyEventObject => {
  const sanitized = sanitizeForInspection(event);
  return typeof sanitized === 'object' && sanitized !== null ? { ...(sanitized as Record<string, unknown>), type: event.type } : { type: event.type };
};

const sanitizeContext = (context: MachineContext): MachineContext => {
  const sanitized = sanitizeForInspection(context);
  return typeof sanitized === 'object' && sanitized !== null ? (sanitized as MachineContext) : {};
};

/**
 * The last step before an event leaves: the whole snapshot (context, but also `input` and `output`,
 * which carry the request and the answer) and the event, sanitized. The machine `definition` stays whole.
 */
function serializeForInspection(event: StatelyInspectionEvent): StatelyInspectionEvent {
  const copy: Record<string, unknown> = { ...event };
  if ('snapshot' in event) {
    const snapshot = sanitizeForInspection(event.snapshot);
    const stateValue = (event.snapshot as { value?: unknown }).value;
    copy.snapshot =
      typeof snapshot === 'object' && snapshot !== null && stateValue !== undefined ? { ...snapshot, value: sanitizeStateValue(stateValue) } : snapshot;
  }
  if ('event' in event) copy.event = sanitizeEvent(event.event);
  // Same shape with sanitized values: `sanitizeForInspection` keeps every key and object nesting.
  return copy as unknown as StatelyInspectionEvent;
}

/** Starts the relay (unless `relay: false`) and the WebSocket inspector. Loaded only when INSPECT is set. */
export async function startInspection(options: InspectionOptions = {}): Promise<Inspection> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 8080;
  const warn = options.onWarning ?? ((message: string) => console.warn(message));
  let relay: Relay | undefined;
  if (options.relay ?? true) {
    try {
      relay = await startRelay({ host, port });
    } catch (error) {
      const reason = error instanceof Error ? ((error as NodeJS.ErrnoException).code ?? error.message) : String(error);
      warn(`INSPECT: the inspector relay could not listen on ${host}:${port} (${reason}); inspection is off, the service runs on. Set INSPECT_PORT to a free port.`);
      return { inspect: { next: () => undefined }, viewerUrl: undefined, url: undefined, stop: async () => undefined };
    }
  }
  const url = options.url ?? relay?.url ?? `ws://127.0.0.1:${port}`;
  const { createWebSocketInspector } = await import('@statelyai/inspect');
  const inspector = createWebSocketInspector({ url, sanitizeEvent, sanitizeContext, serialize: serializeForInspection });
  return {
    inspect: inspector.inspect,
    viewerUrl: relay?.pageUrl,
    url,
    async stop() {
      inspector.stop();
      await relay?.stop();
    },
  };
}
