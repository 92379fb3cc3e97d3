import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM } from './browser-check.js';

export { browserMissing, CHROMIUM } from './browser-check.js';

/** Headless Chromium on a fresh profile, with nothing of its own talking to the network. */
export async function launchBrowser(): Promise<{ browser: BrowserContext; close(): Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'factoryd-chromium-'));
  // Each page is its own tab: its own sessionStorage, so its own sign-in.
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 860 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    browser,
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** What a watched page did that a browser test checks at its end. */
export interface Watched {
  /** Every URL asked for: nothing third-party, and never a key. */
  requested: string[];
  consoleErrors: string[];
  /** Requests that failed or were answered 4xx/5xx. */
  failed: string[];
}

/**
 * Listens to a page for what must fail a browser test: console errors, and requests that fail or are
 * answered 4xx/5xx (a stream the page closes on leaving, net::ERR_ABORTED, is no failure). Every page a
 * test opens is watched; pass the same lists to gather several pages' into one check.
 */
export function watch(page: Page, into: Watched = { requested: [], consoleErrors: [], failed: [] }): Watched {
  page.on('request', (r) => into.requested.push(r.url()));
  page.on('console', (m) => m.type() === 'error' && into.consoleErrors.push(`${page.url()}: ${m.text()}`));
  page.on('requestfailed', (r) => {
    if (r.failure()?.errorText !== 'net::ERR_ABORTED')
      into.failed.push(`${r.url()}: ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => r.status() >= 400 && into.failed.push(`${r.url()}: ${r.status()}`));
  return into;
}
