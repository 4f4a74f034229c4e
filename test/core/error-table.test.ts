import { describe, expect, it } from 'vitest';
import {
  countedClassGuard,
  countedErrorClasses,
  errorClasses,
  keyVerdictInTable,
  errorTable,
  ignoredErrorClasses,
  ownClasses,
} from '../../src/errors/index.js';
import { errorCodes } from '../../src/http/errors.js';
import { documentClasses, errorsMd, withRow } from './errors-md.js';

describe('the error table in src/errors', () => {
  it("holds exactly docs/errors.md's rows (B, R, F) and docs/api.md's status and code for each class", () => {
    expect(errorClasses).toEqual(documentClasses);
    for (const errorClass of documentClasses) {
      const row = errorTable[errorClass];
      const doc = errorsMd[errorClass];
      expect({ class: errorClass, B: row.breaker === 'counts', R: row.retry, F: row.fallback }).toEqual({
        class: errorClass,
        B: doc.B,
        R: doc.R,
        F: doc.F,
      });
      expect({ class: errorClass, status: row.api.status, code: row.api.code }).toEqual({
        class: errorClass,
        status: doc.status,
        code: doc.code,
      });
    }
  });

  it("gives every class's API answer a sentence of its own words (docs/api.md error body `message`)", () => {
    // prettier-ignore
    const messages: Readonly<Record<string, string>> = {
      auth: 'The provider refused the API key.',
      permission: 'The API key is not permitted to use this model or region.',
      quota_exhausted: 'The API key has no credit or has reached its spend limit.',
      rate_limited: 'The API key is rate limited.',
      bad_request: 'The provider refused the request as malformed.',
      context_too_long: 'The document is too long for the model.',
      not_found: 'The provider does not know the model.',
      server_error: 'No provider could answer.',
      overloaded: 'No provider could answer.',
      timeout: 'No provider could answer.',
      connection: 'No provider could answer.',
      aborted: 'The request was cancelled.',
      invalid_output: 'The model answered, but its output failed validation.',
      circuit_open: 'Every provider is unavailable (circuit open).',
    };
    expect(Object.fromEntries(documentClasses.map((c) => [c, errorTable[c].api.message]))).toEqual(messages);
  });

  it('derives the counted and ignored class lists from column B', () => {
    expect([...countedErrorClasses].sort()).toEqual(documentClasses.filter((c) => errorsMd[c].B).sort());
    expect([...ignoredErrorClasses].sort()).toEqual(documentClasses.filter((c) => !errorsMd[c].B).sort());
  });

  it("answers every class with a code of the HTTP registry, at the registry's status", () => {
    for (const errorClass of documentClasses) {
      const { code, status } = errorsMd[errorClass];
      expect(Object.hasOwn(errorCodes, code)).toBe(true);
      expect(errorCodes[code as keyof typeof errorCodes].status).toBe(status);
    }
  });

  it('names our own classes as docs/errors.md does: cancel → aborted, deadline → timeout, bad answer → invalid_output, refusal → circuit_open', () => {
    expect(ownClasses).toEqual({
      callerAborted: 'aborted',
      deadlineFired: 'timeout',
      invalidOutput: 'invalid_output',
      breakerRefused: 'circuit_open',
    });
  });
});

describe('the error table, columns the machines read through a table', () => {
  it("gives column K as docs/errors.md writes it: auth, permission, quota quarantine the key, a rate limit cools it, nothing else touches it", () => {
    // prettier-ignore
    const columnK: Readonly<Record<string, string>> = {
      auth: 'quarantine', permission: 'quarantine', quota_exhausted: 'quarantine', rate_limited: 'cool',
      bad_request: 'none', context_too_long: 'none', not_found: 'none', server_error: 'none', overloaded: 'none',
      timeout: 'none', connection: 'none', aborted: 'none', invalid_output: 'none', circuit_open: 'none',
    };
    expect(Object.fromEntries(documentClasses.map((c) => [c, keyVerdictInTable(errorTable, c)]))).toEqual(columnK);
  });

  it('reads column B of the table it is given: the production rows, or a flipped row on purpose', () => {
    const production = countedClassGuard(errorTable);
    expect(documentClasses.filter((c) => production(c))).toEqual(documentClasses.filter((c) => errorsMd[c].B));
    const flipped = countedClassGuard(withRow('rate_limited', { breaker: 'counts' }));
    expect(flipped('rate_limited')).toBe(true);
    expect(production('rate_limited')).toBe(false);
  });
});
