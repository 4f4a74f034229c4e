import { isDeepStrictEqual } from 'node:util';
import type { Attempt } from '../actors/types.js';
import type { ProviderId, Task } from '../providers/index.js';
import type { QuestionCheckOptions } from './quality.js';
import { fillProblem, fillText, mcqProblem, mcqText, QuestionKeeper } from './quality.js';
import type { FillQuestion, McqQuestion, StudyResult } from './schemas.js';
import { itemsOfResult, StudyItemExtractor, type StudyItem } from './stream-items.js';
import { tagItem, tagResult, type PageTagger } from './page-tags.js';

/**
 * Where a task's items go while it runs: the elements of the task's own result, as each
 * becomes complete, and a reset whenever what was sent is void. The one rule every step keeps: when the
 * task succeeds, the items sent since the last reset are exactly the result's elements, in order.
 */

/** Why the items sent so far are void (docs/api.md "Streaming", `reset`). */
export interface StudyReset {
  readonly provider: ProviderId;
  readonly reason: string;
}

/** The callbacks a study run streams to (the SSE route, the job runner). */
export interface StudyStreamSink {
  readonly onItem?: (item: StudyItem) => void;
  readonly onReset?: (reset: StudyReset) => void;
}

/** The items of one task: what was sent since the last reset. */
export class TaskItems {
  private sent: StudyItem[] = [];

  constructor(
    readonly task: Task,
    private readonly sink: StudyStreamSink,
  ) {}

  get count(): number {
    return this.sent.length;
  }

  send(item: StudyItem): void {
    this.sent.push(item);
    this.sink.onItem?.(item);
  }

  /**
   * Voids what was sent and says so, once: only when something was sent, unless `always` (the run started
   * its answer over after output was streamed, whether or not it held a complete element).
   */
  reset(reset: StudyReset, always = false): void {
    if (this.sent.length === 0 && !always) return;
    this.sent = [];
    this.sink.onReset?.(reset);
  }

  /**
   * The step's final elements: what was sent is kept when it is where they begin, and the rest is sent;
   * anything else (the whole answer's checks kept other elements than the stream showed) is reset and sent whole.
   */
  settle(elements: readonly StudyItem[], provider: ProviderId): void {
    const agrees = this.sent.length <= elements.length && this.sent.every((item, index) => isDeepStrictEqual(item, elements[index]));
    if (!agrees) this.reset({ provider, reason: 'the whole answer kept other elements than were sent' });
    for (const item of elements.slice(this.sent.length)) this.send(item);
  }
}

/**
 * The items of one `gateway.generate` whose answer is the task's result. The run says what follows an
 * attempt that wrote output and failed: the next one continues the answer from a prefix (`continued`: the
 * items up to it stand, its output is fed on after it) or starts it over (`restarted`: a reset). Without a
 * word from the run, output of an attempt that follows one that wrote and ended starts over.
 */
export class StepItems {
  private extractor: StudyItemExtractor | undefined;
  /** The last attempt wrote output and ended: unless continued, the next output starts a new answer. */
  private ended: Attempt | undefined;
  /** The attempt in flight has written output. */
  private wrote = false;

  constructor(
    private readonly items: TaskItems,
    private readonly questions: QuestionCheckOptions | undefined,
    /** The pages each element gets (documents only): the items sent carry them, as the result will. */
    private readonly tagger: PageTagger = undefined,
  ) {}

  /** A piece of the current attempt's output. */
  delta(provider: ProviderId, text: string): void {
    this.wrote = true;
    if (this.extractor === undefined || this.ended !== undefined) {
      const before = this.ended;
      this.ended = undefined;
      this.extractor = this.newExtractor();
      if (before !== undefined) this.items.reset({ provider, reason: resetReason(before) });
    }
    for (const item of this.extractor.push(text)) this.items.send(tagItem(item, this.tagger));
  }

  /** An attempt was recorded (succeeded or not); one that wrote nothing leaves the answer as it was. */
  attemptEnded(attempt: Attempt): void {
    if (this.wrote) this.ended = attempt;
    this.wrote = false;
  }

  /**
   * The next attempt continues the answer from `prefix` (the output so far cut back to its last complete
   * element): the items up to there stand (any it holds that were not sent are sent), and the next
   * output is read as following it.
   */
  continued(prefix: string, provider: ProviderId): void {
    this.ended = undefined;
    this.extractor = this.newExtractor();
    this.items.settle(this.extractor.push(prefix).map((item) => tagItem(item, this.tagger)), provider);
  }

  /** The next attempt starts the answer over: what was sent is void, and the client is told. */
  restarted(reset: StudyReset): void {
    this.ended = undefined;
    this.extractor = undefined;
    this.items.reset(reset, true);
  }

  private newExtractor(): StudyItemExtractor {
    return new StudyItemExtractor({ task: this.items.task, ...(this.questions === undefined ? {} : { questions: this.questions }) });
  }

  /** The step succeeded with `value`: the items become exactly its elements (with their pages). */
  succeeded(value: StudyResult, provider: ProviderId): void {
    this.items.settle(itemsOfResult(this.items.task, tagResult(value, this.tagger)), provider);
  }
}

function resetReason(attempt: Attempt): string {
  if (attempt.outcome === 'succeeded') return `${attempt.provider}'s answer was not used`;
  return `${attempt.provider} failed (${attempt.errorClass ?? 'error'}); the next answer starts over`;
}

/**
 * The questions of a task split into parts: each part's questions, once that part has succeeded, renumbered
 * q1… across parts and run through one keeper (near-duplicates across parts, count), in part order whatever
 * order the parts finish in; exactly what the task's combined check keeps.
 */
export class PartQuestions {
  private readonly done = new Map<number, readonly (McqQuestion | FillQuestion)[]>();
  private next = 0;
  private numbered = 0;
  private readonly keeper: QuestionKeeper<McqQuestion> | QuestionKeeper<FillQuestion>;

  constructor(
    private readonly items: TaskItems,
    private readonly task: 'mcq' | 'fill',
    private readonly options: QuestionCheckOptions,
    /** Part positions in order (parts given no question are left out). */
    private readonly order: readonly number[],
  ) {
    this.keeper = task === 'mcq' ? new QuestionKeeper<McqQuestion>(options, mcqProblem, mcqText) : new QuestionKeeper<FillQuestion>(options, fillProblem, fillText);
  }

  partSucceeded(part: number, questions: readonly (McqQuestion | FillQuestion)[]): void {
    this.done.set(part, questions);
    for (let ready = this.done.get(this.order[this.next] ?? -1); ready !== undefined; ready = this.done.get(this.order[this.next] ?? -1)) {
      this.done.delete(this.order[this.next] as number);
      this.next += 1;
      for (const question of ready) this.offer(question);
    }
  }

  private offer(question: McqQuestion | FillQuestion): void {
    this.numbered += 1;
    const renumbered = { ...question, id: `q${this.numbered}` };
    if (this.keeper.questions.length >= this.options.count) return;
    const verdict = this.task === 'mcq' ? (this.keeper as QuestionKeeper<McqQuestion>).offer(renumbered as McqQuestion) : (this.keeper as QuestionKeeper<FillQuestion>).offer(renumbered as FillQuestion);
    if (verdict.kept) this.items.send({ kind: 'question', value: verdict.question });
  }
}
