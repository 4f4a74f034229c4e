/**
 * INSPECT: the live actor system to Stately's inspector, offline (XSTATE.md "Inspection and diagrams").
 * `startInspection()` starts the local relay of `@statelyai/inspect/server` (a WebSocket server; its page at
 * http://localhost:<port> embeds the Stately viewer, which is the one part that needs the network) and
 * connects `createWebSocketInspector` to it; pass `inspection.inspect` as `createGateway`'s `inspect`.
 *
 * What leaves the process is sanitized first: strings under key-like names are redacted, long strings
 * (document text, prompts, answers) are cut to a preview, and `Secret`s already serialise as a fingerprint.
 */
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import type { AnyEventObject, InspectionEvent, MachineContext, Observer } from 'xstate';

export interface InspectionOptions {
  /** The relay's port (default 8080). */
  readonly port?: number;
  /** Start the relay in this process (default true); false: connect to one already running at `url`. */
  readonly relay?: boolean;
  /** The relay's WebSocket URL (default `ws://localhost:<port>`). */
  readonly url?: string;
}

export interface Inspection {
  /** For `createGateway({ inspect })`. */
  readonly inspect: Observer<InspectionEvent>;
  /** The relay's viewer page (open it in a browser with network access), when started here. */
  readonly viewerUrl: string | undefined;
  /** The WebSocket URL the inspector sends to. */
  readonly url: string;
  stop(): void;
}

const maxStringLength = 160;
/** Strings up to this length pass whole, so a string cut once is not cut again. */
const cutAbove = maxStringLength + 40;
const maxDepth = 8;
const secretName = /(api[-_]?key|^key$|token|secret|authorization|password)/i;

/** A copy of `value` safe to hand to an inspector: key-like fields redacted, long strings cut. */
export function sanitizeForInspection(value: unknown, depth = 0, name = ''): unknown {
  if (typeof value === 'string') {
    if (secretName.test(name)) return '[redacted]';
    return value.length > cutAbove ? `${value.slice(0, maxStringLength)}… (${value.length} chars)` : value;
  }
  if (value === null || typeof value !== 'object') return value;
  if (depth >= maxDepth) return '[…]';
  const withJson = value as { toJSON?: () => unknown };
  if (typeof withJson.toJSON === 'function' && !Array.isArray(value)) return sanitizeForInspection(withJson.toJSON(), depth + 1, name);
  if (Array.isArray(value)) return value.slice(0, 50).map((item) => sanitizeForInspection(item, depth + 1, name));
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) {
    // Actor refs, AbortSignals, class instances: their name, not their insides.
    const constructorName = (value as { constructor?: { name?: string } }).constructor?.name ?? 'object';
    const id = (value as { id?: unknown }).id;
    return typeof id === 'string' ? `[${constructorName} ${id}]` : `[${constructorName}]`;
  }
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) copy[key] = sanitizeForInspection(item, depth + 1, key);
  return copy;
}

export const sanitizeEvent = (event: AnyEventObject): AnyEventObject => {
  const sanitized = sanitizeForInspection(event);
  return typeof sanitized === 'object' && sanitized !== null ? { ...(sanitized as Record<string, unknown>), type: event.type } : { type: event.type };
};

export const sanitizeContext = (context: MachineContext): MachineContext => {
  const sanitized = sanitizeForInspection(context);
  return typeof sanitized === 'object' && sanitized !== null ? (sanitized as MachineContext) : {};
};

/**
 * The last step before an event leaves: the whole snapshot (context, but also `input` and `output`,
 * which carry the request and the answer) and the event, sanitized. The machine `definition` stays whole.
 */
export function serializeForInspection(event: StatelyInspectionEvent): StatelyInspectionEvent {
  const copy: Record<string, unknown> = { ...event };
  if ('snapshot' in event) copy.snapshot = sanitizeForInspection(event.snapshot);
  if ('event' in event) copy.event = sanitizeEvent(event.event);
  // Same shape with sanitized values: `sanitizeForInspection` keeps every key and object nesting.
  return copy as unknown as StatelyInspectionEvent;
}

/** Starts the relay (unless `relay: false`) and the WebSocket inspector. Loaded only when INSPECT is set. */
export async function startInspection(options: InspectionOptions = {}): Promise<Inspection> {
  const port = options.port ?? 8080;
  const url = options.url ?? `ws://localhost:${port}`;
  let stopRelay: (() => void) | undefined;
  if (options.relay ?? true) {
    const { createInspectorServer } = await import('@statelyai/inspect/server');
    stopRelay = createInspectorServer({ port, autoOpen: false }).stop;
  }
  const { createWebSocketInspector } = await import('@statelyai/inspect');
  const inspector = createWebSocketInspector({ url, sanitizeEvent, sanitizeContext, serialize: serializeForInspection });
  return {
    inspect: inspector.inspect,
    viewerUrl: stopRelay === undefined ? undefined : `http://localhost:${port}`,
    url,
    stop() {
      inspector.stop();
      stopRelay?.();
    },
  };
}
