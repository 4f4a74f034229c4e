import type { TextPageMap } from '../machines/job-types.js';
import { isSpace } from './whitespace.js';

/**
 * Page references (docs/study-material.md "Page references"): which pages of the document each part of
 * a split text came from. A split keeps every character of the text but whitespace (parts are its
 * sections, paragraphs, sentences and token slices in order, joined by blank lines, spaces or nothing),
 * so a part is located by counting characters that are not whitespace: the k-th part holds the
 * non-whitespace characters that follow those of the parts before it. Linear in the text, and it needs
 * nothing from the splitter.
 */

/** Non-whitespace characters of `text`. */
function solidLength(text: string): number {
  let count = 0;
  for (let index = 0; index < text.length; index += 1) if (!isSpace(text.charCodeAt(index))) count += 1;
  return count;
}

/** Where each page of the map begins, counted in non-whitespace characters of `text`. */
function solidPageStarts(text: string, map: TextPageMap): number[] {
  const out: number[] = [];
  let count = 0;
  let index = 0;
  for (const start of map.starts) {
    const end = Math.min(text.length, Math.max(index, start));
    for (; index < end; index += 1) if (!isSpace(text.charCodeAt(index))) count += 1;
    out.push(count);
  }
  return out;
}

/**
 * The pages each part came from, in order: the pages with text whose characters the part holds (one
 * page at least; never a page outside the map). `parts` are the split of `text`, in order.
 */
export function pagesOfParts(text: string, map: TextPageMap, parts: readonly string[]): number[][] {
  const starts = solidPageStarts(text, map);
  const total = solidLength(text);
  const lastPage = map.firstPage + Math.max(0, map.starts.length - 1);
  const pageEnd = (index: number): number => starts[index + 1] ?? total;
  const out: number[][] = [];
  let from = 0;
  for (const [index, part] of parts.entries()) {
    // The last part runs to the end: a token slice that decoded a split character differently cannot lose the tail.
    const to = index === parts.length - 1 ? total : Math.min(total, from + solidLength(part));
    const pages: number[] = [];
    for (let page = 0; page < starts.length; page += 1) {
      const pageFrom = starts[page] ?? 0;
      const overlaps = Math.min(to, pageEnd(page)) > Math.max(from, pageFrom);
      if (overlaps) pages.push(map.firstPage + page);
    }
    if (pages.length === 0) pages.push(Math.min(lastPage, map.firstPage + Math.max(0, lastStartAtOrBefore(starts, from))));
    out.push(pages);
    from = to;
  }
  return out;
}

/** Index of the last page starting at or before `position` (0 when none). */
function lastStartAtOrBefore(starts: readonly number[], position: number): number {
  let found = 0;
  for (const [index, start] of starts.entries()) if (start <= position) found = index;
  return found;
}

/** Every page of the map that holds text: the pages of a whole (unsplit) text. */
export function pagesOfText(text: string, map: TextPageMap): number[] {
  return pagesOfParts(text, map, [text])[0] ?? [];
}

/** Sorted union of page lists. */
export function unionPages(lists: readonly (readonly number[])[]): number[] {
  return [...new Set(lists.flat())].sort((a, b) => a - b);
}
