/**
 * What `GET /openapi.json` says beyond the routes' own zod schemas (docs/api.md "OpenAPI"): the key headers
 * and the admin token as security schemes, the event streams as `text/event-stream` responses naming their
 * events, the upload as a `multipart/form-data` body, and the shared schemas as `components.schemas`.
 *
 * The components are the route schemas themselves, registered with an `id` (`.meta({ id })`) where they
 * are defined: a field added to a route's schema appears in its component with no second list to keep.
 */
import type {
  FastifyDynamicSwaggerOptions,
  SwaggerTransform,
  SwaggerTransformObject,
} from '@fastify/swagger';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ProviderId } from '../providers/index.js';
import { keyHeaders } from './keys.js';

declare module 'fastify' {
  interface FastifySchema {
    /**
     * A body read by a plugin rather than validated (the multipart upload): documented as `consumes`
     * says, never handed to the validator (which would meet a body the route has not read yet).
     */
    readonly documentedBody?: z.ZodType;
  }
}

/** The security scheme of each provider's key header (`apiKey`, `in: header`). */
const keySchemeNames: Readonly<Record<ProviderId, string>> = {
  claude: 'claudeKey',
  gpt: 'gptKey',
  timelygpt: 'timelygptKey',
};

/** The admin bearer token (ADMIN_TOKEN) of the breaker route. */
export const adminSecurity = [{ adminToken: [] }];

/**
 * The security of a route that takes provider keys: any one key header will do (OpenAPI's alternatives),
 * and the route uses every one it is sent.
 */
export const keySecurity = Object.values(keySchemeNames).map((name) => ({ [name]: [] }));

const securitySchemes = {
  ...Object.fromEntries(
    (Object.keys(keySchemeNames) as ProviderId[]).map((id) => [
      keySchemeNames[id],
      {
        type: 'apiKey' as const,
        in: 'header' as const,
        name: keyHeaders[id],
        description: `Your own ${id} API key, used for this request's calls to ${id} only; never stored, logged or echoed.`,
      },
    ]),
  ),
  adminToken: {
    type: 'http' as const,
    scheme: 'bearer',
    description: 'ADMIN_TOKEN: the operator token of the breaker controls.',
  },
};

/**
 * A `text/event-stream` response whose events are `events` (name → the JSON of its `data:` line). The schema
 * is one item of the stream, `{event, data}`, in the shape OpenAPI 3.2 gives a sequential media type's
 * `itemSchema`, so a 3.0 reader sees the events and each one's data; `x-events` lists the names in order.
 */
export function eventStreamResponse(description: string, events: Readonly<Record<string, z.ZodType>>) {
  const [first, ...rest] = Object.entries(events).map(([name, data]) =>
    z
      .object({ event: z.literal(name), data })
      .describe(`The \`${name}\` event: \`event: ${name}\`, then \`data:\` this JSON.`),
  );
  if (first === undefined) throw new Error('An event stream has at least one event.');
  const names = Object.keys(events)
    .map((name) => `\`${name}\``)
    .join(', ');
  return {
    description: `${description} Server-sent events, each \`event: <name>\` and one \`data:\` line of JSON: ${names}. Comment lines keep it alive.`,
    content: {
      'text/event-stream': {
        schema: z.discriminatedUnion('event', [first, ...rest]).meta({ 'x-events': Object.keys(events) }),
      },
    },
  };
}

/** zod's transform, with a route's `documentedBody` documented as its body. */
const transform: SwaggerTransform = (input) => {
  const documentedBody = input.schema.documentedBody;
  if (documentedBody === undefined) return jsonSchemaTransform(input);
  const { documentedBody: _documented, ...schema } = input.schema;
  return jsonSchemaTransform({ ...input, schema: { ...schema, body: documentedBody } });
};

/** Every `#/components/schemas/<name>` the value refers to. */
function referencedComponents(value: unknown, found: Set<string>): Set<string> {
  if (Array.isArray(value)) for (const item of value) referencedComponents(item, found);
  else if (typeof value === 'object' && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string' && child.startsWith('#/components/schemas/'))
        found.add(child.slice('#/components/schemas/'.length));
      else referencedComponents(child, found);
    }
  }
  return found;
}

/**
 * zod's components (every registered schema twice: as read, `<id>Input`, and as written, `<id>`), less the
 * ones nothing refers to, so the document lists each shared schema in the direction it is used.
 */
const transformObject: SwaggerTransformObject = (input) => {
  const document = jsonSchemaTransformObject(input) as {
    paths?: unknown;
    components?: { schemas?: Record<string, unknown> };
  };
  const schemas = document.components?.schemas ?? {};
  const used = referencedComponents(document.paths, new Set());
  // Components refer to components: follow them until nothing new is found.
  for (let size = -1; size !== used.size;) {
    size = used.size;
    for (const name of [...used]) referencedComponents(schemas[name], used);
  }
  const kept = Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name)));
  return {
    ...document,
    components: { ...document.components, schemas: kept },
  } as ReturnType<SwaggerTransformObject>;
};

/** The @fastify/swagger options of the service. */
export function openApiOptions(demo?: { readonly emulatorUrl: string }): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'study-helper',
        version: '1',
        description:
          'PDF to study notes and quizzes through your own LLM provider keys, resilient to provider failure. ' +
          `Keys travel in the headers ${Object.values(keyHeaders).join(', ')} (the security schemes claudeKey, gptKey, timelygptKey); ` +
          'a route that takes keys uses every one it is sent.' +
          (demo ? ` Demo mode: providers are emulated at ${demo.emulatorUrl}.` : ''),
      },
      components: { securitySchemes },
    },
    transform,
    transformObject,
  };
}
