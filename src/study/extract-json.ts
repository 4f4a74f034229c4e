/**
 * Finds the JSON a model meant to send inside whatever it actually sent: a bare document, a
 * ```json fence, or prose around an object ("Here are your questions: {...} Good luck!").
 */

export type Extraction = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: string };

/** Objects tried in prose around the answer before giving up (a model's answer holds one). */
const maxCandidates = 8;

const fencePattern = /```[a-zA-Z0-9_-]*[ \t]*\r?\n?([\s\S]*?)```/;

/** Parses the model's text into a JSON value, or says in one short sentence why it could not. */
export function extractJson(text: string): Extraction {
  const trimmed = text.replace(/^\uFEFF/, '').trim();
  if (trimmed === '') return { ok: false, error: 'the answer is empty; answer with one JSON object' };
  const direct = tryParse(trimmed);
  if (direct.ok) return direct;

  const fenced = fencePattern.exec(trimmed);
  const body = fenced?.[1]?.trim() ?? trimmed;
  if (fenced) {
    const inFence = tryParse(body);
    if (inFence.ok) return inFence;
  }
  // A top-level array (a bare list of questions) only when the text starts with one, so that a
  // citation like "[1]" in surrounding prose is never mistaken for the answer.
  if (body.startsWith('[')) {
    const array = balancedFrom(body, 0);
    if (array !== undefined) {
      const parsed = tryParse(array);
      if (parsed.ok) return parsed;
    }
  }
  // A few candidates at most: each costs a scan to its end and a parse, so trying every `{` of a text
  // full of them (`{{{{…` that never parses) would be quadratic on the event loop.
  let candidates = 0;
  for (let start = body.indexOf('{'); start !== -1 && candidates < maxCandidates; start = body.indexOf('{', start + 1)) {
    candidates += 1;
    const candidate = balancedFrom(body, start);
    if (candidate === undefined) {
      return { ok: false, error: 'the JSON object is incomplete (cut off); answer with one complete JSON object' };
    }
    const parsed = tryParse(candidate);
    if (parsed.ok && isObject(parsed.value)) return parsed;
  }
  return { ok: false, error: 'no JSON object found in the answer; answer with one JSON object and nothing else' };
}

function isObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** One JSON text parsed as it is, then (only if that fails) without trailing commas; undefined when neither parses. */
export function parseLenient(candidate: string): { readonly value: unknown } | undefined {
  const parsed = tryParse(candidate);
  return parsed.ok ? { value: parsed.value } : undefined;
}

/** The candidate as it is, then (only if that fails) without trailing commas. */
function tryParse(candidate: string): Extraction {
  const parsed = parseOrUndefined(candidate);
  if (parsed !== undefined) return parsed;
  return parseOrUndefined(withoutTrailingCommas(candidate)) ?? { ok: false, error: 'invalid JSON' };
}

function parseOrUndefined(text: string): Extraction | undefined {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

/** `{"a":1,}` and `[1,2,]` are common in model output and unambiguous. */
function withoutTrailingCommas(candidate: string): string {
  return candidate.replace(/,(\s*[}\]])/g, '$1');
}

/** The balanced `{…}` or `[…]` starting at `start`, skipping brackets inside strings; undefined if it never closes. */
function balancedFrom(text: string, start: number): string | undefined {
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (let index = start; index < text.length; index += 1) {
    const char = text[index];
    if (inString) {
      if (escaped) escaped = false;
      else if (char === '\\') escaped = true;
      else if (char === '"') inString = false;
      continue;
    }
    if (char === '"') inString = true;
    else if (char === '{' || char === '[') depth += 1;
    else if (char === '}' || char === ']') {
      depth -= 1;
      if (depth === 0) return text.slice(start, index + 1);
    }
  }
  return undefined;
}
