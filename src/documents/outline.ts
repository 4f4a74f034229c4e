import type { OutlineEntry } from './types.js';

/** Most outline entries kept: a textbook's chapters and sections fit; a hostile tree is cut here. */
const maxOutlineEntries = 500;

/** Longest title kept, in characters (a bookmark is a heading, not a paragraph). */
const maxTitleChars = 300;

/** An outline node as pdf.js's `getOutline()` hands it out. */
interface OutlineNode {
  readonly title?: unknown;
  readonly dest?: unknown;
  readonly items?: unknown;
}

/** What the outline reader needs of a loaded pdf.js document. */
export interface OutlineSource {
  getOutline(): Promise<unknown>;
  getDestination(id: string): Promise<unknown>;
  getPageIndex(ref: unknown): Promise<number>;
}

/** True when `document` has the pdf.js calls the outline needs. */
export function isOutlineSource(document: object): document is OutlineSource {
  const candidate = document as Partial<OutlineSource>;
  return typeof candidate.getOutline === 'function' && typeof candidate.getDestination === 'function' && typeof candidate.getPageIndex === 'function';
}

/**
 * A bookmark title as text: control characters (and the markup-free remains of rich text) out,
 * whitespace runs made one space, at most `maxTitleChars`.
 */
function cleanTitle(title: unknown): string {
  if (typeof title !== 'string') return '';
  const plain = title
    .replace(/[\p{Cc}\p{Cf}]+/gu, ' ')
    .replace(/\s+/gu, ' ')
    .trim();
  return [...plain].slice(0, maxTitleChars).join('');
}

/**
 * The PDF's bookmarks, depth first in reading order: `level` 1 for the top entries, `page` 1-based. An
 * entry whose destination names no page of the document (a web link, a broken destination) is left
 * out, its children kept at their own level. At most `maxOutlineEntries` are kept and at most that many
 * nodes are looked at, so a hostile outline costs no more than a textbook's. `[]` when there is none
 * or it cannot be read: the outline is a convenience, never a reason to refuse a PDF.
 */
export async function readOutline(document: OutlineSource, pageCount: number): Promise<OutlineEntry[]> {
  let roots: unknown;
  try {
    roots = await document.getOutline();
  } catch {
    return [];
  }
  const entries: OutlineEntry[] = [];
  let visited = 0;
  const walk = async (nodes: unknown, level: number): Promise<void> => {
    if (!Array.isArray(nodes)) return;
    for (const node of nodes as unknown[]) {
      if (entries.length >= maxOutlineEntries || visited >= maxOutlineEntries * 4) return;
      visited += 1;
      if (typeof node !== 'object' || node === null) continue;
      const { title, dest, items } = node as OutlineNode;
      const text = cleanTitle(title);
      const page = await pageOf(document, dest, pageCount);
      if (text !== '' && page !== undefined) entries.push({ title: text, page, level });
      await walk(items, level + 1);
    }
  };
  await walk(roots, 1);
  return entries;
}

/** The 1-based page a destination points to (a named destination is looked up first), if any. */
async function pageOf(document: OutlineSource, dest: unknown, pageCount: number): Promise<number | undefined> {
  try {
    const explicit = typeof dest === 'string' ? await document.getDestination(dest) : dest;
    if (!Array.isArray(explicit) || explicit.length === 0) return undefined;
    const target: unknown = explicit[0];
    // A page reference ({num, gen}); some writers put the page index itself.
    const index = typeof target === 'number' ? target : typeof target === 'object' && target !== null ? await document.getPageIndex(target) : undefined;
    if (index === undefined || !Number.isInteger(index) || index < 0 || index >= pageCount) return undefined;
    return index + 1;
  } catch {
    return undefined;
  }
}
