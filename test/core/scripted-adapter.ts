import type { ProviderFailure } from '../../src/errors/index.js';
import type {
  GenerationRequest,
  ProviderAdapter,
  ProviderAnswer,
  ProviderId,
} from '../../src/providers/index.js';

/** What a scripted upstream does on one call. */
export type Step =
  | {
      readonly kind: 'answer';
      readonly text?: string;
      readonly truncated?: boolean;
      readonly delayMs?: number;
    }
  | { readonly kind: 'fail'; readonly failure: ProviderFailure; readonly delayMs?: number }
  | { readonly kind: 'hang' };

/** Thrown by a scripted call: carries its verdict so `classify` can return it. */
class ScriptedError extends Error {
  constructor(readonly failure: ProviderFailure) {
    super(failure.message);
  }
}

export interface ScriptedAdapter extends ProviderAdapter {
  readonly requests: GenerationRequest[];
  readonly aborted: number;
  script(...steps: Step[]): void;
}

/**
 * An upstream injected into a provider actor for the core's tests (the SDK adapters are
 * tested over real HTTP elsewhere). Steps are consumed in order; when none remain it answers.
 */
export function scriptedAdapter(id: ProviderId, defaultText = '{"ok":true}'): ScriptedAdapter {
  const steps: Step[] = [];
  const requests: GenerationRequest[] = [];
  let aborted = 0;
  return {
    id,
    model: `${id}-model`,
    requests,
    get aborted() {
      return aborted;
    },
    script: (...more: Step[]) => void steps.push(...more),
    generate(request, _apiKey, signal): Promise<ProviderAnswer> {
      requests.push(request);
      const step = steps.shift() ?? { kind: 'answer' };
      return new Promise<ProviderAnswer>((resolve, reject) => {
        const onAbort = () => {
          aborted += 1;
          reject(new DOMException('aborted', 'AbortError'));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        if (step.kind === 'hang') return;
        const settle = () => {
          signal.removeEventListener('abort', onAbort);
          if (step.kind === 'fail') reject(new ScriptedError(step.failure));
          else
            resolve({
              text: step.text ?? defaultText,
              model: `${id}-model`,
              usage: { inputTokens: 10, outputTokens: 5 },
              truncated: step.truncated ?? false,
            });
        };
        if (step.delayMs === undefined) queueMicrotask(settle);
        else setTimeout(settle, step.delayMs);
      });
    },
    classify(error: unknown): ProviderFailure {
      if (error instanceof ScriptedError) return error.failure;
      return { errorClass: 'connection', message: 'unexpected' };
    },
  };
}

export function fail(errorClass: ProviderFailure['errorClass'], extra: Partial<ProviderFailure> = {}): Step {
  return { kind: 'fail', failure: { errorClass, message: `scripted ${errorClass}`, ...extra } };
}
