import { summarizeValidationErrors } from '../errors/index.js';
import type { Expect, FinishedPart, Identical, StudyOutcome } from '../machines/job-types.js';
import type { CallBudget } from '../machines/types.js';
import type { Attempt, ChainLink, FallbackPolicy, Gateway, GenerateOutcome, Validation } from '../actors/types.js';
import { loadProviderSdks } from '../providers/index.js';
import type { GenerationRequest, ProviderAnswer, ProviderId, Task, TokenUsage } from '../providers/index.js';
import { sha256Hex, studyCacheKey, studyCacheScope, type CachedStudyResult, type ResultCache, type StudyCacheKeyParts } from './cache.js';
import { mapConcurrent } from './limit.js';
import { buildMergeNotesRequest, buildNotesRequest, buildQuestionsRequest, conceptList } from './prompts.js';
import type { FillResult, McqResult, NotesResult, StudyLang, StudyResult, StudyResultByTask } from './schemas.js';
import { defaultPartBudgetTokens, type TextPart } from './token-count.js';
import { tokenCounter } from './token-counter.js';
import { studyValidator, validateStudyValue, type QualityContext } from './validate.js';
import { PartQuestions, StepItems, TaskItems, type StudyReset, type StudyStreamSink } from './item-stream.js';
import { itemsOfResult } from './stream-items.js';
import { continuationOf } from './continuation.js';
import type { TextPageMap } from '../machines/job-types.js';
import { pagesOfParts, pagesOfText } from './pages.js';
import { assertPartsWithinLimit, TooManyPartsError } from './parts-limit.js';
import { mergedNotesTagger, samePages, tagResult, type PageTagger } from './page-tags.js';

/**
 * One study task end to end: notes (map-reduce over parts when the document is over the budget),
 * or MCQ/fill grounded on notes (generated first when the caller has none), through the gateway.
 * Every provider call of every step is one `gateway.generate`; the outcome carries all their
 * attempts, each tagged with its step's task.
 */

export interface StudyProgress {
  readonly stage: Task;
  /** Parts of this stage finished so far (1-based, only grows). */
  readonly part: number;
  readonly parts: number;
}

export interface StudyTaskInput extends StudyStreamSink {
  readonly task: Task;
  readonly text: string;
  /**
   * Where each page of `text` begins (a document's text): every element of the result then carries the
   * `pages` its source text came from. Absent for text input: no `pages`.
   */
  readonly pageMap?: TextPageMap;
  readonly lang: StudyLang;
  /** Questions asked for (mcq/fill); default 10. */
  readonly count?: number;
  /** Grounding for mcq/fill; without it notes are generated first. */
  readonly notes?: NotesResult;
  readonly chain: readonly ChainLink[];
  readonly policy?: FallbackPolicy;
  readonly signal?: AbortSignal;
  /** The client's origin, handed to every provider call (`GenerateInput.origin`). */
  readonly origin?: string;
  readonly onAttempt?: (attempt: Attempt) => void;
  readonly onProgress?: (progress: StudyProgress) => void;
  /** Most document tokens in one prompt; above it the text is split (default 6000). */
  readonly budgetTokens?: number;
  /** Parts in flight at once (default 2). */
  readonly concurrency?: number;
  /**
   * Most parts one stage may split the text into (MAX_TEXT_PARTS, default 40): a text that needs more
   * fails with 413 `TOO_MANY_PARTS` before that stage calls any provider.
   */
  readonly maxParts?: number;
  /** Finished results by document, task, language and options. */
  readonly cache?: ResultCache;
  /** The document's identity for the cache (its sha256); default a hash of `text`. */
  readonly cacheKey?: string;
  /**
   * Steps of this task finished by an earlier run of the same job (a resumed job): a step whose request
   * is one of these is answered from here, with no provider call. Their attempts count in the outcome
   * but are not reported through `onAttempt` again.
   */
  readonly finishedParts?: readonly FinishedPart[];
  /** Each provider step as it succeeds (the job stores it at once, so a resume never asks it again). */
  readonly onPart?: (part: FinishedPart) => void;
  /** Raw model output of every step as it arrives (the SSE route's `delta`). */
  readonly onDelta?: (provider: ProviderId, text: string) => void;
  /** Runs once, right before the first provider call (not at all for a cached answer). */
  readonly onStart?: () => void;
  /** The request's or job's spending limit (`options.maxCostUsd`), shared by every step and part. */
  readonly budget?: CallBudget;
}

/** A split text: its parts and, for a document, the pages of each part. */
interface SplitText {
  readonly parts: TextPart[];
  readonly pages: number[][] | undefined;
}

/** A step's identity: the sha256 of its whole request, so the same document and options give the same key. */
function stepKey(request: GenerationRequest): string {
  return sha256Hex(JSON.stringify(request));
}

type Succeeded<T> = Extract<GenerateOutcome<T>, { status: 'succeeded' }>;
type NotSucceeded = Exclude<GenerateOutcome<unknown>, { status: 'succeeded' }>;

/**
 * A gateway outcome over the study results, whose success may come from the cache (`cached`: no provider
 * call, usage zero). It is the job machine's stage outcome (src/machines/job-types.ts, below this layer).
 */
export type StudyTaskOutcome = StudyOutcome;

/** `tsc` fails the moment the job machine's stage outcome stops being the gateway's outcome plus `cached`. */
type StudySucceeded = Extract<StudyTaskOutcome, { status: 'succeeded' }>;
/** @public A compile-time check, exported so that `tsc` keeps it. */
export type StudyTaskOutcomeIsTheGateways = [
  Expect<Identical<Omit<StudySucceeded, 'cached'>, Succeeded<StudyResult>>>,
  Expect<Identical<Pick<StudySucceeded, 'cached'>, { readonly cached?: boolean }>>,
  Expect<Identical<Exclude<StudyTaskOutcome, { status: 'succeeded' }>, NotSucceeded>>,
];

export const defaultQuestionCount = 10;
const defaultConcurrency = 2;
const defaultMaxParts = 40;

class StepFailed extends Error {
  constructor(readonly outcome: NotSucceeded) {
    super(outcome.status === 'failed' ? outcome.message : 'aborted');
  }
}

interface Answered {
  readonly provider: ProviderId;
  readonly model: string;
}

function sumUsage(usages: readonly TokenUsage[]): TokenUsage {
  const sum = (field: keyof TokenUsage): number | null => {
    const known = usages.map((usage) => usage[field]).filter((value): value is number => value !== null);
    return known.length === 0 ? null : known.reduce((total, value) => total + value, 0);
  };
  return { inputTokens: sum('inputTokens'), outputTokens: sum('outputTokens') };
}

/** Splits `count` over parts in proportion to their size (largest remainder). */
export function allocateCount(count: number, weights: readonly number[]): number[] {
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  if (weights.length === 0) return [];
  if (total <= 0) return weights.map((_, index) => (index === 0 ? count : 0));
  const exact = weights.map((weight) => (count * weight) / total);
  const counts = exact.map(Math.floor);
  let left = count - counts.reduce((sum, value) => sum + value, 0);
  const byRemainder = exact.map((value, index) => ({ index, remainder: value - Math.floor(value) })).sort((a, b) => b.remainder - a.remainder || a.index - b.index);
  for (const { index } of byRemainder) {
    if (left <= 0) break;
    counts[index] = (counts[index] ?? 0) + 1;
    left -= 1;
  }
  return counts;
}

class StudyRun {
  readonly attempts: Attempt[] = [];
  readonly usages: TokenUsage[] = [];
  fallback = false;
  answered: Answered | undefined;
  /**
   * Aborts parts still in flight when one fails (and follows the caller's signal): made on the first
   * `parallel`, so a run of one step at a time (most runs) makes no controller and adds no listener.
   */
  private siblings: AbortController | undefined;
  private unlinkSiblings: (() => void) | undefined;
  readonly budget: number;
  readonly concurrency: number;
  readonly maxParts: number;
  private readonly finished: ReadonlyMap<string, FinishedPart>;
  /** The task's own result streamed as items (only when the caller listens). */
  readonly items: TaskItems | undefined;
  private started = false;

  constructor(
    private readonly gateway: Gateway,
    readonly input: StudyTaskInput,
  ) {
    this.finished = new Map((input.finishedParts ?? []).map((part) => [part.key, part]));
    this.budget = Math.max(64, input.budgetTokens ?? defaultPartBudgetTokens);
    this.concurrency = Math.max(1, input.concurrency ?? defaultConcurrency);
    this.maxParts = Math.max(1, input.maxParts ?? defaultMaxParts);
    this.items = input.onItem === undefined && input.onReset === undefined ? undefined : new TaskItems(input.task, input);
  }

  /** Items of a step whose answer is the task's result (undefined when nobody listens). */
  stepItems(context?: QualityContext, tagger?: PageTagger): StepItems | undefined {
    if (this.items === undefined) return undefined;
    const questions = context?.conceptIds === undefined ? undefined : { count: context.count ?? defaultQuestionCount, conceptIds: context.conceptIds };
    return new StepItems(this.items, questions, tagger);
  }

  /**
   * The text in parts within `budget`, counted off the main thread, with the pages of each part (a
   * document's text); refused when it needs more than `maxParts`, saying how many pages fit.
   */
  async split(budget: number): Promise<SplitText> {
    const parts = await tokenCounter.split(this.input.text, budget);
    const map = this.input.pageMap;
    const texts = parts.map((part) => part.text);
    try {
      assertPartsWithinLimit({ text: this.input.text, pageMap: map, parts: texts, budget, maxParts: this.maxParts });
    } catch (error) {
      if (!(error instanceof TooManyPartsError)) throw error;
      throw new StepFailed({ status: 'failed', httpStatus: 413, code: 'TOO_MANY_PARTS', message: error.message, attempts: [] });
    }
    const pages = map === undefined ? undefined : pagesOfParts(this.input.text, map, texts);
    return { parts, pages };
  }

  /** The tagger of a step made from the whole text (a single part), or undefined for text input. */
  wholeTextTagger(split: SplitText): PageTagger {
    const map = this.input.pageMap;
    if (map === undefined) return undefined;
    return samePages(split.pages?.[0] ?? pagesOfText(this.input.text, map));
  }

  /**
   * One `gateway.generate`; throws StepFailed when it did not succeed. `items`: this step's answer is the
   * task's result, streamed as it is written.
   */
  async step<T extends StudyResult>(request: GenerationRequest, validate: (answer: ProviderAnswer) => Validation<T>, items?: StepItems): Promise<T> {
    const task = request.task;
    // The step's key matters only to a job, which resumes by it and stores it: a plain request skips the hash.
    const key = this.finished.size > 0 || this.input.onPart !== undefined ? stepKey(request) : undefined;
    const done = key === undefined ? undefined : this.finished.get(key);
    if (done !== undefined) {
      // Paid for by the run that was interrupted: its answer and attempts stand, no provider is asked.
      this.attempts.push(...done.attempts);
      this.usages.push(done.usage);
      this.fallback ||= done.fallback;
      this.answered = { provider: done.provider, model: done.model };
      return done.value as T;
    }
    const onAttempt = this.input.onAttempt;
    const onDelta = this.input.onDelta;
    if (!this.started) {
      this.started = true;
      this.input.onStart?.();
    }
    const outcome = await this.gateway.generate<T>({
      request,
      validate,
      chain: this.input.chain,
      ...(this.input.policy === undefined ? {} : { policy: this.input.policy }),
      ...(this.signal === undefined ? {} : { signal: this.signal }),
      ...(this.input.origin === undefined ? {} : { origin: this.input.origin }),
      ...(this.input.budget === undefined ? {} : { budget: this.input.budget }),
      continuation: continuationOf(task),
      ...(items === undefined
        ? {}
        : {
            onContinued: (provider: ProviderId, prefix: string) => items.continued(prefix, provider),
            onReset: (reset: StudyReset) => items.restarted(reset),
          }),
      ...(onAttempt === undefined && items === undefined
        ? {}
        : {
            onAttempt: (attempt: Attempt) => {
              items?.attemptEnded(attempt);
              onAttempt?.({ ...attempt, task });
            },
          }),
      ...(onDelta === undefined && items === undefined
        ? {}
        : {
            onDelta: (provider: ProviderId, text: string) => {
              items?.delta(provider, text);
              onDelta?.(provider, text);
            },
          }),
    });
    const attempts = outcome.attempts.map((attempt) => ({ ...attempt, task }));
    this.attempts.push(...attempts);
    if (outcome.status !== 'succeeded') throw new StepFailed(outcome);
    items?.succeeded(outcome.value, outcome.provider);
    this.usages.push(outcome.usage);
    this.fallback ||= outcome.fallback;
    this.answered = { provider: outcome.provider, model: outcome.model };
    if (key !== undefined)
      this.input.onPart?.({
        key,
        stage: this.input.task,
        value: outcome.value,
        provider: outcome.provider,
        model: outcome.model,
        fallback: outcome.fallback,
        usage: outcome.usage,
        attempts,
      });
    return outcome.value;
  }

  /** What every step's provider calls are cut by: the caller's signal, or once parts run in parallel, theirs. */
  get signal(): AbortSignal | undefined {
    return this.siblings?.signal ?? this.input.signal;
  }

  /** Parts in flight at most `concurrency`; the first failure aborts the others. */
  parallel<I, O>(items: readonly I[], run: (item: I, index: number) => Promise<O>): Promise<O[]> {
    const siblings = this.siblingController();
    return mapConcurrent(items, this.concurrency, run, () => siblings.abort());
  }

  private siblingController(): AbortController {
    if (this.siblings !== undefined) return this.siblings;
    const siblings = new AbortController();
    this.siblings = siblings;
    const outer = this.input.signal;
    if (outer !== undefined) {
      const onAbort = (): void => siblings.abort(outer.reason);
      if (outer.aborted) onAbort();
      else {
        outer.addEventListener('abort', onAbort, { once: true });
        this.unlinkSiblings = () => outer.removeEventListener('abort', onAbort);
      }
    }
    return siblings;
  }

  /** The run is over: the caller's signal no longer needs to reach the parts. */
  finish(): void {
    this.unlinkSiblings?.();
    this.unlinkSiblings = undefined;
  }

  progress(stage: Task, part: number, parts: number): void {
    this.input.onProgress?.({ stage, part, parts });
  }

  /** What determines a result of `task`, its scope aside. */
  private cacheParts(task: Task, notes?: NotesResult): Omit<StudyCacheKeyParts, 'scope'> {
    const map = this.input.pageMap;
    // Results carry pages: a result is shared only by requests whose text has the same pages.
    const pages = map === undefined ? '' : `|pages:${map.firstPage}:${sha256Hex(map.starts.join(','))}`;
    return {
      source: `${this.input.cacheKey ?? `text:${sha256Hex(this.input.text)}`}${pages}`,
      task,
      lang: this.input.lang,
      ...(task === 'notes' ? {} : { count: this.input.count ?? defaultQuestionCount }),
      ...(notes === undefined ? {} : { notes }),
      budgetTokens: this.budget,
    };
  }

  /**
   * A cached result of `task` that this request could have produced itself: one stored under a
   * provider key the request holds (each link of its chain is tried, in order). Never one paid for
   * with another key.
   */
  cached<T>(task: Task, notes: NotesResult | undefined, revalidate: (entry: CachedStudyResult) => Validation<T>) {
    const cache = this.input.cache;
    if (cache === undefined) return undefined;
    const parts = this.cacheParts(task, notes);
    for (const link of this.input.chain) {
      const hit = cache.get(studyCacheKey({ ...parts, scope: studyCacheScope(link.provider, link.apiKey) }), revalidate);
      if (hit !== undefined) return hit;
    }
    return undefined;
  }

  /** Stores a result under the key of the provider that answered it (its scope). */
  remember(task: Task, notes: NotesResult | undefined, value: StudyResult, conceptIds?: readonly string[]): void {
    const answered = this.answered;
    if (this.input.cache === undefined || answered === undefined) return;
    const link = this.input.chain.find((candidate) => candidate.provider === answered.provider);
    if (link === undefined) return;
    this.input.cache.set(studyCacheKey({ ...this.cacheParts(task, notes), scope: studyCacheScope(link.provider, link.apiKey) }), {
      task,
      value,
      provider: answered.provider,
      model: answered.model,
      fallback: this.fallback,
      usage: sumUsage(this.usages),
      ...(conceptIds === undefined ? {} : { conceptIds }),
    });
  }
}

function cachedContext(entry: CachedStudyResult, count: number, lang: StudyLang): QualityContext {
  return { count, conceptIds: entry.conceptIds ?? [], lang };
}

async function generateNotes(run: StudyRun): Promise<NotesResult> {
  const { input } = run;
  const hit = run.cached('notes', undefined, (entry) => validateStudyValue('notes', entry.value, { lang: input.lang }));
  if (hit !== undefined) {
    run.progress('notes', 1, 1);
    return hit.value;
  }
  const split = await run.split(run.budget);
  const parts = split.parts.map((part) => part.text);
  let notes: NotesResult;
  if (parts.length <= 1) {
    const tagger = run.wholeTextTagger(split);
    notes = tagResult(
      await run.step(buildNotesRequest({ text: parts[0] ?? input.text, lang: input.lang }), studyValidator('notes', { lang: input.lang }), ownItems(run, 'notes', undefined, tagger)),
      tagger,
    );
    run.progress('notes', 1, 1);
  } else {
    // Map: notes per part. Reduce: merge them; the merge counts as the stage's last part.
    const total = parts.length + 1;
    let done = 0;
    const partials = await run.parallel(parts, async (text, index) => {
      const partNotes = await run.step(buildNotesRequest({ text, lang: input.lang, part: { index: index + 1, total: parts.length } }), studyValidator('notes', { lang: input.lang }));
      done += 1;
      run.progress('notes', done, total);
      return partNotes;
    });
    notes = await mergeNotes(run, partials, split.pages === undefined ? undefined : mergedNotesTagger(partials, split.pages));
    run.progress('notes', total, total);
  }
  run.remember('notes', undefined, notes);
  return notes;
}

/**
 * The reduce step. Per-part notes are small, but many parts can still exceed the budget together:
 * then groups that fit are merged first (a merge tree), and their results merged once more.
 */
async function mergeNotes(run: StudyRun, partials: readonly NotesResult[], tagger: PageTagger): Promise<NotesResult> {
  const merge = (group: readonly NotesResult[], last = false): Promise<NotesResult> =>
    run.step(buildMergeNotesRequest({ partials: group, lang: run.input.lang }), studyValidator('notes', { lang: run.input.lang }), last ? ownItems(run, 'notes', undefined, tagger) : undefined);
  let level = partials;
  for (;;) {
    const groups = await groupWithinBudget(level, run.budget);
    // The last merge writes the notes: only its answer is streamed as items, and only it gets pages.
    if (groups.length <= 1 || groups.every((group) => group.length === 1)) return tagResult(await merge(level, true), tagger);
    level = await run.parallel(groups, (group) => (group.length === 1 && group[0] !== undefined ? Promise.resolve(group[0]) : merge(group)));
  }
}

/** Token sizes of notes already counted (a merge tree counts each partial once). */
const notesTokens = new WeakMap<NotesResult, number>();

async function tokensOfNotes(notes: NotesResult): Promise<number> {
  const known = notesTokens.get(notes);
  if (known !== undefined) return known;
  // Provider output can be long: counted off the main thread.
  const size = await tokenCounter.count(JSON.stringify(notes));
  notesTokens.set(notes, size);
  return size;
}

async function groupWithinBudget(partials: readonly NotesResult[], budget: number): Promise<NotesResult[][]> {
  const groups: NotesResult[][] = [];
  let current: NotesResult[] = [];
  let tokens = 0;
  for (const notes of partials) {
    const size = await tokensOfNotes(notes);
    if (current.length > 0 && tokens + size > budget) {
      groups.push(current);
      current = [];
      tokens = 0;
    }
    current.push(notes);
    tokens += size;
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

async function generateQuestions(run: StudyRun, task: 'mcq' | 'fill', notes: NotesResult): Promise<McqResult | FillResult> {
  const { input } = run;
  const count = input.count ?? defaultQuestionCount;
  const conceptIds = notes.keyConcepts.map((concept) => concept.id);
  const context: QualityContext = { count, conceptIds, lang: input.lang };
  // The concept list travels with every part: the document part gets what is left of the budget.
  const partBudget = Math.max(Math.floor(run.budget / 2), run.budget - (await tokenCounter.count(conceptList(notes))));
  const split = await run.split(partBudget);
  const parts = split.parts.map((part) => part.text);
  if (parts.length <= 1) {
    const tagger = run.wholeTextTagger(split);
    const value = tagResult(
      await run.step(buildQuestionsRequest({ task, text: parts[0] ?? input.text, lang: input.lang, count, notes }), studyValidator(task, context), ownItems(run, task, context, tagger)),
      tagger,
    );
    run.progress(task, 1, 1);
    return value;
  }
  const counts = allocateCount(count, split.parts.map((part) => part.tokens));
  const jobs = parts.map((text, index) => ({ text, index, count: counts[index] ?? 0 })).filter((job) => job.count > 0);
  let done = 0;
  // Parts answer in any order; their questions are sent in part order, as the combined check keeps them.
  const partItems = run.items === undefined ? undefined : new PartQuestions(run.items, task, { count, conceptIds }, jobs.map((job) => job.index));
  const results = await run.parallel(jobs, async (job) => {
    // Each part's questions carry that part's pages.
    const value = tagResult(
      await run.step(
        buildQuestionsRequest({ task, text: job.text, lang: input.lang, count: job.count, notes, part: { index: job.index + 1, total: parts.length } }),
        studyValidator(task, { count: job.count, conceptIds, lang: input.lang }),
      ),
      samePages(split.pages?.[job.index]),
    );
    partItems?.partSucceeded(job.index, value.questions);
    done += 1;
    run.progress(task, done, jobs.length);
    return value;
  });
  // Every part numbers its questions from q1: renumber, then drop near-duplicates across parts.
  const questions: (McqResult['questions'][number] | FillResult['questions'][number])[] = [];
  for (const result of results) for (const question of result.questions) questions.push({ ...question, id: `q${questions.length + 1}` });
  const combined = validateStudyValue(task, { questions }, context);
  if (!combined.ok) {
    throw new StepFailed({
      status: 'failed',
      httpStatus: 502,
      code: 'INVALID_PROVIDER_OUTPUT',
      message: `Questions from the document's parts failed the checks when combined: ${summarizeValidationErrors(combined.errors)}`,
      attempts: [],
    });
  }
  const answered = run.answered;
  if (answered !== undefined) run.items?.settle(itemsOfResult(task, combined.value), answered.provider);
  return combined.value;
}

/** The step items of a step that writes the task's own result (grounding notes of mcq/fill are not streamed). */
function ownItems(run: StudyRun, task: Task, context?: QualityContext, tagger?: PageTagger): StepItems | undefined {
  return run.input.task === task ? run.stepItems(context, tagger) : undefined;
}

async function runTask(run: StudyRun): Promise<StudyResult> {
  const { input } = run;
  if (input.task === 'notes') return generateNotes(run);
  const notes = input.notes ?? (await generateNotes(run));
  const value = await generateQuestions(run, input.task, notes);
  run.remember(input.task, input.notes, value, notes.keyConcepts.map((concept) => concept.id));
  return value;
}

function cachedOutcome(run: StudyRun): StudyTaskOutcome | undefined {
  const { input } = run;
  const count = input.count ?? defaultQuestionCount;
  const hit = run.cached(input.task, input.task === 'notes' ? undefined : input.notes, (entry) =>
    entry.task === input.task ? validateStudyValue(input.task, entry.value, cachedContext(entry, count, input.lang)) : { ok: false, errors: ['task mismatch'] },
  );
  if (hit === undefined) return undefined;
  return {
    status: 'succeeded',
    value: hit.value as StudyResultByTask[typeof input.task],
    provider: hit.entry.provider,
    model: hit.entry.model,
    fallback: hit.entry.fallback,
    attempts: [],
    usage: { inputTokens: 0, outputTokens: 0 },
    cached: true,
  };
}

/**
 * Generates one study task (conventions: `generateStudyTask(gateway, input)`). Succeeds with the
 * final step's provider and model, `fallback` if any step fell back, usage summed over steps
 * (`null` when no step reported it); fails with the failing step's status, code and retry-after
 * and every attempt so far; `aborted` when the caller's signal fired.
 */
export async function generateStudyTask(gateway: Gateway, input: StudyTaskInput): Promise<StudyTaskOutcome> {
  const run = new StudyRun(gateway, input);
  const cached = cachedOutcome(run);
  if (cached !== undefined) {
    if (cached.status === 'succeeded') run.items?.settle(itemsOfResult(input.task, cached.value), cached.provider);
    return cached;
  }
  if (input.signal?.aborted) return { status: 'aborted', attempts: [] };
  // A provider's SDK imported on first use (Claude's) is loaded before the first call's deadline starts.
  const loading = loadProviderSdks(input.chain);
  if (loading !== undefined) {
    await loading;
    if (input.signal?.aborted) return { status: 'aborted', attempts: [] };
  }
  try {
    const value = await runTask(run);
    const answered = run.answered;
    if (answered === undefined) throw new Error('study task finished without a provider answer');
    // Whatever path the result took (a cached step, parts), the items sent are its elements.
    run.items?.settle(itemsOfResult(input.task, value), answered.provider);
    return { status: 'succeeded', value, provider: answered.provider, model: answered.model, fallback: run.fallback, attempts: run.attempts, usage: sumUsage(run.usages) };
  } catch (error) {
    if (input.signal?.aborted) return { status: 'aborted', attempts: run.attempts };
    if (!(error instanceof StepFailed)) throw error;
    if (error.outcome.status === 'aborted') return { status: 'aborted', attempts: run.attempts };
    return { ...error.outcome, attempts: run.attempts };
  } finally {
    run.finish();
  }
}
