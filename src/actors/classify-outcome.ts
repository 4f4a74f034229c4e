import { ownClasses, type ProviderFailure } from '../errors/index.js';

/** Which of the two signals around an upstream call fired, if any. */
export interface CallSignals {
  /** Our own overall deadline (PROVIDER_TIMEOUT_MS): a provider-side `timeout`, counted. */
  readonly deadlineFired: boolean;
  /** The caller went away or cancelled: `aborted`, counted nowhere. */
  readonly callerAborted: boolean;
}

/**
 * The verdict on a failed upstream call. The deadline and the caller's abort both abort the SDK
 * call the same way, so the SDK error alone cannot tell a timeout (counts) from a cancel (never
 * counts); the signal that fired decides, and only otherwise the adapter's classifier.
 */
export function classifyOutcome(
  error: unknown,
  signals: CallSignals,
  classify: (error: unknown) => ProviderFailure,
  timeoutMs: number,
): ProviderFailure {
  if (signals.callerAborted)
    return { errorClass: ownClasses.callerAborted, message: 'The caller cancelled the request.' };
  if (signals.deadlineFired) {
    return {
      errorClass: ownClasses.deadlineFired,
      message: `The provider did not answer within ${timeoutMs} ms.`,
    };
  }
  return classify(error);
}
