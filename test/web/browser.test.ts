/**
 * The whole flow in a real browser: Chromium driven by playwright-core against the emulator +
 * service on loopback in demo mode. The browser is CHROMIUM_PATH, else Debian's if it starts, else the
 * one shipped in the @sparticuz/chromium devDependency (./chromium.ts). Upload a generated PDF,
 * see the job reach 100%, answer a quiz question, take Claude down in the fault panel, see its breaker
 * open, reset the fault and see it go half-open and close again. Screenshots go to test-artifacts/ (gitignored; CI keeps them).
 */
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { findProjectRoot, webPaths } from '../../src/web/assets.js';
import { englishTextPdf } from '../fixtures/pdf/generate.js';
import { useDemoPage } from './demo-page.js';
import type { Demo } from './support.js';

const artifacts = join(findProjectRoot(), 'test-artifacts', 'web');
const recoveryMs = 2500;

/**
 * What each generated diagram must draw, read from docs/machines/<name>.mmd with this test's own
 * expressions: its states (not the any-state stand-in) and its distinct `a --> b` pairs, plus one arrow
 * from each initial dot (`[*] --> a`).
 */
async function expectedDrawings(): Promise<Map<string, { states: number; arrows: number }>> {
  const directory = webPaths().machinesDirectory;
  const expected = new Map<string, { states: number; arrows: number }>();
  for (const file of (await readdir(directory)).filter((name) => name.endsWith('.mmd'))) {
    const text = await readFile(join(directory, file), 'utf8');
    const states = [...text.matchAll(/^\s*state "([^"]*)" as/gm)].filter((match) => !match[1]!.startsWith('(any ')).length;
    const pairs = new Set<string>();
    let initials = 0;
    for (const match of text.matchAll(/^\s*(\S+) --> (\S+)/gm)) {
      if (match[1] === '[*]') initials += 1;
      else if (match[2] !== '[*]') pairs.add(`${match[1]} ${match[2]}`);
    }
    expected.set(file.slice(0, -4), { states, arrows: pairs.size + initials });
  }
  return expected;
}

/**
 * Characters that render as the missing-glyph box: each non-ASCII character of the page's rendered text
 * is drawn on a canvas in its element's font and compared, pixel for pixel, with a code point no font
 * has (U+10FFFD, private use): the browser draws both as the same empty box when no font has the glyph.
 */
function missingGlyphs(): string[] {
  const canvas = document.createElement('canvas');
  canvas.width = 48;
  canvas.height = 48;
  const context = canvas.getContext('2d', { willReadFrequently: true })!;
  const draw = (font: string, text: string): string => {
    context.clearRect(0, 0, 48, 48);
    context.font = font;
    context.textBaseline = 'top';
    context.fillStyle = '#000';
    context.fillText(text, 4, 4);
    return Array.from(context.getImageData(0, 0, 48, 48).data).join(',');
  };
  const missing: string[] = [];
  const seen = new Set<string>();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
    const element = node.parentElement;
    // Only text the page shows: a closed <select>'s other options, hidden and collapsed parts are not drawn.
    if (element === null || element.closest('option, script, style, [hidden]') !== null || element.getClientRects().length === 0) continue;
    const style = getComputedStyle(element);
    const font = `${style.fontStyle} ${style.fontWeight} 32px ${style.fontFamily}`;
    for (const character of new Set(node.textContent ?? '')) {
      if (character.codePointAt(0)! < 0x80 || seen.has(font + character)) continue;
      seen.add(font + character);
      if (draw(font, character) === draw(font, '\u{10FFFD}')) missing.push(`${character} (U+${character.codePointAt(0)!.toString(16).toUpperCase()}) in <${element.tagName.toLowerCase()}>`);
    }
  }
  return missing;
}

describe('the page in Chromium', () => {
  const rig = useDemoPage({
    BREAKER_FAILURE_THRESHOLD: '2',
    // The page's one key opens the breaker: the quorum of distinct keys is off.
    BREAKER_MIN_DISTINCT_KEYS: '1',
    BREAKER_RECOVERY_MS: String(recoveryMs),
    RETRY_MAX: '1',
    RETRY_BACKOFF_MS: '20',
  });
  const { problems } = rig;
  let demo: Demo;
  let page: Page;

  beforeAll(async () => {
    ({ demo, page } = rig);
    await mkdir(artifacts, { recursive: true });
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    // Nothing may leave loopback: the page works offline.
    page.on('request', (request) => {
      if (!request.url().startsWith(demo.url) && !request.url().startsWith('data:')) problems.push(`request to ${request.url()}`);
    });
  });

  const card = (provider: string) => page.locator(`.provider-card[data-provider="${provider}"]`);
  const shot = (name: string) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });

  it('shows the live breakers and prefilled demo keys', async () => {
    await page.goto(demo.url);
    await expect.poll(() => page.locator('#stream-state').textContent()).toBe('live.');
    for (const provider of ['claude', 'gpt', 'timelygpt']) {
      await expect.poll(() => card(provider).getAttribute('data-state')).toBe('closed');
      expect(await page.inputValue(`#key-${provider}`)).not.toBe('');
    }
    expect(await page.locator('#fault-panel').isVisible()).toBe(true);
    // The diagrams are laid out in a worker at start-up (through tsx, on a loaded machine: seconds).
    await page.locator('details.machine[data-machine="breaker"][data-instance="claude"] svg.diagram').waitFor({ timeout: 60_000 });
    await expect.poll(() => liveState('breaker', 'claude')).toBe('closed');
    await shot('01-start');
  });

  const diagram = (machine: string, instance = '') => page.locator(`details.machine[data-machine="${machine}"][data-instance="${instance}"] svg.diagram`);
  /** The path of the state the drawing marks as the live one (the highlight class and aria-current). */
  const liveState = (machine: string, instance = '') => diagram(machine, instance).locator('g.state.current[aria-current="true"]').getAttribute('data-path', { timeout: 2000 }).catch(() => null);

  it('draws every generated machine as SVG: a box per state, an arrow per connected pair', async () => {
    const expected = await expectedDrawings();
    const drawn = await page.locator('details.machine').evaluateAll((nodes) => nodes.map((node) => node.getAttribute('data-machine')));
    expect(new Set(drawn)).toEqual(new Set(expected.keys()));
    for (const [machine, { states, arrows }] of expected) {
      const instance = ['breaker', 'key-health'].includes(machine) ? 'claude' : '';
      const svg = diagram(machine, instance);
      expect(await svg.locator('g.state').count(), machine).toBe(states);
      expect(await svg.locator('g.state rect.box').count(), machine).toBe(states);
      expect(await svg.locator('g.edge').count(), machine).toBe(arrows);
      // Every arrow is a drawn path with an arrowhead.
      for (const d of await svg.locator('g.edge path.line').evaluateAll((paths) => paths.map((path) => path.getAttribute('d') ?? ''))) expect(d, machine).toMatch(/^M[\d.]+,[\d.]+( L[\d.]+,[\d.]+)+$/);
      expect(await svg.locator('g.edge path.line:not([marker-end^="url(#arrowhead-"])').count(), machine).toBe(0);
    }
    // One breaker drawing per provider, each with its own live state.
    for (const provider of ['claude', 'gpt', 'timelygpt']) expect(await liveState('breaker', provider)).toBe('closed');
    // The open drawings are shown at a readable size: the breaker's 13 px state names are not shrunk below 10 px.
    const scale = await diagram('breaker', 'claude').evaluate((svg) => svg.getBoundingClientRect().width / Number(svg.getAttribute('width')));
    expect(scale).toBeGreaterThan(10 / 13);
    await page.locator('#machines').screenshot({ path: join(artifacts, '01b-machines.png') });
  });

  it('uses SVG icons, not arrow characters, and no character renders as a missing-glyph box', async () => {
    for (const provider of ['claude', 'gpt', 'timelygpt']) {
      for (const direction of ['up', 'down']) {
        const button = page.locator(`#move-${direction}-${provider}`);
        expect(await button.locator(`svg.icon-${direction} path`).count()).toBe(1);
        expect((await button.textContent())?.trim()).toBe('');
        expect(await button.getAttribute('aria-label')).toMatch(new RegExp(`^Move .+ ${direction}$`));
      }
    }
    expect(await page.locator('.tagline svg.icon').count()).toBe(1);
    expect(await page.evaluate(() => document.body.innerText)).not.toMatch(/[\u2190-\u21FF]/);
    expect(await page.evaluate(missingGlyphs)).toEqual([]);
  });

  it('uploads a PDF, shows progress up to 100% and the study material', { timeout: 120_000 }, async () => {
    const pdf = await englishTextPdf(2);
    await page.setInputFiles('#upload-file', { name: 'plants.pdf', mimeType: 'application/pdf', buffer: Buffer.from(pdf) });
    await page.fill('#mcq-count', '3');
    await page.fill('#fill-count', '3');
    await page.click('#upload-button');
    // The upload shows the plan (chapters, pages, estimate, budget); the job starts with Start.
    await page.locator('#start-button').click({ timeout: 60_000 });
    // The first upload starts the extraction worker (pdf.js through tsx): seconds on a quiet machine, over
    // 15 s on a loaded one. This test is about the page, not that start-up: give it a minute.
    await expect.poll(() => page.locator('#document-info').textContent(), { timeout: 60_000 }).toContain('plants.pdf');
    await expect.poll(() => page.locator('#progress').evaluate((node) => (node as HTMLProgressElement).value), { timeout: 30_000 }).toBe(100);
    expect(await page.locator('#progress-text').textContent()).toMatch(/^100%/);
    await expect.poll(() => page.locator('#results').isVisible()).toBe(true);
    expect(await page.locator('#notes li').count()).toBeGreaterThan(0);
    expect(await page.locator('.mcq-question').count()).toBe(3);
    expect(await page.locator('.fill-question').count()).toBe(3);
    expect(await page.locator('#attempts tbody tr').count()).toBeGreaterThan(0);
    expect(await liveState('job')).toBe('succeeded');
    expect(await liveState('attempt')).not.toBeNull();
    await shot('02-job-done');
  });

  it('checks a quiz answer and shows the explanation', async () => {
    const question = page.locator('.mcq-question').first();
    await question.locator('.check-button').click();
    expect(await question.locator('.check-result').textContent()).toBe('Pick an answer first.');
    await question.locator('label').first().click();
    await question.locator('.check-button').click();
    expect(await question.locator('.check-result').textContent()).toMatch(/^(Correct\.|Not quite: the answer is [ABCD]\.)$/);
    expect(await question.locator('.explanation').isVisible()).toBe(true);
    await question.scrollIntoViewIfNeeded();
    await shot('03-quiz-checked');
  });

  it('takes Claude down: the request falls back to GPT and Claude\'s breaker opens', async () => {
    await page.click('#fault-claude-down');
    await expect.poll(() => page.locator('#fault-status').textContent()).toContain('http500');
    await page.click('#probe-button');
    await expect.poll(() => page.locator('#probe-result').textContent(), { timeout: 15_000 }).toMatch(/answered by GPT \(fallback\)/);
    await expect.poll(() => card('claude').getAttribute('data-state')).toBe('open');
    expect(await card('claude').locator('.breaker-state').textContent()).toBe('open');
    expect(await card('claude').locator('.next-probe').textContent()).toMatch(/^(in \d+ s|now)$/);
    // Both Claude calls of that request failed with a server error and were counted.
    const rows = page.locator('#attempts tbody tr', { hasText: 'request' }).filter({ hasText: 'Claude' });
    expect(await rows.count()).toBe(2);
    for (const text of await rows.allTextContents()) expect(text).toMatch(/failed.*server_error.*500.*yes/);
    // The highlight moved in the drawing: open is the live state, closed no longer is, and the arrow of
    // that transition is marked; GPT's breaker is still closed.
    await expect.poll(() => liveState('breaker', 'claude')).toBe('open');
    expect(await diagram('breaker', 'claude').locator('g.state[data-path="closed"]').getAttribute('class')).not.toMatch(/\bcurrent\b/);
    expect(await diagram('breaker', 'claude').locator('g.edge.taken').evaluateAll((edges) => edges.map((edge) => `${edge.getAttribute('data-from')} ${edge.getAttribute('data-to')}`))).toEqual(['closed open']);
    expect(await liveState('breaker', 'gpt')).toBe('closed');
    expect(await liveState('fallback')).toBe('succeeded');
    await shot('04-claude-open');
    await page.locator('details.machine[data-machine="breaker"][data-instance="claude"]').screenshot({ path: join(artifacts, '04b-claude-breaker-open.png') });
  });

  it('recovers: after the fault is reset the breaker goes half-open, and the next request closes it', async () => {
    await page.click('#fault-reset');
    await expect.poll(() => page.locator('#fault-status').textContent()).toContain('reset');
    await expect.poll(() => card('claude').getAttribute('data-state'), { timeout: recoveryMs + 5000 }).toBe('halfOpen');
    expect(await card('claude').locator('.breaker-state').textContent()).toBe('half-open');
    await expect.poll(() => liveState('breaker', 'claude')).toBe('halfOpen');
    await shot('05-claude-half-open');
    await page.click('#probe-button');
    await expect.poll(() => page.locator('#probe-result').textContent(), { timeout: 15_000 }).toMatch(/answered by Claude after 1 attempt/);
    await expect.poll(() => card('claude').getAttribute('data-state')).toBe('closed');
    await expect.poll(() => liveState('breaker', 'claude')).toBe('closed');
    await shot('06-claude-closed');
  });

  it("shows a key's own health beside its field: a Claude key out of quota is quarantined, then skipped", async () => {
    // An obviously fake emulator key: `emu-quota-` answers Anthropic's credit-balance 400.
    await page.fill('#key-claude', 'emu-quota-browser-0001');
    await page.click('#probe-button');
    await expect.poll(() => page.locator('#probe-result').textContent(), { timeout: 15_000 }).toMatch(/answered by GPT \(fallback\)/);
    await expect.poll(() => page.locator('#key-health-claude').getAttribute('data-state')).toBe('quarantined');
    expect(await page.locator('#key-health-claude').textContent()).toMatch(/^key quarantined \(quota_exhausted\) until .+: skipped, no call$/);
    expect(await page.locator('#key-health-gpt').textContent()).toBe('key healthy');
    await expect.poll(() => card('claude').locator('.refused-keys').textContent()).toBe('1 quarantined, 0 cooling');
    expect(await page.locator('details.machine[data-machine="key-health"][data-instance="claude"] .live').textContent()).toBe('live state: quarantined');
    expect(await liveState('key-health', 'claude')).toBe('quarantined');
    expect(await liveState('key-health', 'gpt')).toBe('healthy');
    // The next request skips the quarantined key without calling Claude, and falls back at once.
    await page.click('#probe-button');
    const skipped = page.locator('#attempts tbody tr', { hasText: 'key_quarantined' });
    await expect.poll(() => skipped.count(), { timeout: 15_000 }).toBe(1);
    expect(await skipped.first().textContent()).toMatch(/Claude.*skipped \(key_quarantined\).*quota_exhausted/);
    await shot('06b-key-quarantined');
  });

  it('reads on a phone and works from the keyboard', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await expect.poll(() => page.locator('#stream-state').textContent()).toBe('live.');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(1);
    // The open diagrams keep their size on a phone (12 px labels), scrolling inside their own box.
    await diagram('breaker', 'claude').waitFor({ timeout: 60_000 });
    const breakerBox = await diagram('breaker', 'claude').evaluate((svg) => ({ drawn: svg.getBoundingClientRect().width, natural: Number(svg.getAttribute('width')) }));
    expect(breakerBox.drawn).toBeCloseTo(breakerBox.natural, 0);
    expect(await page.locator('details.machine[data-machine="breaker"][data-instance="claude"] .diagram-wrap').evaluate((wrap) => wrap.scrollWidth > wrap.clientWidth)).toBe(true);
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.focus('#move-down-claude');
    await page.keyboard.press('Enter');
    expect(await page.locator('#provider-order li').first().getAttribute('data-provider')).toBe('gpt');
    await shot('07-phone');
    expect(problems).toEqual([]);
  });
});

/**
 * A provider that fails in the middle of its answer, in a demo of its own (no retry, so the next
 * attempt is the fallback; a short stream idle timeout): Claude writes part of the notes and stalls. The
 * page shows the notes forming while Claude's answer is stalled, then the fallback in the middle — Claude's
 * attempt failed with a timeout after streaming, GPT's attempt continued the answer — with the notes
 * shown so far kept, then the whole material.
 */
describe('the page in Chromium: a provider fails in the middle of its answer', () => {
  // The stall window the page is watched in: long enough for a loaded machine to render the first items.
  const idleMs = 4000;
  const rig = useDemoPage({ RETRY_MAX: '0', STREAM_IDLE_TIMEOUT_MS: String(idleMs) });

  it('shows the notes forming, the fallback in the middle, then the whole material', { timeout: 240_000 }, async () => {
    const { demo, page, problems } = rig;
    await page.goto(demo.url);
    await expect.poll(() => page.locator('#stream-state').textContent()).toBe('live.');
    // Claude's first answer stops after 100 chunks (400 characters: past the first key concept) and stays silent.
    demo.emulator.setFault({ provider: 'claude', fault: 'stall', after: 100, count: 1 });
    await page.setInputFiles('#upload-file', { name: 'plants.pdf', mimeType: 'application/pdf', buffer: Buffer.from(await englishTextPdf(2)) });
    await page.fill('#mcq-count', '3');
    await page.fill('#fill-count', '3');
    // The page is watched as it changes (a loaded machine may poll it only after the stall window): the
    // order in which live notes and the first attempt row appear, and how many notes were live then.
    await page.evaluate(() => {
      const seen = { order: [] as string[], formed: 0 };
      (window as unknown as { seen: typeof seen }).seen = seen;
      new MutationObserver(() => {
        const live = document.querySelectorAll('#results[data-live] #notes li').length;
        if (!seen.order.includes('notes') && live > 0) {
          seen.order.push('notes');
          seen.formed = live;
        }
        if (!seen.order.includes('attempt') && document.querySelectorAll('#attempts tbody tr').length > 0) seen.order.push('attempt');
      }).observe(document.body, { childList: true, subtree: true, attributes: true });
    });
    await page.click('#upload-button');
    // The upload shows the plan (chapters, pages, estimate, budget); the job starts with Start.
    await page.locator('#start-button').click({ timeout: 60_000 });
    // Items forming: notes on the page while the results are still live (the material is not done). On a
    // quiet machine they come before any attempt has ended (Claude's answer is stalled); at the suite's own
    // load the stalled attempt's row may be drawn first, so the order is not the oracle: the live notes are.
    // The first upload starts the extraction worker: seconds on a quiet machine, a minute on a loaded one.
    const seen = () => page.evaluate(() => (window as unknown as { seen: { order: string[]; formed: number } }).seen);
    await expect.poll(async () => (await seen()).order, { timeout: 120_000 }).toContain('notes');
    const { formed } = await seen();
    await page.screenshot({ path: join(artifacts, '08-notes-forming.png'), fullPage: true });
    // The fallback in the middle: Claude's attempt failed on the stall (timeout) after streaming, GPT continued it.
    const claudeRow = page.locator('#attempts tbody tr', { hasText: 'Claude' }).filter({ hasText: 'timeout' });
    await expect.poll(() => claudeRow.count(), { timeout: idleMs + 30_000 }).toBe(1);
    expect(await claudeRow.textContent()).toMatch(/notes.*Claude.*failed.*timeout/);
    const gptRow = page.locator('#attempts tbody tr', { hasText: 'GPT' }).filter({ hasText: 'succeeded (continued)' });
    await expect.poll(() => gptRow.count(), { timeout: 30_000 }).toBe(1);
    expect(await gptRow.textContent()).toMatch(/notes/);
    // The notes shown before the failure were kept (a continued answer voids nothing): never fewer.
    expect(await page.locator('#notes li').count()).toBeGreaterThanOrEqual(formed);
    await page.screenshot({ path: join(artifacts, '09-fallback-mid-answer.png'), fullPage: true });
    // Then the whole material: the job done, the final result in place of the live one.
    await expect.poll(() => page.locator('#progress').evaluate((node) => (node as HTMLProgressElement).value), { timeout: 60_000 }).toBe(100);
    await expect.poll(() => page.locator('#results').getAttribute('data-live')).toBeNull();
    expect(await page.locator('#notes li').count()).toBeGreaterThanOrEqual(formed);
    expect(await page.locator('.mcq-question').count()).toBe(3);
    expect(await page.locator('.fill-question').count()).toBe(3);
    expect(await page.locator('#progress-text').textContent()).toMatch(/notes: GPT \(fallback\)/);
    await page.screenshot({ path: join(artifacts, '10-material-after-fallback.png'), fullPage: true });
    expect(problems).toEqual([]);
  });
});
