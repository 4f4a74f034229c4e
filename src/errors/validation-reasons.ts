/**
 * What an `invalid_output` attempt and the 502 that follows say about it: the first few validation
 * errors, each clipped, the whole capped, on one line. The reasons are the study checks' own short
 * messages (never the model's whole answer); the HTTP layer still scrubs keys out of them.
 */

/** At most this many reasons are named; the others are counted. */
const maxReportedReasons = 3;
/** Longest single reason kept, in characters (longer ones end in "…"). */
const maxReasonChars = 160;
/** Longest summary of reasons, in characters. */
export const maxReasonsChars = 480;

/** The attempt message of an `invalid_output` call; the summary follows it. */
const invalidOutputMessagePrefix = 'The output failed validation: ';
const invalidOutputWithoutReasons = 'The output failed validation.';

/** `text` cut to at most `max` characters, ending in "…" when cut. */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  let cut = text.slice(0, max - 1);
  // Never end on half of a surrogate pair.
  const last = cut.charCodeAt(cut.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut = cut.slice(0, -1);
  return `${cut.trimEnd()}…`;
}

/** One line, no control characters, no runs of spaces. */
function oneLine(text: string): string {
  let line = '';
  for (const char of text) line += char.charCodeAt(0) < 0x20 || char === '\u007f' ? ' ' : char;
  return line.replace(/\s+/g, ' ').trim();
}

/** "r1; r2; r3 (and 4 more)", bounded by `maxReasonsChars` however many and however long the errors are. */
export function summarizeValidationErrors(errors: readonly string[]): string {
  const named = errors.slice(0, maxReportedReasons).map((error) => clipText(oneLine(error.slice(0, maxReasonChars * 4)), maxReasonChars));
  const more = errors.length > named.length ? ` (and ${errors.length - named.length} more)` : '';
  return clipText(`${named.filter((reason) => reason !== '').join('; ')}${more}`, maxReasonsChars);
}

/** The `message` of an attempt whose answer failed validation. */
export function invalidOutputMessage(errors: readonly string[]): string {
  const summary = summarizeValidationErrors(errors);
  return summary === '' ? invalidOutputWithoutReasons : `${invalidOutputMessagePrefix}${summary}`;
}

/** The reasons an `invalid_output` attempt message carries, or undefined when it carries none. */
export function reasonsOfInvalidOutputMessage(message: string | undefined): string | undefined {
  if (message === undefined || !message.startsWith(invalidOutputMessagePrefix)) return undefined;
  const reasons = message.slice(invalidOutputMessagePrefix.length);
  return reasons === '' ? undefined : reasons;
}
