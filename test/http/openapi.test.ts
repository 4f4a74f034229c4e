import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig } from './support.js';

interface Schema {
  type?: string;
  format?: string;
  $ref?: string;
  enum?: unknown[];
  required?: string[];
  properties?: Record<string, Schema>;
  oneOf?: Schema[];
}
interface Operation {
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: unknown }> }>;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string }[];
}
interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, Schema>;
    securitySchemes: Record<string, { type: string; in?: string; name?: string; scheme?: string }>;
  };
}

let app: FastifyInstance;
let document: OpenApiDocument;

beforeAll(async () => {
  app = await buildApp({
    config: testConfig({ ADMIN_TOKEN: 'test-admin-token-0001' }),
    gateway: staticGateway(),
    documentStore: createMemoryDocumentStore({ ttlSeconds: 60 }),
    processMetrics: false,
  });
  const response = await app.inject({ method: 'GET', url: '/openapi.json' });
  expect(response.statusCode).toBe(200);
  document = JSON.parse(response.body) as OpenApiDocument;
});

afterAll(async () => {
  await app.close();
});

/** docs/api.md's endpoints (jobs and the web page are registered by their own plugins). */
const contractOperations: readonly [string, string][] = [
  ['post', '/v1/documents'],
  ['post', '/v1/generate'],
  ['get', '/v1/providers'],
  ['post', '/v1/providers/{id}/breaker'],
  ['get', '/healthz'],
  ['get', '/readyz'],
  ['get', '/metrics'],
];

describe('GET /openapi.json', () => {
  it('is an OpenAPI 3 document', () => {
    expect(document.openapi).toMatch(/^3\.\d+\.\d+$/);
    expect(document.info.title).toBe('study-helper');
    expect(typeof document.paths).toBe('object');
  });

  it.each(contractOperations)('documents %s %s', (method, path) => {
    expect(document.paths[path]?.[method]).toBeDefined();
  });

  it('leaves its own plumbing out', () => {
    expect(Object.keys(document.paths)).not.toContain('/openapi.json');
    expect(Object.keys(document.paths).some((path) => path.startsWith('/docs'))).toBe(false);
  });

  it('has a schema for every response and every JSON request body, each a compilable JSON schema', () => {
    const ajv = new Ajv({ strict: false, allErrors: true });
    ajv.addKeyword('example');
    let checked = 0;
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const responses = Object.entries(operation.responses ?? {});
        expect(responses.length, `${method} ${path} has responses`).toBeGreaterThan(0);
        for (const [status, response] of responses) {
          expect(typeof response.description, `${method} ${path} ${status} description`).toBe('string');
          const contents = Object.values(response.content ?? {});
          expect(contents.length, `${method} ${path} ${status} has content`).toBeGreaterThan(0);
          for (const content of contents) {
            expect(content.schema, `${method} ${path} ${status} schema`).toBeDefined();
            // References point into the document's components.
            ajv.compile({ ...(content.schema as object), components: document.components });
            checked += 1;
          }
        }
        for (const content of Object.values(operation.requestBody?.content ?? {})) {
          ajv.compile({ ...(content.schema as object), components: document.components });
        }
      }
    }
    expect(checked).toBeGreaterThan(10);
  });

  it('describes the generate body strictly', () => {
    const body = document.paths['/v1/generate']?.post?.requestBody?.content?.['application/json']?.schema as {
      properties: Record<string, unknown>;
      required: string[];
      additionalProperties: boolean;
    };
    expect(Object.keys(body.properties).sort()).toEqual(['documentId', 'options', 'pages', 'providers', 'task', 'text']);
    expect(body.required).toEqual(['task']);
    expect(body.additionalProperties).toBe(false);
  });

  it('serves the UI at /docs', async () => {
    const response = await app.inject({ method: 'GET', url: '/docs/' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toContain('text/html');
  });
});

/** The events a `text/event-stream` response declares, each with its data schema (the `{event, data}` items). */
function streamEvents(operation: Operation | undefined, status: string): Map<string, Schema> {
  const schema = operation?.responses?.[status]?.content?.['text/event-stream']?.schema as Schema | undefined;
  const events = new Map<string, Schema>();
  for (const item of schema?.oneOf ?? []) {
    const name = item.properties?.event?.enum?.[0];
    const data = item.properties?.data;
    if (typeof name === 'string' && data !== undefined) events.set(name, data);
  }
  return events;
}

/** Every `$ref` in the value. */
function refsIn(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) for (const item of value) refsIn(item, found);
  else if (typeof value === 'object' && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string') found.push(child);
      else refsIn(child, found);
    }
  }
  return found;
}

describe('GET /openapi.json says what the routes take and give', () => {
  it('is a valid OpenAPI document (the OpenAPI schema validator)', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as unknown as Record<string, unknown>);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('declares the streamed generation as text/event-stream naming its events, beside the JSON answer', () => {
    const generate = document.paths['/v1/generate']?.post;
    expect(Object.keys(generate?.responses?.['200']?.content ?? {}).sort()).toEqual(['application/json', 'text/event-stream']);
    const events = streamEvents(generate, '200');
    expect([...events.keys()].sort()).toEqual(['attempt', 'delta', 'done', 'error', 'item', 'reset']);
    // `done` carries the JSON answer, `attempt` an Attempt: the same components as the JSON API.
    expect(events.get('done')?.$ref).toBe('#/components/schemas/Generation');
    expect((generate?.responses?.['200']?.content?.['application/json']?.schema as Schema).$ref).toBe('#/components/schemas/Generation');
    expect(events.get('attempt')?.$ref).toBe('#/components/schemas/Attempt');
    expect(Object.keys(events.get('delta')?.properties ?? {}).sort()).toEqual(['provider', 'text']);
    expect(Object.keys(events.get('error')?.properties ?? {}).sort()).toEqual(['error', 'status']);
  });

  it("declares a job's events as text/event-stream naming them, done with every final status", () => {
    const jobEvents = document.paths['/v1/jobs/{id}/events']?.get;
    expect(Object.keys(jobEvents?.responses?.['200']?.content ?? {})).toEqual(['text/event-stream']);
    const events = streamEvents(jobEvents, '200');
    expect([...events.keys()].sort()).toEqual(['attempt', 'done', 'item', 'progress', 'reset']);
    expect(events.get('attempt')?.$ref).toBe('#/components/schemas/Attempt');
    expect(events.get('done')?.properties?.status?.enum?.slice().sort()).toEqual(['cancelled', 'failed', 'interrupted', 'succeeded']);
    expect(Object.keys(events.get('progress')?.properties ?? {}).sort()).toEqual(['part', 'parts', 'progress', 'stage']);
    const breakers = streamEvents(document.paths['/v1/providers/events']?.get, '200');
    expect([...breakers.keys()].sort()).toEqual(['snapshot', 'transition']);
  });

  it('declares each key header as an apiKey security scheme, on exactly the routes that take keys', () => {
    const schemes = document.components.securitySchemes;
    expect(schemes.claudeKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-claude-key' });
    expect(schemes.gptKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-gpt-key' });
    expect(schemes.timelygptKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-timelygpt-key' });
    expect(schemes.adminToken).toMatchObject({ type: 'http', scheme: 'bearer' });
    const anyKey = [{ claudeKey: [] }, { gptKey: [] }, { timelygptKey: [] }];
    const takesKeys = ['post /v1/generate', 'post /v1/jobs', 'post /v1/jobs/{id}/resume', 'get /v1/keys/status'];
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const route = `${method} ${path}`;
        if (takesKeys.includes(route)) expect(operation.security, route).toEqual(anyKey);
        else if (route === 'post /v1/providers/{id}/breaker') expect(operation.security, route).toEqual([{ adminToken: [] }]);
        else expect(operation.security, route).toBeUndefined();
        // The keys are schemes, not header parameters as well.
        expect((operation.parameters ?? []).filter((parameter) => parameter.in === 'header' && /key/iu.test(parameter.name)), route).toEqual([]);
      }
    }
  });

  it('declares the upload as a multipart/form-data body with its binary file', () => {
    const body = document.paths['/v1/documents']?.post?.requestBody?.content;
    expect(Object.keys(body ?? {})).toEqual(['multipart/form-data']);
    const form = body?.['multipart/form-data']?.schema as Schema;
    expect(form.type).toBe('object');
    expect(form.required).toEqual(['file']);
    expect(form.properties?.file).toMatchObject({ type: 'string', format: 'binary' });
  });

  it('shares its schemas as components, each one referred to and every reference resolving', () => {
    const components = document.components.schemas;
    for (const name of ['Attempt', 'Error', 'GenerationError', 'Meta', 'Generation', 'Usage', 'Job', 'Document', 'ProviderStatus', 'NotesResult']) {
      expect(components[name], name).toBeDefined();
    }
    const refs = refsIn(document);
    for (const ref of refs) expect(components[ref.replace('#/components/schemas/', '')], ref).toBeDefined();
    for (const name of Object.keys(components)) expect(refs, name).toContain(`#/components/schemas/${name}`);
    // The error body of every route is the one component.
    expect((document.paths['/v1/documents']?.post?.responses?.['415']?.content?.['application/json']?.schema as Schema).$ref).toBe('#/components/schemas/Error');
    expect((document.paths['/v1/generate']?.post?.responses?.['503']?.content?.['application/json']?.schema as Schema).$ref).toBe('#/components/schemas/GenerationError');
  });
});
