/**
 * An OTLP/HTTP trace receiver for tests: takes `POST /v1/traces` as OTLP/JSON or OTLP/protobuf and keeps
 * every raw body and every span, decoded on its own (the JSON mapping, and the protobuf wire format
 * read field by field after opentelemetry-proto's trace.proto), never through the exporter's code.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type AttributeValue = string | number | boolean | readonly AttributeValue[] | null;

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  /** 1 internal, 2 server, 3 client. */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  readonly events: readonly {
    readonly name: string;
    readonly attributes: Readonly<Record<string, AttributeValue>>;
  }[];
  /** 0 unset, 1 ok, 2 error. */
  readonly statusCode: number;
  readonly resource: Readonly<Record<string, AttributeValue>>;
  readonly scope: string;
}

export interface OtlpReceiver {
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Every request body as received, with its content type. */
  readonly bodies: { readonly contentType: string; readonly body: Buffer }[];
  close(): Promise<void>;
}

// --- OTLP/JSON (ids are hex strings, 64-bit integers may be strings) ---

interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}
interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: JsonAnyValue[] };
}

function jsonValue(value: JsonAnyValue | undefined): AttributeValue {
  if (value === undefined) return null;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(jsonValue);
  return null;
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((pair) => [pair.key, jsonValue(pair.value)]));
}

interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  attributes?: JsonKeyValue[];
  events?: { name: string; attributes?: JsonKeyValue[] }[];
  status?: { code?: number };
}

function decodeJson(body: Buffer): ReceivedSpan[] {
  const request = JSON.parse(body.toString('utf8')) as {
    resourceSpans?: {
      resource?: { attributes?: JsonKeyValue[] };
      scopeSpans?: { scope?: { name?: string }; spans?: JsonSpan[] }[];
    }[];
  };
  return (request.resourceSpans ?? []).flatMap((resourceSpans) =>
    (resourceSpans.scopeSpans ?? []).flatMap((scopeSpans) =>
      (scopeSpans.spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind ?? 0,
        attributes: jsonAttributes(span.attributes),
        events: (span.events ?? []).map((event) => ({
          name: event.name,
          attributes: jsonAttributes(event.attributes),
        })),
        statusCode: span.status?.code ?? 0,
        resource: jsonAttributes(resourceSpans.resource?.attributes),
        scope: scopeSpans.scope?.name ?? '',
      })),
    ),
  );
}

// --- OTLP/protobuf: the wire format (varint, 64-bit, length-delimited, 32-bit) ---

type Field = {
  readonly number: number;
  readonly wire: number;
  readonly varint: bigint;
  readonly bytes: Buffer;
};

function readVarint(buffer: Buffer, at: { pos: number }): bigint {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    const byte = buffer[at.pos];
    if (byte === undefined) throw new Error('truncated varint');
    at.pos += 1;
    result |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return result;
    shift += 7n;
  }
}

function fields(buffer: Buffer): Field[] {
  const out: Field[] = [];
  const at = { pos: 0 };
  while (at.pos < buffer.length) {
    const tag = Number(readVarint(buffer, at));
    const number = tag >> 3;
    const wire = tag & 7;
    if (wire === 0) out.push({ number, wire, varint: readVarint(buffer, at), bytes: Buffer.alloc(0) });
    else if (wire === 1 || wire === 5) {
      const size = wire === 1 ? 8 : 4;
      out.push({ number, wire, varint: 0n, bytes: buffer.subarray(at.pos, at.pos + size) });
      at.pos += size;
    } else if (wire === 2) {
      const length = Number(readVarint(buffer, at));
      out.push({ number, wire, varint: 0n, bytes: buffer.subarray(at.pos, at.pos + length) });
      at.pos += length;
    } else throw new Error(`unexpected wire type ${wire}`);
  }
  return out;
}

const each = (buffer: Buffer, number: number): Field[] =>
  fields(buffer).filter((field) => field.number === number);
const first = (buffer: Buffer, number: number): Field | undefined => each(buffer, number)[0];
const text = (buffer: Buffer, number: number): string => first(buffer, number)?.bytes.toString('utf8') ?? '';

/** AnyValue: 1 string, 2 bool, 3 int, 4 double, 5 array. */
function protobufValue(buffer: Buffer): AttributeValue {
  const field = fields(buffer)[0];
  if (field === undefined) return null;
  switch (field.number) {
    case 1:
      return field.bytes.toString('utf8');
    case 2:
      return field.varint !== 0n;
    case 3:
      return Number(BigInt.asIntN(64, field.varint));
    case 4:
      return field.bytes.readDoubleLE(0);
    case 5:
      return each(field.bytes, 1).map((item) => protobufValue(item.bytes));
    default:
      return null;
  }
}

/** repeated KeyValue (1 key, 2 value) at field `number`. */
function protobufAttributes(buffer: Buffer, number: number): Record<string, AttributeValue> {
  return Object.fromEntries(
    each(buffer, number).map((pair) => [
      text(pair.bytes, 1),
      protobufValue(first(pair.bytes, 2)?.bytes ?? Buffer.alloc(0)),
    ]),
  );
}

function decodeProtobuf(body: Buffer): ReceivedSpan[] {
  // ExportTraceServiceRequest: 1 resource_spans. ResourceSpans: 1 resource (1 attributes), 2 scope_spans.
  // ScopeSpans: 1 scope (1 name), 2 spans. Span: 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind,
  // 9 attributes, 11 events (2 name, 3 attributes), 15 status (3 code).
  return each(body, 1).flatMap((resourceSpans) => {
    const resource = protobufAttributes(first(resourceSpans.bytes, 1)?.bytes ?? Buffer.alloc(0), 1);
    return each(resourceSpans.bytes, 2).flatMap((scopeSpans) => {
      const scope = text(first(scopeSpans.bytes, 1)?.bytes ?? Buffer.alloc(0), 1);
      return each(scopeSpans.bytes, 2).map((span) => ({
        traceId: first(span.bytes, 1)?.bytes.toString('hex') ?? '',
        spanId: first(span.bytes, 2)?.bytes.toString('hex') ?? '',
        parentSpanId: first(span.bytes, 4)?.bytes.toString('hex') ?? '',
        name: text(span.bytes, 5),
        kind: Number(first(span.bytes, 6)?.varint ?? 0n),
        attributes: protobufAttributes(span.bytes, 9),
        events: each(span.bytes, 11).map((event) => ({
          name: text(event.bytes, 2),
          attributes: protobufAttributes(event.bytes, 3),
        })),
        statusCode: Number(first(first(span.bytes, 15)?.bytes ?? Buffer.alloc(0), 3)?.varint ?? 0n),
        resource,
        scope,
      }));
    });
  });
}

/** Starts a receiver on 127.0.0.1; `url` is its base (the exporter appends `/v1/traces`). */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: { contentType: string; body: Buffer }[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      const contentType = request.headers['content-type'] ?? '';
      bodies.push({ contentType, body });
      if (request.method !== 'POST' || request.url !== '/v1/traces') {
        response.writeHead(404).end();
        return;
      }
      try {
        spans.push(...(contentType.includes('json') ? decodeJson(body) : decodeProtobuf(body)));
      } catch (error) {
        response.writeHead(400).end(String(error));
        return;
      }
      const json = contentType.includes('json');
      response
        .writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' })
        .end(json ? '{}' : Buffer.alloc(0));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
