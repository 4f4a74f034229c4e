/**
 * Reads the user message the study module builds (src/study/prompts.ts) into the pieces the
 * emulator answers from, so answers come from the document and never from the instructions
 * around it ("Document:", "<document>", the concept list, the part heading):
 *
 * - the document text inside `<document>…</document>` (the whole text when there is no such block);
 * - the part heading, "(part i of n; …)" or "(전체 n개 중 i번째 부분; …)";
 * - the concept list, one `- c1: term — definition` line per concept;
 * - the per-part notes a merge request carries, `<part index="i">{notes JSON}</part>`.
 */

interface PromptConcept {
  readonly term: string;
  readonly definition: string;
}

export interface PartPosition {
  /** 1-based. */
  readonly index: number;
  readonly total: number;
}

export interface PartialNotes {
  readonly keyConcepts: readonly { readonly term: string; readonly definition: string }[];
  readonly sections: readonly { readonly title: string; readonly summary: string; readonly bullets: readonly string[] }[];
  readonly glossary: readonly { readonly term: string; readonly definition: string }[];
}

export interface PromptText {
  /** What the answer may be derived from: the document, or the whole text when nothing wraps one. */
  readonly document: string;
  /** True when the text had a `<document>` block. */
  readonly wrapped: boolean;
  readonly part?: PartPosition;
  /** Concepts by id, from the concept list lines. */
  readonly concepts: ReadonlyMap<string, PromptConcept>;
  /** Per-part notes of a merge request, in order (empty otherwise). */
  readonly partials: readonly PartialNotes[];
}

const documentBlock = /<document>\r?\n?([\s\S]*)\r?\n?<\/document>/;
const partHeadings = [
  { pattern: /\(part (\d+) of (\d+)[;)]/, index: 1, total: 2 },
  { pattern: /\(전체 (\d+)개 중 (\d+)번째 부분[;)]/, index: 2, total: 1 },
] as const;
const conceptLine = /^- ([^\s:]+): (.+?) — (.*)$/gmu;
const partBlock = /<part index="\d+">\r?\n?([\s\S]*?)\r?\n?<\/part>/g;

function partOf(outside: string): PartPosition | undefined {
  for (const heading of partHeadings) {
    const match = heading.pattern.exec(outside);
    if (!match) continue;
    const index = Number(match[heading.index]);
    const total = Number(match[heading.total]);
    if (Number.isInteger(index) && Number.isInteger(total) && index >= 1 && total >= index) return { index, total };
  }
  return undefined;
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim().length > 0 ? value : undefined;
}

function records(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value) ? value.filter((item): item is Record<string, unknown> => typeof item === 'object' && item !== null) : [];
}

/** A notes object as far as it can be read; undefined when it is not notes at all. */
function readNotes(raw: string): PartialNotes | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const record = parsed as Record<string, unknown>;
  const keyConcepts = records(record['keyConcepts']).flatMap((concept) => {
    const term = text(concept['term']);
    return term === undefined ? [] : [{ term, definition: text(concept['definition']) ?? term }];
  });
  const sections = records(record['sections']).flatMap((section) => {
    const title = text(section['title']);
    if (title === undefined) return [];
    const bullets = Array.isArray(section['bullets']) ? section['bullets'].filter((bullet): bullet is string => text(bullet) !== undefined) : [];
    return [{ title, summary: text(section['summary']) ?? title, bullets }];
  });
  const glossary = records(record['glossary']).flatMap((entry) => {
    const term = text(entry['term']);
    return term === undefined ? [] : [{ term, definition: text(entry['definition']) ?? term }];
  });
  return keyConcepts.length === 0 && sections.length === 0 ? undefined : { keyConcepts, sections, glossary };
}

export function readPromptText(userText: string): PromptText {
  const block = documentBlock.exec(userText);
  const outside = block ? userText.slice(0, block.index) + userText.slice(block.index + block[0].length) : userText;
  const concepts = new Map<string, PromptConcept>();
  for (const match of outside.matchAll(conceptLine)) {
    const [, id, term, definition] = match;
    if (id !== undefined && term !== undefined && !concepts.has(id)) concepts.set(id, { term: term.trim(), definition: (definition ?? '').trim() });
  }
  const partials = block
    ? []
    : [...userText.matchAll(partBlock)].flatMap((match) => {
        const notes = match[1] === undefined ? undefined : readNotes(match[1]);
        return notes === undefined ? [] : [notes];
      });
  const part = block ? partOf(outside) : undefined;
  return {
    document: block?.[1]?.trim() ?? userText,
    wrapped: block !== null,
    ...(part === undefined ? {} : { part }),
    concepts,
    partials,
  };
}
