/**
 * Removes anything key-like from a message before it can leave an adapter (error bodies, logs,
 * metrics). Upstreams echo key fragments, e.g. OpenAI's "Incorrect API key provided: sk-ab***wxyz".
 */

import { redactSecrets } from '../security/redact.js';

const redacted = '[redacted]';

/** Patterns of secrets with their replacement, most specific first. */
const secretPatterns: readonly (readonly [RegExp, string])[] = [
  // OpenAI's 401 echoes a masked fragment of the key it was given.
  [/(Incorrect API key provided:\s*)\S+/gi, `$1${redacted}`],
  [/\bBearer\s+[^\s,;"']+/gi, `Bearer ${redacted}`],
  [
    /\b(x-api-key|x-timely-api|api[_-]?key|access[_-]?token|authorization)(["']?\s*[:=]\s*["']?)[^\s,;"'}]+/gi,
    `$1$2${redacted}`,
  ],
  // JWTs (TimelyGPT access tokens).
  [/\beyJ[\w-]*\.[\w-]+\.[\w-]*/g, redacted],
  // Provider key formats: Anthropic sk-ant-…, OpenAI sk-…/sk-proj-…, and masked fragments of either.
  [/\bsk-[\w*.-]{4,}/gi, redacted],
  // Any word with a run of mask characters in it is a masked secret.
  [/[^\s"']*\*{3,}[^\s"',.;)]*/g, redacted],
];

/** Long opaque token-like words (32+ chars of letters, digits, `_`/`-`, with both letters and digits). */
const tokenLike = /[A-Za-z0-9_-]{32,}/g;

/**
 * `text` without key-like content. `knownKeys` (the keys this call used) are removed wherever any 8+
 * character piece of them appears, also percent-encoded, spaced or punctuated, in base64 or hex
 * (src/security/redact.ts); then the patterns above catch other key-like text.
 */
export function scrubSecrets(text: string, knownKeys: readonly string[] = []): string {
  let result = knownKeys.length === 0 ? text : redactSecrets(text, knownKeys);
  for (const [pattern, replacement] of secretPatterns) result = result.replace(pattern, replacement);
  result = result.replace(tokenLike, (word) =>
    /[0-9]/.test(word) && /[A-Za-z]/.test(word) ? redacted : word,
  );
  return result;
}

/**
 * The key each failed call used, held only as long as the error object lives, so that the pure
 * classifier can scrub the exact key too without the key travelling on the error.
 */
const keysOfErrors = new WeakMap<object, string>();

export function rememberKeyOf(error: unknown, apiKey: string): void {
  if (typeof error === 'object' && error !== null) keysOfErrors.set(error, apiKey);
}

export function knownKeysOf(error: unknown): readonly string[] {
  const key = typeof error === 'object' && error !== null ? keysOfErrors.get(error) : undefined;
  return key === undefined ? [] : [key];
}
