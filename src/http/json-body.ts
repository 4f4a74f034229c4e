/**
 * The JSON body parser of every route: Fastify's own (secure-json-parse, proto and constructor
 * poisoning refused), behind a linear depth scan. A body nested deeper than `maxJsonDepth` is refused
 * (400 `INVALID_REQUEST`) at the first byte past the limit, without `JSON.parse` ever seeing it: a 2 MB
 * body of `[[[[…` would stall the event loop in `JSON.parse` every request. The size of a body is bounded
 * first, by each route's own `bodyLimit` (app.ts), while it streams. The same scan counts the values in the
 * body's arrays and objects: past `maxJsonValues` (far more than any honest body holds) the body is refused
 * before `JSON.parse`, the schema and the error message work through each of them.
 */
import type { FastifyInstance } from 'fastify';
import { jsonShapeBreach, maxJsonDepth, maxJsonValues } from '../security/json-depth.js';
import { ApiError } from './errors.js';

/** Replaces the `application/json` parser of `app` with the depth-checked one. */
export function registerJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const breach = jsonShapeBreach(body as string, maxJsonDepth, maxJsonValues);
    if (breach !== undefined) {
      const what = breach === 'depth' ? `nests deeper than ${maxJsonDepth} levels` : `holds more than ${maxJsonValues} values in its arrays and objects`;
      done(new ApiError('INVALID_REQUEST', `The JSON body ${what}.`), undefined);
      return;
    }
    parse(request, body as string, done);
  });
}
