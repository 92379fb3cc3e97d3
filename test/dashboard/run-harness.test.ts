import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageProgramCommand } from '../../src/workers/launcher/harness-programs.js';
import { eventually } from '../support/eventually.js';
import { startTestService, type TestService } from '../support/service.js';
import { browserMissing, launchBrowser, watch, type Watched } from './browser.js';

const missing = browserMissing();

// The run page's Interrupt button, token usage and raw transcript, in real Chromium against the real
// service running the scripted harness (test/fixtures/interrupt-harness.mjs).
describe.skipIf(!!missing)(`the run page in Chromium${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let t: TestService;
  let browser: Awaited<ReturnType<typeof launchBrowser>>;
  let page: Page;
  let seen: Watched;

  beforeAll(async () => {
    t = await startTestService({
      WORKER_CONCURRENCY: '1',
      HARNESS_COMMAND: packageProgramCommand('test/fixtures', 'interrupt-harness.mjs'),
    });
    browser = await launchBrowser();
    page = await browser.browser.newPage();
    seen = watch(page);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  const badge = (state: string) => page.locator('.pagehead .badge').getByText(state).isVisible();

  it('interrupts the turn, resumes it with a follow-up, and shows the usage and the raw transcript', async () => {
    const created = await t.call('POST', '/api/v1/agent/runs', {
      // The team's scripted harness (oz); a built-in type would wait for a worker with its CLI.
      prompt: 'Work until interrupted',
    });
    const runId = created.body.run_id;
    await page.goto(`${t.url}/ui/runs/${runId}`);
    await page.getByLabel('API key').fill(t.adminKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await eventually(() => badge('INPROGRESS'), 'the run in progress');

    await page.getByRole('button', { name: 'Interrupt' }).click();
    await eventually(() => badge('BLOCKED'), 'BLOCKED');
    await eventually(
      () => page.getByText('interrupted; send a follow-up to continue').isVisible(),
      'the harness’s status message',
    );
    expect(await page.getByRole('button', { name: 'Interrupt' }).count()).toBe(0);

    await page.getByLabel(/^Follow-up/).fill('go on');
    await page.getByRole('button', { name: 'Send follow-up' }).click();
    await eventually(() => badge('SUCCEEDED'), 'SUCCEEDED');

    // Per model and the total (an oz harness's usage has no CLI categories to split it into).
    const usage = page.getByRole('table', { name: 'Token usage' });
    const row = usage.getByRole('row').filter({ hasText: 'stub-model' });
    await eventually(() => row.isVisible(), 'the usage');
    expect(await row.getByRole('cell').allTextContents()).toEqual(['stub-model', '185']);

    await page.getByText('Raw transcript').click();
    const transcript = page.getByTestId('transcript');
    await eventually(() => transcript.getByText(/execution 1: interrupted/).isVisible(), 'the transcript');
    const text = (await transcript.textContent())!;
    expect(text.indexOf('execution 1: interrupted')).toBeLessThan(text.indexOf('execution 1: resumed'));
    expect(seen.consoleErrors).toEqual([]);
    expect(seen.failed).toEqual([]);
  });
});
