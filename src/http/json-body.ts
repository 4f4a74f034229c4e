/**
 * The JSON body parser of every route: Fastify's own (secure-json-parse, proto and constructor
 * poisoning refused), behind a linear depth scan. A body nested deeper than `maxJsonDepth` is refused
 * (400 `INVALID_REQUEST`) at the first byte past the limit, without `JSON.parse` ever seeing it: a 2 MB
 * body of `[[[[…` would stall the event loop in `JSON.parse` every request. The size of a body is bounded
 * first,
 * by each route's own `bodyLimit` (app.ts), while it streams.
 */
import type { FastifyInstance } from 'fastify';
import { jsonNestsDeeperThan, maxJsonDepth } from '../security/json-depth.js';
import { ApiError } from './errors.js';

/** Replaces the `application/json` parser of `app` with the depth-checked one. */
export function registerJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (jsonNestsDeeperThan(body as string, maxJsonDepth)) {
      done(new ApiError('INVALID_REQUEST', `The JSON body nests deeper than ${maxJsonDepth} levels.`), undefined);
      return;
    }
    parse(request, body as string, done);
  });
}
