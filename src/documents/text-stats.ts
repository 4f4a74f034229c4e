/** A word: a number with its decimal point (`3.14`), or letters, marks and digits with inner apostrophes (`don't`). */
const wordPattern = /\p{N}+(?:[.,]\p{N}+)+|[\p{L}\p{M}\p{N}]+(?:['’][\p{L}\p{M}\p{N}]+)*/gu;

/**
 * Words: runs of letters and digits split at spaces and punctuation. Latin words and numbers split at
 * spaces and punctuation; Korean is written with spaces between words (eojeol), each one word.
 * A regular expression rather than Intl.Segmenter: the same counts on Latin and Hangul text, and
 * Intl.Segmenter took about a third of the extraction time of a 50-page PDF (docs/benchmarks.md).
 */
export function countWords(text: string): number {
  let words = 0;
  wordPattern.lastIndex = 0;
  while (wordPattern.exec(text) !== null) words += 1;
  return words;
}

/** Characters as code points (a Hangul syllable or an emoji counts once), whitespace excluded. */
export function countCharacters(text: string): number {
  let characters = 0;
  for (const char of text.replace(/\s+/gu, '')) {
    if (char.length > 0) characters += 1;
  }
  return characters;
}

/** A page marker an extractor inserts, such as `-- 1 of 3 --`: layout, not text of the document. */
const pageMarkerLine = /^\s*-{1,3}\s*(?:page\s*)?\d+\s*(?:of|\/)\s*\d+\s*-{1,3}\s*$/iu;

/**
 * One page's text made tidy: page-marker lines removed, trailing spaces trimmed, runs of blank lines
 * reduced to one (a blank line keeps marking a section boundary).
 */
export function cleanPageText(pageText: string): string {
  const lines = pageText
    .replace(/\r\n?/gu, '\n')
    .split('\n')
    .filter((line) => !pageMarkerLine.test(line))
    .map((line) => line.replace(/[ \t\u00a0]+$/u, ''));
  return lines
    .join('\n')
    .replace(/\n{3,}/gu, '\n\n')
    .trim();
}

/** Pages joined with a blank line between them: the boundary a later splitter can cut at. */
export function joinPages(pageTexts: readonly string[]): string {
  return pageTexts.filter((text) => text.length > 0).join('\n\n');
}
