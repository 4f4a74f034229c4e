import type { ProviderFailure } from '../../errors/index.js';
import {
  classifyTransportError,
  classifyUnknown,
  classOfStatus,
  failure,
  retryAfterMsOf,
} from '../classify-common.js';
import { TimelyGptHttpError } from './errors.js';

/**
 * Pure: an error the TimelyGPT adapter rejected with → its docs/errors.md class.
 * 401 is `auth` from either endpoint: a 401 from `llm-completion` only gets here after the one
 * automatic re-authentication failed too. 402 quota, 403 permission, 429 rate limit, 5xx and a
 * `{"type":"error"}` inside a 2xx (an `UnexpectedResponseError`) server_error.
 */
export function classifyTimelyGptError(error: unknown): ProviderFailure {
  if (error instanceof TimelyGptHttpError) {
    return failure(classOfStatus(error.status), error, `TimelyGPT ${error.endpoint}: ${error.message}`, {
      httpStatus: error.status,
      retryAfterMs: retryAfterMsOf(error.headers),
    });
  }
  return classifyTransportError(error) ?? classifyUnknown(error);
}
