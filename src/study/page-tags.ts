import type { FillResult, McqResult, NotesResult, StudyResult } from './schemas.js';
import type { StudyItem } from './stream-items.js';
import { unionPages } from './pages.js';

/**
 * The `pages` of each element of a result (docs/study-material.md "Page references"). A step's answer
 * is made from known pages (its part, or for a merge every part merged); a tagger says which, per
 * element. `undefined` (text input) leaves the elements as they are.
 */
export type PageTagger = ((item: StudyItem) => readonly number[]) | undefined;

/** A tagger giving every element the same pages. */
export function samePages(pages: readonly number[] | undefined): PageTagger {
  if (pages === undefined) return undefined;
  const copy = [...pages];
  return () => copy;
}

/** `item` with its pages (a fresh object; the value passed in is not changed). */
export function tagItem(item: StudyItem, tagger: PageTagger): StudyItem {
  if (tagger === undefined) return item;
  return { ...item, value: { ...item.value, pages: [...tagger(item)] } } as StudyItem;
}

/** `value` with the pages of each of its elements. */
export function tagResult<T extends StudyResult>(value: T, tagger: PageTagger): T {
  if (tagger === undefined) return value;
  if ('questions' in value) {
    const questions = (value as McqResult | FillResult).questions.map((question) => ({ ...question, pages: [...tagger({ kind: 'question', value: question })] }));
    return { ...value, questions } as T;
  }
  const notes = value as NotesResult;
  return {
    ...notes,
    keyConcepts: notes.keyConcepts.map((concept) => ({ ...concept, pages: [...tagger({ kind: 'keyConcept', value: concept })] })),
    sections: notes.sections.map((section) => ({ ...section, pages: [...tagger({ kind: 'section', value: section })] })),
    glossary: notes.glossary.map((entry) => ({ ...entry, pages: [...tagger({ kind: 'glossaryEntry', value: entry })] })),
  } as T;
}

/** How an element of notes is recognised across a merge: its kind and its term or title, case and spacing aside. */
function notesKey(item: StudyItem): string | undefined {
  const name = (text: string): string => text.normalize('NFC').toLowerCase().replace(/\s+/gu, ' ').trim();
  if (item.kind === 'keyConcept') return `concept:${name(item.value.term)}`;
  if (item.kind === 'section') return `section:${name(item.value.title)}`;
  if (item.kind === 'glossaryEntry') return `term:${name(item.value.term)}`;
  return undefined;
}

/**
 * The tagger of merged notes: an element whose term or title is one of a part's notes gets the pages of
 * every part that had it; any other element (the merge wrote it anew) the pages of all the parts merged.
 */
export function mergedNotesTagger(partials: readonly NotesResult[], pagesOfPartials: readonly (readonly number[])[]): PageTagger {
  const all = unionPages(pagesOfPartials);
  const byKey = new Map<string, number[][]>();
  for (const [index, partial] of partials.entries()) {
    const pages = [...(pagesOfPartials[index] ?? all)];
    const items: StudyItem[] = [
      ...partial.keyConcepts.map((value): StudyItem => ({ kind: 'keyConcept', value })),
      ...partial.sections.map((value): StudyItem => ({ kind: 'section', value })),
      ...partial.glossary.map((value): StudyItem => ({ kind: 'glossaryEntry', value })),
    ];
    for (const item of items) {
      const key = notesKey(item);
      if (key !== undefined) byKey.set(key, [...(byKey.get(key) ?? []), pages]);
    }
  }
  return (item) => {
    const key = notesKey(item);
    const found = key === undefined ? undefined : byKey.get(key);
    return found === undefined ? all : unionPages(found);
  };
}
