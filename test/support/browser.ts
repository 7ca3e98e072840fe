import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import chromiumLaunch from '../../scripts/stack/chromium-launch.json';

/**
 * Real headless Chromium (Debian's, which scripts/test.mjs installs: scripts/stack/chromium.mjs) driven by
 * playwright-core. Every page records its console errors and uncaught exceptions, which a test asserts empty,
 * and screenshots go to .devstack/screenshots/ (git-ignored) to be looked at.
 */
export const CHROMIUM = chromiumLaunch.executablePath;
export const SCREENSHOTS = path.resolve(__dirname, '../../.devstack/screenshots');

export const launchBrowser = (): Promise<Browser> => chromium.launch({ executablePath: CHROMIUM, args: chromiumLaunch.args });

export interface WatchedPage {
  page: Page;
  context: BrowserContext;
  /** Console errors and uncaught exceptions so far (a healthy page has none). */
  errors: string[];
  /** Saves a full-page PNG as `<name>.png` in SCREENSHOTS; returns its path. */
  screenshot(name: string): Promise<string>;
  close(): Promise<void>;
}

/** A page of a fresh context (its own storage), watched for errors. */
export async function watchedPage(browser: Browser): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 860 } });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(`console: ${msg.text()}`);
  });
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  mkdirSync(SCREENSHOTS, { recursive: true });
  return {
    page,
    context,
    errors,
    async screenshot(name) {
      const file = path.join(SCREENSHOTS, `${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      return file;
    },
    close: () => context.close(),
  };
}
