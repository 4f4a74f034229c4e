/**
 * What a job may cost before it starts (`POST /v1/jobs` with `"estimate": true`, docs/api.md "Cost"): a true
 * worst case of the whole pipeline — notes (every part, the merges), MCQ and fill (every part) — with every
 * re-ask and retry the policy allows, each call reading its whole prompt and writing all its output room.
 * It mirrors how generate.ts cuts the text and builds each request, and counts with the same token counter,
 * so a job given its own estimate as `maxCostUsd` is never refused a call. No provider is asked.
 */
import type { PriceTable } from '../cost/index.js';
import type { TextPageMap } from '../machines/job-types.js';
import type { ProviderId } from '../machines/types.js';
import { assertPartsWithinLimit } from './parts-limit.js';
import { requestInputTokens } from './cost-budget.js';
import { buildMergeNotesRequest, buildNotesRequest, buildQuestionsRequest, maxOutputTokens } from './prompts.js';
import type { NotesResult, StudyLang } from './schemas.js';
import { tokenCounter } from './token-counter.js';

export interface JobEstimateInput {
  readonly text: string;
  readonly lang: StudyLang;
  readonly mcqCount: number;
  readonly fillCount: number;
  /** Most document tokens in one prompt (JOB_PART_BUDGET_TOKENS), as the job splits with. */
  readonly budgetTokens: number;
  /** Retries of a provider-side failure on one provider (RETRY_MAX). */
  readonly retryMax: number;
  /** The chain's providers and the model each would be asked with. */
  readonly chain: readonly { readonly provider: ProviderId; readonly model: string }[];
  readonly prices: PriceTable;
  /** MAX_TEXT_PARTS: past it the estimate is refused as the job would be (TooManyPartsError). */
  readonly maxParts?: number | undefined;
  /** Where each page of the document's text begins, for the refusal's advice (how many pages fit). */
  readonly pageMap?: TextPageMap | undefined;
}

export interface JobEstimate {
  /** The parts the document's text is cut into for its notes. */
  readonly parts: number;
  /** Input tokens of every call the job may make (re-asks and retries included). */
  readonly inputTokens: number;
  /** Output tokens those calls may write at most. */
  readonly outputTokensMax: number;
  /** The most the job can cost with each provider of the chain answering every call; null: its model has no price. */
  readonly costUsdMax: Partial<Record<ProviderId, number | null>>;
}

/**
 * Tokens a re-ask's validation errors may add (at most a few dozen, each clipped to 300 characters). A
 * re-ask also carries the answer it corrects, and a continuation the answer so far: each at most the
 * call's output room.
 */
const reaskErrorTokens = 4096;

/** One provider step: its first call's input tokens and its output room. */
interface Step {
  readonly input: number;
  readonly output: number;
}

/** Notes with nothing in them: the fixed part of a prompt whose notes are only known once written. */
const emptyNotes: NotesResult = { keyConcepts: [], sections: [], glossary: [] };

/** Tokens each per-part notes adds around its JSON in a merge prompt (`<part index="i">…</part>`). */
const partWrapperTokens = 16;

async function notesSteps(input: JobEstimateInput): Promise<{ steps: Step[]; parts: number }> {
  const parts = await tokenCounter.split(input.text, input.budgetTokens);
  if (input.maxParts !== undefined)
    assertPartsWithinLimit({ text: input.text, pageMap: input.pageMap, parts: parts.map((part) => part.text), budget: input.budgetTokens, maxParts: input.maxParts });
  const notesOut = maxOutputTokens('notes');
  if (parts.length <= 1) {
    const request = buildNotesRequest({ text: parts[0]?.text ?? input.text, lang: input.lang });
    return { steps: [{ input: await requestInputTokens(request), output: notesOut }], parts: 1 };
  }
  const steps: Step[] = [];
  for (const [index, part] of parts.entries()) {
    const request = buildNotesRequest({ text: part.text, lang: input.lang, part: { index: index + 1, total: parts.length } });
    steps.push({ input: await requestInputTokens(request), output: notesOut });
  }
  // The merge tree: at most one merge fewer than parts. A merge of a group reads at most the budget of
  // per-part notes; the last may read every part's notes, each at most the notes' output room.
  const mergeBase = await requestInputTokens(buildMergeNotesRequest({ partials: [], lang: input.lang }));
  const n = parts.length;
  for (let merge = 0; merge < n - 2; merge += 1) steps.push({ input: mergeBase + input.budgetTokens + n * partWrapperTokens, output: notesOut });
  steps.push({ input: mergeBase + Math.max(input.budgetTokens, n * notesOut) + n * partWrapperTokens, output: notesOut });
  return { steps, parts: n };
}

/**
 * MCQ or fill: the text is cut so that the concept list and a part fit the budget (never below half of it);
 * each part asks for its share of the questions. The notes are not written yet: their concept list (and the
 * concept ids in the task line) are bounded by the notes' output room.
 */
async function questionSteps(input: JobEstimateInput, task: 'mcq' | 'fill', count: number): Promise<Step[]> {
  const parts = await tokenCounter.split(input.text, Math.max(16, Math.floor(input.budgetTokens / 2)));
  const calls = Math.max(1, Math.min(parts.length, count));
  const base = await requestInputTokens(buildQuestionsRequest({ task, text: '', lang: input.lang, count, notes: emptyNotes }));
  const notesRoom = 2 * maxOutputTokens('notes');
  const textTokens = parts.reduce((sum, part) => sum + part.tokens, 0);
  // Each part's output room is 800 plus its questions' (generate.ts allocates the count over the parts).
  const perQuestion = maxOutputTokens(task, 1) - maxOutputTokens(task, 0);
  const steps: Step[] = [];
  for (let call = 0; call < calls; call += 1) {
    steps.push({
      input: base + notesRoom + (call === 0 ? textTokens : 0),
      output: maxOutputTokens(task, 0) + (call === 0 ? count * perQuestion : 0),
    });
  }
  return steps;
}

/** The worst case of one step: its call, one re-ask and every retry, each re-sending the answer so far. */
function worstOf(step: Step, retryMax: number): Step {
  const calls = 2 + retryMax;
  return {
    input: step.input + (calls - 1) * (step.input + 2 * step.output + reaskErrorTokens),
    output: calls * step.output,
  };
}

/** The estimate of a job over `input.text`; no provider is asked. */
export async function estimateJob(input: JobEstimateInput): Promise<JobEstimate> {
  const notes = await notesSteps(input);
  const steps = [...notes.steps, ...(await questionSteps(input, 'mcq', input.mcqCount)), ...(await questionSteps(input, 'fill', input.fillCount))];
  let inputTokens = 0;
  let outputTokensMax = 0;
  for (const step of steps) {
    const worst = worstOf(step, input.retryMax);
    inputTokens += worst.input;
    outputTokensMax += worst.output;
  }
  const costUsdMax: Partial<Record<ProviderId, number | null>> = {};
  for (const link of input.chain) costUsdMax[link.provider] = input.prices.costOfTokens(link.model, inputTokens, outputTokensMax);
  return { parts: notes.parts, inputTokens, outputTokensMax, costUsdMax };
}
