import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createMemoryDocumentStore } from '../../src/documents/index.js';
import { buildApp } from '../../src/http/app.js';
import { staticGateway, testConfig } from './support.js';

interface Operation {
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: unknown }> }>;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
}
interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
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
            ajv.compile(content.schema as object);
            checked += 1;
          }
        }
        for (const content of Object.values(operation.requestBody?.content ?? {})) {
          ajv.compile(content.schema as object);
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
