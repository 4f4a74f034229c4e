import {
  clipText,
  errorPolicy,
  maxReasonsChars,
  reasonsOfInvalidOutputMessage,
  isProviderSideIn,
  ownClasses,
  type ErrorClass,
  type ErrorTable,
} from '../errors/index.js';
import type { Attempt } from './types.js';

/** How a run where every provider failed is answered (docs/api.md "When every provider fails"). */
export interface FailureVerdict {
  readonly httpStatus: number;
  readonly code: string;
  readonly message: string;
  readonly retryAfterSeconds?: number;
}

/** The class an attempt stands for; a skip is the breaker's refusal. */
function classOf(attempt: Attempt): ErrorClass {
  return attempt.errorClass ?? ownClasses.breakerRefused;
}

/** The class whose API answer stands for a mix with a provider-side class in it. */
const mixedProviderSide: ErrorClass = 'server_error';

/**
 * docs/api.md's table, read from the error table's `api` column: one class everywhere → its row; any
 * provider-side class or an open circuit in the mix → 503; any other mix → the first provider's class.
 * `retryAfterMs` are the hints known (upstream `retry-after`, time to the earliest half-open), of which
 * the earliest is answered, on 429 and 503 only.
 */
export function failureVerdict(
  attempts: readonly Attempt[],
  retryAfterMs: readonly number[],
  table: ErrorTable = errorPolicy,
): FailureVerdict {
  const failed = attempts.filter((attempt) => attempt.outcome !== 'succeeded');
  const classes = failed.map(classOf);
  const first = classes[0] ?? ownClasses.breakerRefused;
  const uniform = classes.every((errorClass) => errorClass === first);
  const providerSide = classes.some((errorClass) => isProviderSideIn(table, errorClass));
  const answer = table[uniform || !providerSide ? first : mixedProviderSide].api;
  const stated = { httpStatus: answer.status, code: answer.code, message: answer.message };
  const base = stated.code === 'INVALID_PROVIDER_OUTPUT' ? { ...stated, message: invalidOutputVerdictMessage(stated.message, failed) } : stated;
  const hints = retryAfterMs.filter((ms) => Number.isFinite(ms) && ms > 0);
  const retryAfterSeconds = hints.length > 0 ? Math.max(1, Math.ceil(Math.min(...hints) / 1000)) : undefined;
  const answersRetryAfter = base.httpStatus === 429 || base.httpStatus === 503;
  return answersRetryAfter && retryAfterSeconds !== undefined ? { ...base, retryAfterSeconds } : base;
}

/**
 * The 502's message with why the output failed: each provider's last validation reasons (already
 * bounded per attempt), the whole capped at twice one attempt's summary.
 */
function invalidOutputVerdictMessage(base: string, failed: readonly Attempt[]): string {
  const byProvider = new Map<string, string>();
  for (const attempt of failed) {
    const reasons = attempt.errorClass === 'invalid_output' ? reasonsOfInvalidOutputMessage(attempt.message) : undefined;
    if (reasons !== undefined) byProvider.set(attempt.provider, reasons);
  }
  if (byProvider.size === 0) return base;
  const detail = [...byProvider].map(([provider, reasons]) => `${provider}: ${reasons}`).join(' | ');
  return `${base} ${clipText(detail, maxReasonsChars * 2)}`;
}
