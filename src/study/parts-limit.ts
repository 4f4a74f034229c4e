import type { TextPageMap } from '../machines/job-types.js';
import { pagesOfParts } from './pages.js';

/**
 * A text that needs more than MAX_TEXT_PARTS parts (each a provider call): the job's notes stage and the
 * dry-run estimate refuse it alike (413 TOO_MANY_PARTS), before any call, with the same advice.
 */
export class TooManyPartsError extends Error {
  override readonly name = 'TooManyPartsError';
}

/** The text as split, and the bound it is checked against. */
export interface PartsLimitInput {
  readonly text: string;
  /** Where each page of a document's text begins; absent for a plain text. */
  readonly pageMap?: TextPageMap | undefined;
  /** The split of `text`, in order. */
  readonly parts: readonly string[];
  /** Most tokens of the text in one part (the split's budget). */
  readonly budget: number;
  readonly maxParts: number;
}

/** Throws TooManyPartsError when the split needs more than `maxParts` parts, saying how many pages fit. */
export function assertPartsWithinLimit(input: PartsLimitInput): void {
  if (input.parts.length <= input.maxParts) return;
  const advice = input.pageMap === undefined ? 'Send a shorter text.' : pagesThatFit(input.pageMap, pagesOfParts(input.text, input.pageMap, input.parts), input.maxParts);
  throw new TooManyPartsError(
    `The text needs ${input.parts.length} parts of at most ${input.budget} tokens; at most ${input.maxParts} are allowed (MAX_TEXT_PARTS). ${advice}`,
  );
}

/**
 * The advice for a document: the pages the first `maxParts` parts cover whole (a page the next part
 * starts on does not fit), as a count and a range to ask for.
 */
function pagesThatFit(map: TextPageMap, pages: readonly (readonly number[])[], maxParts: number): string {
  const firstOfNext = pages[maxParts]?.[0] ?? map.firstPage;
  const lastFitting = firstOfNext - 1;
  const last = map.firstPage + map.starts.length - 1;
  const asked = `pages ${map.firstPage}–${last}`;
  if (lastFitting < map.firstPage) return `Even one page of ${asked} is too long for ${maxParts} parts; ask for fewer pages.`;
  const fit = lastFitting - map.firstPage + 1;
  return `Of ${asked}, ${fit} page${fit === 1 ? '' : 's'} fit (pages ${map.firstPage}–${lastFitting}); ask for a range of at most about ${fit} pages.`;
}
