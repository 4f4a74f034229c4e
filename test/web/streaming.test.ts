/**
 * The page shows the study material as it is written: in real Chromium against the demo, a job
 * whose provider answers slowly (the emulator's `slow` fault on every call) shows its notes while its quiz
 * questions are still being written, then the whole result once the job is done.
 */
import { describe, expect, it } from 'vitest';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { useDemoPage } from './demo-page.js';

describe('the page streams the material', () => {
  const rig = useDemoPage({ PROVIDER_TIMEOUT_MS: '20000' });

  it('shows the notes while the questions are still being written, then the whole result', { timeout: 240_000 }, async () => {
    const { demo, page, problems } = rig;
    await page.goto(demo.url);
    // Every Claude call takes 2 s: the notes stage ends ~2 s before the mcq stage, ~4 s before the job.
    demo.emulator.setFault({ provider: 'claude', fault: 'slow', ms: 2000 });
    await page.setInputFiles('#upload-file', { name: 'plants.pdf', mimeType: 'application/pdf', buffer: Buffer.from(await englishTextPdf(2)) });
    await page.fill('#mcq-count', '3');
    await page.fill('#fill-count', '3');
    await page.click('#upload-button');
    // The upload shows the plan (chapters, pages, estimate, budget); the job starts with Start.
    await page.locator('#start-button').click({ timeout: 60_000 });
    // The notes are on the page, marked live, while the job is still running and has no question yet.
    // The first upload starts the extraction worker: seconds on a quiet machine, a minute on a loaded one.
    await expect.poll(() => page.locator('#document-info').textContent(), { timeout: 120_000 }).toContain('plants.pdf');
    await expect.poll(() => page.locator('#results[data-live] #notes li').count(), { timeout: 30_000 }).toBeGreaterThan(0);
    const progress = await page.locator('#progress').evaluate((node) => (node as HTMLProgressElement).value);
    expect(progress).toBeLessThan(100);
    expect(await page.locator('.mcq-question').count()).toBe(0);
    // Then the questions appear, and the final result replaces the live one.
    await expect.poll(() => page.locator('.mcq-question').count(), { timeout: 30_000 }).toBe(3);
    await expect.poll(() => page.locator('#progress').evaluate((node) => (node as HTMLProgressElement).value), { timeout: 30_000 }).toBe(100);
    await expect.poll(() => page.locator('#results').getAttribute('data-live')).toBeNull();
    expect(await page.locator('.fill-question').count()).toBe(3);
    expect(problems).toEqual([]);
  });
});
