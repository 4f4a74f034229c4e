import type { Task } from '../providers/index.js';
import { parseLenient } from './extract-json.js';
import {
  normalizeFillQuestion,
  normalizeGlossaryEntry,
  normalizeKeyConcept,
  normalizeMcqQuestion,
  normalizeSection,
  notesListNames,
  questionListNames,
} from './normalize.js';
import { fillProblem, fillText, mcqProblem, mcqText, QuestionKeeper, type QuestionCheckOptions } from './quality.js';
import {
  fillQuestionSchema,
  glossaryEntrySchema,
  keyConceptSchema,
  mcqQuestionSchema,
  notesSectionSchema,
  type FillQuestion,
  type KeyConcept,
  type McqQuestion,
  type NotesResult,
} from './schemas.js';

/**
 * The study material as it is written (shown before the answer ends): the model's output arrives in
 * pieces, and each element
 * of the result (a key concept, a notes section, a glossary entry, a question) is handed on the moment
 * its closing bracket arrives and it passes the same normalization, schema and per-question checks the
 * whole answer will pass through (normalize.ts, schemas.ts, quality.ts).
 *
 * One pass over the text: a small JSON tokenizer keeps only the nesting (a stack of open objects and
 * arrays, whether it is inside a string) and the text of the element being written; a finished element
 * is parsed on its own. Each character is looked at once, each element parsed once, so the work is
 * linear in the answer, however it is split. Memory: the nesting stack (bounded by `maxDepth`), the
 * current element, and the JSON text so far (needed to continue a cut answer; bounded by `maxChars`,
 * past which no more items are produced and the answer cannot be continued).
 */

/** The kinds of element an `item` event carries (docs/api.md "Streaming"). */
export type StudyItemKind = 'keyConcept' | 'section' | 'glossaryEntry' | 'question';

/** A notes section as the schema checks it. */
type NotesSection = NotesResult['sections'][number];
/** A glossary entry as the schema checks it. */
type GlossaryEntry = NotesResult['glossary'][number];

/** One complete, valid element of the result. */
export type StudyItem =
  | { readonly kind: 'keyConcept'; readonly value: KeyConcept }
  | { readonly kind: 'section'; readonly value: NotesSection }
  | { readonly kind: 'glossaryEntry'; readonly value: GlossaryEntry }
  | { readonly kind: 'question'; readonly value: McqQuestion | FillQuestion };

export interface StudyItemExtractorOptions {
  readonly task: Task;
  /** The grounding and count the questions are checked against (mcq, fill); questions need it. */
  readonly questions?: QuestionCheckOptions;
  /** Most characters of JSON followed (default 1 MiB): past it no more items, and no continuation. */
  readonly maxChars?: number;
  /** Deepest nesting followed (default 64): deeper, extraction stops. */
  readonly maxDepth?: number;
}

/** Where a cut answer can be continued from: its JSON up to the end of its last complete element. */
export interface ContinuationPoint {
  /** The JSON text from its first bracket to the end of the last complete element (no fence, no prose). */
  readonly prefix: string;
  /** Elements (of every list) complete in `prefix`, valid or not. */
  readonly elements: number;
}

const defaultMaxStreamChars = 1024 * 1024;
const defaultMaxStreamDepth = 64;
/** Longest object key followed; a longer one names no list. */
const maxKeyChars = 64;

interface Frame {
  readonly type: 'object' | 'array';
  /** Objects: the next string is a key. */
  expectKey: boolean;
  /** Objects: the last key read (undefined when it was too long or unreadable). */
  key: string | undefined;
  /** Objects: keys begun so far. */
  keys: number;
  /** Arrays: the kind of element this list holds, when it is one of the result's lists. */
  readonly list: StudyItemKind | undefined;
  /** Arrays: values started so far (an element's index is the count before it). */
  values: number;
  /** Arrays: the last structural character was `[` or `,`, so a value may start. */
  awaiting: boolean;
  /** Objects: the keys of this object may name the result's lists (the root, or a wrapper inside it). */
  readonly holdsLists: boolean;
}

interface Capture {
  readonly kind: StudyItemKind;
  readonly index: number;
  /** The stack's length once the element's own frame is popped. */
  readonly depth: number;
  text: string;
}

type Phase = 'start' | 'fenceLine' | 'prose' | 'json' | 'finished' | 'stopped';

const listNamesByTask: Readonly<Record<Task, ReadonlyMap<string, StudyItemKind>>> = {
  notes: new Map<string, StudyItemKind>([
    ...notesListNames.keyConcepts.map((name) => [name, 'keyConcept'] as const),
    ...notesListNames.sections.map((name) => [name, 'section'] as const),
    ...notesListNames.glossary.map((name) => [name, 'glossaryEntry'] as const),
  ]),
  mcq: new Map(questionListNames.map((name) => [name, 'question'] as const)),
  fill: new Map(questionListNames.map((name) => [name, 'question'] as const)),
};

const isSpace = (char: string): boolean => char === ' ' || char === '\n' || char === '\r' || char === '\t' || char === '\uFEFF';

/** Incremental extraction of one answer; `push` each piece of text as it arrives. */
export class StudyItemExtractor {
  private readonly task: Task;
  private readonly listNames: ReadonlyMap<string, StudyItemKind>;
  private readonly maxChars: number;
  private readonly maxDepth: number;
  private readonly keeper: QuestionKeeper<McqQuestion> | QuestionKeeper<FillQuestion> | undefined;
  private readonly questionCount: number;
  private readonly conceptIds = new Set<string>();
  private readonly claimed = new Set<StudyItemKind>();

  private phase: Phase = 'start';
  private readonly stack: Frame[] = [];
  private inString = false;
  private escaped = false;
  /** The key string being read (only for objects that hold lists). */
  private keyText: string | undefined;
  /** Where the key being read starts in the current piece (0 when it started in an earlier one). */
  private keyStart = 0;
  private capture: Capture | undefined;
  /** The JSON text so far, in the pieces it came in (joined only to continue a cut answer). */
  private readonly json: string[] = [];
  private jsonChars = 0;
  private cutChars = 0;
  private completeElements = 0;
  private emittedCount = 0;

  constructor(options: StudyItemExtractorOptions) {
    this.task = options.task;
    this.listNames = listNamesByTask[options.task];
    this.maxChars = options.maxChars ?? defaultMaxStreamChars;
    this.maxDepth = options.maxDepth ?? defaultMaxStreamDepth;
    const questions = options.questions ?? { count: Number.MAX_SAFE_INTEGER, conceptIds: [] };
    this.questionCount = questions.count;
    this.keeper =
      options.task === 'mcq'
        ? new QuestionKeeper<McqQuestion>(questions, mcqProblem, mcqText)
        : options.task === 'fill'
          ? new QuestionKeeper<FillQuestion>(questions, fillProblem, fillText)
          : undefined;
  }

  /** Items handed on so far. */
  get emitted(): number {
    return this.emittedCount;
  }

  /** The JSON's outermost value has closed: the rest of the text (a closing fence, prose) is ignored. */
  get finished(): boolean {
    return this.phase === 'finished';
  }

  /** Feeds the next piece of the answer; returns the elements it completed, in order. */
  push(delta: string): StudyItem[] {
    const items: StudyItem[] = [];
    let index = 0;
    // Before the JSON: skip whitespace, one opening code fence line, and prose before the first `{`.
    while (index < delta.length && (this.phase === 'start' || this.phase === 'fenceLine' || this.phase === 'prose')) {
      const char = delta[index] as string;
      if (this.phase === 'fenceLine') {
        if (char === '\n') this.phase = 'start';
      } else if (this.phase === 'start' && char === '`') {
        this.phase = 'fenceLine';
      } else if (char === '{' || (char === '[' && this.phase === 'start')) {
        this.phase = 'json';
        break;
      } else if (this.phase === 'start' && !isSpace(char)) {
        this.phase = 'prose';
      }
      index += 1;
    }
    if (this.phase !== 'json') return items;
    const from = index;
    if (this.jsonChars + (delta.length - from) > this.maxChars) return this.stop(items);
    let captureFrom = this.capture === undefined ? -1 : from;
    for (; index < delta.length; index += 1) {
      const char = delta[index] as string;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (char === '\\') this.escaped = true;
        else if (char === '"') {
          this.inString = false;
          if (this.keyText !== undefined) this.endKey(delta, index);
        }
        continue;
      }
      if (char === '"') {
        this.inString = true;
        const top = this.stack[this.stack.length - 1];
        if (top?.type === 'object' && top.expectKey) {
          top.expectKey = false;
          top.key = undefined;
          top.keys += 1;
          if (top.holdsLists) this.keyText = '';
          this.keyStart = index + 1;
        } else if (top?.type === 'array') {
          this.valueStarts(top);
        }
        continue;
      }
      if (char === '{' || char === '[') {
        if (this.stack.length >= this.maxDepth) return this.stop(items);
        const parent = this.stack[this.stack.length - 1];
        if (parent?.type === 'array' && parent.list !== undefined && this.capture === undefined) {
          this.capture = { kind: parent.list, index: parent.values, depth: this.stack.length, text: '' };
          captureFrom = index;
        }
        if (parent?.type === 'array') this.valueStarts(parent);
        this.stack.push(this.frameFor(char, parent));
        continue;
      }
      if (char === '}' || char === ']') {
        this.stack.pop();
        const capture = this.capture;
        if (capture !== undefined && this.stack.length === capture.depth) {
          capture.text += delta.slice(captureFrom, index + 1);
          this.capture = undefined;
          captureFrom = -1;
          this.completeElements += 1;
          this.cutChars = this.jsonChars + (index + 1 - from);
          const item = this.judge(capture);
          if (item !== undefined) items.push(item);
        }
        if (this.stack.length === 0) {
          this.phase = 'finished';
          this.keepJson(delta.slice(from, index + 1));
          return items;
        }
        continue;
      }
      if (char === ',') {
        const top = this.stack[this.stack.length - 1];
        if (top?.type === 'object') top.expectKey = true;
        else if (top?.type === 'array') top.awaiting = true;
        continue;
      }
      if (!isSpace(char) && char !== ':') {
        // The first character of a number, true, false or null inside a list: a value (never an element we send).
        const top = this.stack[this.stack.length - 1];
        if (top?.type === 'array') this.valueStarts(top);
      }
    }
    if (this.capture !== undefined) this.capture.text += delta.slice(Math.max(captureFrom, from));
    if (this.keyText !== undefined) this.keyText += delta.slice(Math.max(this.keyStart, from));
    this.keyStart = 0;
    this.keepJson(delta.slice(from));
    return items;
  }

  /** Where the answer could be continued from, when at least one element is complete and the JSON is still open. */
  continuationPoint(): ContinuationPoint | undefined {
    if (this.phase !== 'json' || this.completeElements === 0) return undefined;
    return { prefix: this.json.join('').slice(0, this.cutChars), elements: this.completeElements };
  }

  private valueStarts(frame: Frame): void {
    if (!frame.awaiting) return;
    frame.awaiting = false;
    frame.values += 1;
  }

  private frameFor(char: '{' | '[', parent: Frame | undefined): Frame {
    if (char === '{') {
      // The root object holds the lists; so does the value of the root's first key when that key names no
      // list (a wrapper, `{"notes":{…}}`). A root that turns out to have more keys is not unwrapped by the
      // normalizer: the final answer then differs from the items sent, and the caller sends it whole after a reset.
      const holdsLists =
        parent === undefined ||
        (parent.type === 'object' && this.stack.length === 1 && parent.keys === 1 && parent.key !== undefined && !this.listNames.has(parent.key));
      return { type: 'object', expectKey: true, key: undefined, keys: 0, list: undefined, values: 0, awaiting: false, holdsLists };
    }
    let list: StudyItemKind | undefined;
    if (parent === undefined) {
      list = this.task === 'notes' ? undefined : 'question';
    } else if (parent.type === 'object' && parent.holdsLists && parent.key !== undefined) {
      list = this.listNames.get(parent.key);
    }
    // A second list of a kind already followed is not followed (the normalizer reads one list per kind).
    if (list !== undefined && this.claimed.has(list)) list = undefined;
    if (list !== undefined) this.claimed.add(list);
    return { type: 'array', expectKey: false, key: undefined, keys: 0, list, values: 0, awaiting: true, holdsLists: false };
  }

  private endKey(delta: string, index: number): void {
    const raw = (this.keyText ?? '') + delta.slice(this.keyStart, index);
    this.keyText = undefined;
    const top = this.stack[this.stack.length - 1];
    if (top === undefined || raw.length > maxKeyChars) return;
    const parsed = parseLenient(`"${raw}"`);
    top.key = typeof parsed?.value === 'string' ? parsed.value : undefined;
  }

  private keepJson(text: string): void {
    if (text === '') return;
    this.json.push(text);
    this.jsonChars += text.length;
  }

  private stop(items: StudyItem[]): StudyItem[] {
    this.phase = 'stopped';
    this.capture = undefined;
    this.json.length = 0;
    return items;
  }

  /** One complete element through the answer's own normalization, schema and checks. */
  private judge(capture: Capture): StudyItem | undefined {
    const parsed = parseLenient(capture.text);
    if (parsed === undefined) return undefined;
    const item = this.validate(capture.kind, parsed.value, capture.index);
    if (item !== undefined) this.emittedCount += 1;
    return item;
  }

  private validate(kind: StudyItemKind, raw: unknown, index: number): StudyItem | undefined {
    switch (kind) {
      case 'keyConcept': {
        const parsed = keyConceptSchema.safeParse(normalizeKeyConcept(raw, index));
        // Ids must be unique: a repeat makes the whole answer invalid, and the first one is what was sent.
        if (!parsed.success || this.conceptIds.has(parsed.data.id)) return undefined;
        this.conceptIds.add(parsed.data.id);
        return { kind, value: parsed.data };
      }
      case 'section': {
        const parsed = notesSectionSchema.safeParse(normalizeSection(raw));
        return parsed.success ? { kind, value: parsed.data } : undefined;
      }
      case 'glossaryEntry': {
        const parsed = glossaryEntrySchema.safeParse(normalizeGlossaryEntry(raw));
        return parsed.success ? { kind, value: parsed.data } : undefined;
      }
      case 'question':
        return this.validateQuestion(raw, index);
    }
  }

  private validateQuestion(raw: unknown, index: number): StudyItem | undefined {
    // The answer keeps at most `count` questions: the ones after are never sent.
    if (this.keeper === undefined || this.keeper.questions.length >= this.questionCount) return undefined;
    if (this.task === 'mcq') {
      const parsed = mcqQuestionSchema.safeParse(normalizeMcqQuestion(raw, index));
      if (!parsed.success) return undefined;
      const verdict = (this.keeper as QuestionKeeper<McqQuestion>).offer(parsed.data);
      return verdict.kept ? { kind: 'question', value: verdict.question } : undefined;
    }
    const parsed = fillQuestionSchema.safeParse(normalizeFillQuestion(raw, index));
    if (!parsed.success) return undefined;
    const verdict = (this.keeper as QuestionKeeper<FillQuestion>).offer(parsed.data);
    return verdict.kept ? { kind: 'question', value: verdict.question } : undefined;
  }
}

/** The elements of a finished result, in the order the extractor sends them for an answer written in result order. */
export function itemsOfResult(task: Task, value: unknown): StudyItem[] {
  if (task === 'notes') {
    const notes = value as NotesResult;
    return [
      ...notes.keyConcepts.map((concept): StudyItem => ({ kind: 'keyConcept', value: concept })),
      ...notes.sections.map((section): StudyItem => ({ kind: 'section', value: section })),
      ...notes.glossary.map((entry): StudyItem => ({ kind: 'glossaryEntry', value: entry })),
    ];
  }
  return (value as { questions: (McqQuestion | FillQuestion)[] }).questions.map((question): StudyItem => ({ kind: 'question', value: question }));
}
