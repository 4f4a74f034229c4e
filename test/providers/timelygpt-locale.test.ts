import { describe, expect, it } from 'vitest';
import { completionBody } from '../../src/providers/timelygpt/adapter.js';
import { studyRequest } from './helpers.js';

describe('TimelyGPT locale', () => {
  it("is the request's lang field, not a marker parsed out of the prompt", () => {
    const request = studyRequest('notes', { lang: 'en' });
    // The prompt says "ko"; the field says "en": the field wins.
    expect(completionBody({ ...request, system: '{"lang":"ko"}' }, 'm').locale).toBe('en');
    expect(completionBody({ ...request, lang: 'ko', system: '{"lang":"en"}' }, 'm').locale).toBe('ko');
  });
});
