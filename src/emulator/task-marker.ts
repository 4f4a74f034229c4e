/**
 * The task marker the study module writes into every system prompt, one line:
 * `study-helper-task: {"task":"notes"|"mcq"|"fill","lang":"ko"|"en","count":n,"conceptIds":["c1",...]}`.
 * The emulator reads it to answer valid study JSON for that task.
 */
export interface TaskMarker {
  readonly task: 'notes' | 'mcq' | 'fill';
  readonly lang: 'ko' | 'en';
  readonly count: number;
  readonly conceptIds: readonly string[];
}

const markerPattern = /study-helper-task:\s*(\{[^\n]*\})/;

/** The marker in `text`, or undefined when there is none or it is malformed. */
export function parseTaskMarker(text: string): TaskMarker | undefined {
  const match = markerPattern.exec(text);
  if (!match?.[1]) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(match[1]);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null) return undefined;
  const record = raw as Record<string, unknown>;
  const task = record['task'];
  if (task !== 'notes' && task !== 'mcq' && task !== 'fill') return undefined;
  const lang = record['lang'] === 'ko' ? 'ko' : 'en';
  const count = typeof record['count'] === 'number' && record['count'] > 0 ? Math.min(Math.floor(record['count']), 100) : 5;
  const conceptIds = Array.isArray(record['conceptIds'])
    ? record['conceptIds'].filter((id): id is string => typeof id === 'string' && id.length > 0)
    : [];
  return { task, lang, count, conceptIds };
}
