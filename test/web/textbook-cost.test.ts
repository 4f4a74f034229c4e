/**
 * A chapter of a textbook, priced before it starts, in a real browser (Chromium driven by playwright-core
 * against the emulator + service on loopback in demo mode): upload a PDF with bookmarks, pick a chapter,
 * estimate, set a budget, start, see each item's pages and the cost. Screenshots of each step go to
 * test-artifacts/web/ (gitignored; CI keeps them).
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { findProjectRoot } from '../../src/web/assets.js';
import { outlinedPdf } from '../fixtures/pdf/outline.js';
import { useDemoPage } from './demo-page.js';

const artifacts = join(findProjectRoot(), 'test-artifacts', 'web');

describe('the page: a chapter at a time, priced before it starts', () => {
  const rig = useDemoPage({});

  beforeAll(async () => {
    await mkdir(artifacts, { recursive: true });
  });

  it('walks upload, chapter, estimate, start, items with pages, cost', { timeout: 240_000 }, async () => {
    const { demo, page, problems } = rig;
    const shot = (name: string) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
    const requests: { url: string; body: string | null }[] = [];
    page.on('request', (request) => {
      if (request.url().endsWith('/v1/jobs') && request.method() === 'POST') requests.push({ url: request.url(), body: request.postData() });
    });
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    await page.goto(demo.url);
    await page.setInputFiles('#upload-file', { name: 'biology.pdf', mimeType: 'application/pdf', buffer: Buffer.from(await outlinedPdf(12)) });
    await page.fill('#mcq-count', '3');
    await page.fill('#fill-count', '3');
    await page.click('#upload-button');

    // 1. The chapters: the PDF's bookmarks, each with the pages it covers (Chapter 1 runs from page 2 to the
    // page before Chapter 2, on page 6).
    const chapter = page.locator('#chapter-list label', { hasText: 'Chapter 1' });
    await chapter.waitFor({ timeout: 120_000 });
    expect(await chapter.locator('.chapter-page').textContent()).toBe('pp. 2–5');
    expect(await page.locator('#chapter-list label', { hasText: '1.1 Lipids' }).locator('.chapter-page').textContent()).toBe('p. 3');
    await shot('11-chapters');
    await chapter.click();
    expect(await page.inputValue('#page-from')).toBe('2');
    expect(await page.inputValue('#page-to')).toBe('5');

    // 2. The estimate, per provider of the chain, before anything starts.
    const callsBefore = demo.emulator.stats().claude.calls + demo.emulator.stats().gpt.calls;
    const estimating = page.waitForRequest((request) => request.url().endsWith('/v1/jobs') && request.method() === 'POST');
    await page.click('#estimate-button');
    await estimating;
    const claudeEstimate = page.locator('#estimate .estimate-item[data-provider="claude"]');
    await expect.poll(() => claudeEstimate.textContent(), { timeout: 30_000 }).toMatch(/^Claude: at most \$\d+\.\d+$/);
    expect(demo.emulator.stats().claude.calls + demo.emulator.stats().gpt.calls).toBe(callsBefore);
    const estimated = Number((await claudeEstimate.textContent())?.replace(/^.*\$/, ''));
    const estimateRequest = JSON.parse(requests[0]?.body ?? '{}') as { estimate?: boolean; pages?: unknown };
    expect(estimateRequest).toMatchObject({ estimate: true, pages: { from: 2, to: 5 } });
    await shot('12-estimate');

    // 3. A budget of that estimate, and Start.
    await page.fill('#budget', String(estimated));
    const starting = page.waitForRequest((request) => request.url().endsWith('/v1/jobs') && request.method() === 'POST');
    await page.click('#start-button');
    const startRequest = JSON.parse((await starting).postData() ?? '{}') as { estimate?: boolean; pages?: unknown; options?: { maxCostUsd?: number } };
    expect(startRequest.estimate).toBeUndefined();
    expect(startRequest).toMatchObject({ pages: { from: 2, to: 5 }, options: { maxCostUsd: estimated } });
    await expect.poll(() => page.locator('#job-cost').textContent(), { timeout: 60_000 }).toMatch(/^Cost so far: \$/);
    await shot('13-running-cost');

    // 4. The material, each item with the pages it came from: only pages of the chapter asked for.
    await expect.poll(() => page.locator('#progress').evaluate((node) => (node as HTMLProgressElement).value), { timeout: 120_000 }).toBe(100);
    await expect.poll(() => page.locator('#results').getAttribute('data-live')).toBeNull();
    const badges = await page.locator('#results .pages').allTextContents();
    expect(badges.length).toBeGreaterThanOrEqual(3 + 3);
    for (const badge of badges) {
      const pages = [...badge.matchAll(/\d+/g)].map((match) => Number(match[0]));
      expect(pages.length, badge).toBeGreaterThan(0);
      for (const number of pages) expect(number, badge).toBeGreaterThanOrEqual(2);
      for (const number of pages) expect(number, badge).toBeLessThanOrEqual(5);
    }
    expect(await page.locator('.mcq-question .pages').count()).toBe(3);
    expect(await page.locator('.fill-question .pages').count()).toBe(3);

    // 5. The cost: what the job spent, within the budget.
    await expect.poll(() => page.locator('#job-cost').textContent()).toMatch(/^Cost: \$\d+\.\d+ of a budget of \$/);
    const spent = Number((await page.locator('#job-cost').textContent())?.match(/^Cost: \$(\d+\.\d+)/)?.[1]);
    expect(spent).toBeGreaterThan(0);
    expect(spent).toBeLessThanOrEqual(estimated);
    await shot('14-items-with-pages-and-cost');
    expect(problems).toEqual([]);
  });
});
