/**
 * A job's cost before and after (docs/api.md "Cost"): the estimate, the running cost, and the budget,
 * through the real service, the real SDKs and the provider emulator on loopback.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { pollJob, postJson, startJobsHarness, uploadPdf, type Harness } from '../jobs/support.js';

const keys = { 'x-claude-key': 'test-claude-key-0001-jobcost', 'x-gpt-key': 'test-gpt-key-0001-jobcost' } as const;

/**
 * Claude's model at $0.01 per million tokens read and $15 written, GPT's at $1.75 and $14. Reading is nearly
 * free for Claude here, so a job's worst case is its output room: what the `fullUsage` fault makes the
 * emulator bill (every call reports its whole max_tokens as written).
 */
const prices = JSON.stringify({ 'claude-sonnet-4-6': { input: 0.01, output: 15 }, 'gpt-5.2': { input: 1.75, output: 14 } });

interface Attempt {
  provider: string;
  outcome: string;
  task?: string;
  costUsd?: number;
}
interface Estimate {
  parts: number;
  inputTokens: number;
  outputTokensMax: number;
  costUsdMax: Record<string, number | null>;
}
interface JobBody {
  status: string;
  costUsd: number | null;
  result?: { notes?: unknown; mcq?: unknown; fill?: unknown };
  error?: { code: string; message: string };
  meta: { attempts: Attempt[]; maxCostUsd?: number };
}

let harness: Harness;
/** A document cut into several parts, and two short ones (each job its own: the results cache stays out). */
let longDocument: string;
let shortDocuments: string[];

beforeAll(async () => {
  // RETRY_MAX=0: a step's worst case is its call and its one re-ask after invalid output.
  harness = await startJobsHarness({ MODEL_PRICES: prices, RETRY_MAX: '0' });
  longDocument = (await uploadPdf(harness, await englishTextPdf(12, { linesPerPage: 30 }), 'cost-12.pdf')).documentId;
  shortDocuments = [
    (await uploadPdf(harness, await englishTextPdf(1), 'cost-1.pdf')).documentId,
    (await uploadPdf(harness, await englishTextPdf(2), 'cost-2.pdf')).documentId,
  ];
});

afterAll(async () => {
  await harness.close();
});

beforeEach(async () => {
  await harness.reset();
});

function calls(): number {
  const stats = harness.emulator.stats();
  return stats.claude.calls + stats.gpt.calls + stats.timelygpt.calls;
}

async function estimateOf(body: Record<string, unknown>): Promise<Estimate> {
  const result = await postJson(`${harness.url}/v1/jobs`, { ...body, estimate: true }, keys);
  expect(result.status, result.text).toBe(200);
  return (result.body as { estimate: Estimate }).estimate;
}

async function runJob(body: Record<string, unknown>): Promise<JobBody> {
  const created = await postJson(`${harness.url}/v1/jobs`, body, keys);
  expect(created.status, created.text).toBe(202);
  const jobId = (created.body as { jobId: string }).jobId;
  const done = await pollJob(harness, jobId, (view) => ['succeeded', 'failed', 'cancelled'].includes(view.status));
  return done.body as JobBody;
}

describe('the estimate', () => {
  it('answers the worst case per provider of the chain, with no job and no provider call', async () => {
    const before = calls();
    const estimate = await estimateOf({ documentId: longDocument, providers: ['claude', 'gpt'], options: { lang: 'en', mcqCount: 5, fillCount: 5 } });
    expect(calls()).toBe(before);
    expect(estimate.parts).toBeGreaterThan(1);
    expect(estimate.inputTokens).toBeGreaterThan(0);
    expect(estimate.outputTokensMax).toBeGreaterThan(0);
    // Each provider's figure is the tokens at its model's price (USD per million tokens).
    expect(estimate.costUsdMax.claude).toBeCloseTo((estimate.inputTokens * 0.01 + estimate.outputTokensMax * 15) / 1e6, 9);
    expect(estimate.costUsdMax.gpt).toBeCloseTo((estimate.inputTokens * 1.75 + estimate.outputTokensMax * 14) / 1e6, 9);
    expect(Object.keys(estimate.costUsdMax).sort()).toEqual(['claude', 'gpt']);
  });

  it('is refused like the job itself: no key, unknown document', async () => {
    const noKey = await postJson(`${harness.url}/v1/jobs`, { documentId: longDocument, estimate: true, providers: ['claude'] }, {});
    expect(noKey.status).toBe(400);
    expect((noKey.body as { error: { code: string } }).error.code).toBe('NO_PROVIDER_KEY');
    const unknown = await postJson(`${harness.url}/v1/jobs`, { documentId: 'nope', estimate: true }, keys);
    expect(unknown.status).toBe(404);
  });
});

describe('a job with a budget', () => {
  it('finishes within its own estimate even when every call bills its whole output room', async () => {
    const body = { documentId: longDocument, providers: ['claude'], options: { lang: 'en', mcqCount: 5, fillCount: 5 } };
    const estimate = await estimateOf(body);
    const maxCostUsd = estimate.costUsdMax.claude ?? Number.NaN;
    harness.fault({ provider: 'claude', fault: 'fullUsage', count: 1000 });
    const job = await runJob({ ...body, options: { ...body.options, maxCostUsd } });
    expect(job.status, JSON.stringify(job.error)).toBe('succeeded');
    expect(job.meta.maxCostUsd).toBe(maxCostUsd);
    const costs = job.meta.attempts.map((attempt) => attempt.costUsd ?? Number.NaN);
    expect(costs.length).toBeGreaterThan(3);
    // The job's cost so far is the sum of its attempts' costs, and within the estimate.
    expect(job.costUsd).toBeCloseTo(costs.reduce((sum, cost) => sum + cost, 0), 9);
    expect(job.costUsd).toBeLessThanOrEqual(maxCostUsd);
  });

  it('stops at a third of its estimate with BUDGET_EXCEEDED and keeps what it finished', async () => {
    // One part: notes (4096 tokens of output room), then MCQ (800 + 5 × 400) and fill (800 + 5 × 220). With
    // RETRY_MAX=0 each step may be asked twice, so the estimate is about 2 × (4096 + 2800 + 1900) tokens
    // written at $15 per million; a third of it pays for the notes (4096) but not for the MCQ on top (2800).
    const body = { documentId: shortDocuments[0], providers: ['claude'], options: { lang: 'en', mcqCount: 5, fillCount: 5 } };
    const estimate = await estimateOf(body);
    expect(estimate.parts).toBe(1);
    // Every step asked twice (its call and its re-ask), each writing all of its output room.
    expect(estimate.outputTokensMax).toBe(2 * (4096 + (800 + 5 * 400) + (800 + 5 * 220)));
    const maxCostUsd = (estimate.costUsdMax.claude ?? Number.NaN) / 3;
    harness.fault({ provider: 'claude', fault: 'fullUsage', count: 1000 });
    const before = harness.emulator.stats().claude.calls;
    const job = await runJob({ ...body, options: { ...body.options, maxCostUsd } });
    expect(job.status).toBe('failed');
    expect(job.error?.code).toBe('BUDGET_EXCEEDED');
    // The notes were paid for and are kept; the MCQ call was never made.
    expect(Object.keys(job.result ?? {})).toEqual(['notes']);
    expect(harness.emulator.stats().claude.calls - before).toBe(1);
    expect(job.meta.attempts.map((attempt) => [attempt.task, attempt.outcome])).toEqual([['notes', 'succeeded']]);
    // The notes call billed 4096 tokens written at $15 per million (and its prompt at $0.01 per million).
    expect(job.costUsd).toBeGreaterThanOrEqual((4096 * 15) / 1e6);
    expect(job.costUsd).toBeLessThan((4096 * 15 + 100_000 * 0.01) / 1e6);
    expect(job.costUsd).toBeLessThanOrEqual(maxCostUsd);
  });

  it('refuses a budget that is not a positive number with 400 INVALID_REQUEST, starting nothing', async () => {
    for (const maxCostUsd of [0, -1, '5', null, 1e300]) {
      const result = await postJson(`${harness.url}/v1/jobs`, { documentId: shortDocuments[1], options: { maxCostUsd } }, keys);
      expect(result.status, JSON.stringify(maxCostUsd)).toBe(400);
      expect((result.body as { error: { code: string } }).error.code).toBe('INVALID_REQUEST');
    }
  });
});
