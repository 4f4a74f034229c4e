/**
 * The browser tests' rig: the demo (test/web/support.ts) and a page in headless Chromium on it, started
 * before a block's tests and closed after them. Errors thrown on the page are collected in `problems`
 * (a test expects it empty at its end); a block adds its own listeners to `page` in its own `beforeAll`.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { startChromium } from './chromium.js';
import { startDemo, type Demo } from './support.js';

export interface DemoPage {
  readonly demo: Demo;
  readonly page: Page;
  readonly problems: string[];
}

export function useDemoPage(env: NodeJS.ProcessEnv): DemoPage {
  let demo: Demo | undefined;
  let browser: Browser | undefined;
  let page: Page | undefined;
  const problems: string[] = [];
  beforeAll(async () => {
    demo = await startDemo(env);
    ({ browser } = await startChromium());
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await demo?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useDemoPage starts the demo and the page in beforeAll');
    return value;
  };
  return {
    get demo() {
      return started(demo);
    },
    get page() {
      return started(page);
    },
    problems,
  };
}
