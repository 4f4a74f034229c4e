/**
 * A request's URL as the service may repeat it (the request log line, a 404's message). A URL is the
 * client's text: a key put in a path segment or the query (by mistake, or to plant it in our logs) would be
 * repeated verbatim. So the query's values are never repeated, and a path segment that holds anything
 * key-shaped (an echo of the request's own keys, a provider key's format, a long opaque token: the
 * scrubber's rules, `scrubSecrets`, applied to the segment percent-decoded; or any opaque word of 16+
 * characters mixing letters and digits that is not a UUID, what the service's own ids are) is replaced whole;
 * the result is cut to a bounded length.
 */
import { scrubSecrets, type KeyLike } from '../security/redact.js';

/** The longest URL repeated: a log line or an error message is no place for a client's kilobytes. */
const maxRepeatedChars = 200;
const redacted = '[redacted]';

/** `url` (path and query) without anything key-shaped, at most `maxRepeatedChars` characters. */
export function safeUrl(url: string, keys: readonly KeyLike[] = []): string {
  const queryAt = url.indexOf('?');
  const path = queryAt < 0 ? url : url.slice(0, queryAt);
  const segments = path.slice(0, 4 * maxRepeatedChars).split('/').map((segment) => safeSegment(segment, keys));
  let safe = segments.join('/');
  if (queryAt >= 0) {
    // Names only (a key-shaped name is replaced like a segment): the routes take no query, so its values say nothing we need.
    const names = url
      .slice(queryAt + 1, queryAt + 1 + 4 * maxRepeatedChars)
      .split('&')
      .map((pair) => `${safeSegment(pair.split('=')[0] ?? '', keys)}${pair.includes('=') ? `=${redacted}` : ''}`);
    safe += `?${names.join('&')}`;
  }
  return safe.length > maxRepeatedChars ? `${safe.slice(0, maxRepeatedChars)}…` : safe;
}

/** A canonical UUID (the service's job and document ids) is an id, not a key. */
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/iu;

/** Long enough, and mixing letters and digits, to be a key whatever its format (no route word is). */
function isOpaque(text: string): boolean {
  return text.length >= 16 && /[0-9]/u.test(text) && /[A-Za-z]/u.test(text) && !uuid.test(text);
}

/** `segment` (a path segment, an id from the path) if it may be repeated, else `[redacted]`. */
export function safeSegment(segment: string, keys: readonly KeyLike[] = []): string {
  if (segment === '') return segment;
  let decoded = segment;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    // A malformed escape: judged as it is.
  }
  const clean = (text: string): boolean => !isOpaque(text) && scrubSecrets(text, keys) === text;
  return clean(segment) && clean(decoded) ? segment : redacted;
}
