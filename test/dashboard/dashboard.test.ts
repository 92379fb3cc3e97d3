import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManagedFactories } from '../../src/management/managed-factories.js';
import { DefinitionStore } from '../../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../../src/reconciler/reconciler.js';
import { SecretsService } from '../../src/secrets/secrets.service.js';
import { eventually } from '../support/eventually.js';
import { automation, baseFactory, TestRepo } from '../support/git-repo.js';
import { startTestService, type TestService } from '../support/service.js';
import { browserMissing, launchBrowser, watch, type Watched } from './browser.js';

const missing = browserMissing();
/** DASHBOARD_SCREENSHOTS=1 writes the README's screenshots (docs/screenshots/*.png). */
const SHOTS = process.env.DASHBOARD_SCREENSHOTS ? 'docs/screenshots' : undefined;

/** A delivery whose fields would run script if the dashboard rendered them as HTML. */
const HOSTILE = {
  action: 'opened',
  title: '<script>window.__pwned = "script"</script>',
  body: '<img src=x onerror="window.__pwned = \'img\'">',
  sender: { login: '<b>mallory</b>' },
};

// The dashboard driven in real Chromium against the real service (docs/dashboard.md).
describe.skipIf(!!missing)(`the dashboard in Chromium${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let t: TestService;
  let browser: Awaited<ReturnType<typeof launchBrowser>>;
  let page: Page;
  let managerKey: string;
  let readerKey: string;
  let repo: TestRepo;
  let deep: string;
  let managed: { uid: string };
  let backed: { uid: string; hookUid: string };
  /** What every page the test opens did (watch): checked at the end. */
  const seen: Watched = { requested: [], consoleErrors: [], failed: [] };
  const { requested, consoleErrors, failed } = seen;
  let secret = '';
  let webhookUid = '';
  let runId = '';

  beforeAll(async () => {
    t = await startTestService({
      WORKER_CONCURRENCY: '1',
      FACTORY_POLL_SECONDS: '3600',
      SECRETS_KEY: randomBytes(32).toString('base64'),
    });
    await t.service.app.get(ReconcileScheduler).firstPoll;
    managerKey = (
      await t.auth.createApiKey({
        teams: [t.defaultTeam],
        scopes: ['runs:read', 'runs:write', 'factory:manage'],
        name: 'Ada Lovelace',
        type: 'user',
      })
    ).key;
    readerKey = await t.newKey([t.defaultTeam], ['runs:read', 'runs:write'], 'Reader');
    const { factory } = await t.service.app.get(ManagedFactories).create({
      team: t.defaultTeam,
      name: 'support',
      branch: 'main',
      author: { name: 'Setup', email: 'setup@example.com' },
    });
    managed = { uid: factory.uid };
    // A repository-backed factory with an automation on its webhook: the definition tab's content. Its
    // repository lies deep: a path of 100+ characters with a folder name longer than a card is wide and
    // nothing in it a line may break at (no space, and no '/' or '-', after which Chromium breaks too).
    deep = mkdtempSync(join(tmpdir(), 'factoryd-deep-'));
    repo = new TestRepo(
      'main',
      join(deep, 'platformengineeringfactoryrepositoriesforincidentresponseautomation'),
    );
    expect(repo.dir.length).toBeGreaterThanOrEqual(100);
    expect(repo.dir).not.toMatch(/\s/);
    await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'ci-secret-value');
    repo.commit(baseFactory(), 'initial');
    const f = (await t.service.app.get(DefinitionStore).register({
      teamId: t.defaultTeam.id,
      name: 'backed',
      repoUrl: repo.dir,
      branch: 'main',
    }))!;
    await t.service.app.get(Reconciler).request(f.id, true);
    const hookUid = (await t.call('GET', `/api/v1/factory/${f.uid}/webhooks`)).body.webhooks[0].uid;
    repo.commit({ 'automations/fix/automation.md': automation(hookUid) }, 'automation');
    await t.service.app.get(Reconciler).request(f.id, true);
    backed = { uid: f.uid, hookUid };

    browser = await launchBrowser();
    page = await browser.browser.newPage();
    watch(page, seen);
    if (SHOTS) mkdirSync(SHOTS, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.stop();
    repo?.remove();
    if (deep) rmSync(deep, { recursive: true, force: true });
  });

  /**
   * A request a test fails on purpose (a 400 it then shows): taken off the lists once, with the console
   * error Chromium logs for it, so any other failed request or console error still fails the run.
   */
  const expectFailed = async (urlEnd: string, status: number) => {
    const entry = `${urlEnd}: ${status}`;
    await eventually(() => failed.some((f) => f.endsWith(entry)), `the failed request ${entry}`);
    failed.splice(
      failed.findIndex((f) => f.endsWith(entry)),
      1,
    );
    const logged = `the server responded with a status of ${status}`;
    await eventually(() => consoleErrors.some((e) => e.includes(logged)), 'its console error');
    consoleErrors.splice(
      consoleErrors.findIndex((e) => e.includes(logged)),
      1,
    );
  };

  const shot = async (name: string, opts: { p?: Page; fullPage?: boolean } = {}) => {
    if (!SHOTS) return;
    const p = opts.p ?? page;
    // From the top, so the sticky header sits where it belongs in a full-page picture.
    if (opts.fullPage) await p.evaluate(() => (globalThis as any).scrollTo(0, 0));
    await p.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: opts.fullPage });
  };
  const nav = (p: Page, name: string) =>
    p.getByRole('navigation', { name: 'Main' }).getByRole('link', { name });
  const visible = (p: Page, text: string | RegExp) => p.getByText(text).first().isVisible();
  const signIn = async (p: Page, key: string, path = '/ui/') => {
    await p.goto(`${t.url}${path}`);
    await p.getByLabel('API key').fill(key);
    if (p === page) await shot('sign-in', { p });
    await p.getByRole('button', { name: 'Sign in' }).click();
    await eventually(() => p.getByRole('navigation', { name: 'Main' }).isVisible(), 'the signed-in shell');
  };

  it('signs in with a key, shows its scopes, and keeps the key out of every URL', async () => {
    // The runs list follows the team's stream of run changes: it opens (200, an event stream).
    const feed = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/agent/runs/events');
    await signIn(page, managerKey);
    await eventually(() => page.url().endsWith('/ui/runs'), 'the runs page');
    const stream = await feed;
    expect(stream.status()).toBe(200);
    expect(stream.headers()['content-type']).toContain('text/event-stream');
    const scopes = await page.getByTestId('scopes').textContent();
    expect(scopes).toContain('factory:manage');
    expect(scopes).toContain('runs:write');
    await eventually(() => visible(page, 'No runs yet'), 'the empty state');
  });

  it('starts a run, follows its conversation to SUCCEEDED, and renders its hostile prompt as text', async () => {
    await page.getByRole('button', { name: 'New run' }).click();
    const dialog = page.getByRole('dialog');
    await dialog
      .getByLabel('Prompt', { exact: true })
      .fill(`Triage <img src=x onerror="window.__pwned = 'prompt'">\n/bundled-skill pr-comments`);
    await dialog.getByLabel(/^Title/).fill('Triage from the dashboard');
    await dialog.getByRole('button', { name: 'Start run' }).click();
    runId = (await eventually(() => /\/ui\/runs\/([0-9a-f-]{36})$/.exec(page.url()), 'the run page'))[1];
    await eventually(() => page.locator('.pagehead .badge').getByText('SUCCEEDED').isVisible(), 'SUCCEEDED', {
      timeoutMs: 30_000,
    });
    await eventually(() => visible(page, 'loaded skill'), 'the read_skill action in the conversation');
    // The harness's summary.md (a FILE artifact), read through its signed link and shown as text.
    const summary = page.locator('details.artifact').first();
    await eventually(() => summary.getByText('Words in prompt:').isVisible(), 'the summary artifact as text');
    expect(await summary.locator('summary').textContent()).toContain('summary.md');
    expect(await summary.getByRole('link', { name: 'Download' }).getAttribute('href')).toMatch(
      /\/agent\/artifacts\/[0-9a-f-]{36}\/download\?/,
    );
    expect(await page.getByTestId('prompt').textContent()).toContain(
      `<img src=x onerror="window.__pwned = 'prompt'">`,
    );
    expect(await page.locator('main img').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as any).__pwned)).toBeUndefined();
    await shot('run', { fullPage: true });
    // The API's session_link is this page.
    const run = (await t.call('GET', `/api/v1/agent/runs/${runId}`)).body;
    expect(run.session_link).toBe(`${t.url}/ui/runs/${runId}`);
    await page.getByRole('link', { name: '← Runs' }).click();
    await eventually(
      () => page.getByRole('link', { name: 'Triage from the dashboard' }).isVisible(),
      'the run listed',
    );
    await shot('runs');
  });

  it('continues the run with a follow-up, and cancels a live run', async () => {
    await page.getByRole('link', { name: 'Triage from the dashboard' }).click();
    await page.getByLabel(/^Follow-up/).fill('And the next issue, please');
    await page.getByRole('button', { name: 'Send follow-up' }).click();
    const conversation = page.getByRole('list', { name: 'Conversation' });
    await eventually(
      () => conversation.getByText('And the next issue, please').first().isVisible(),
      'the follow-up in the conversation',
    );
    await eventually(
      async () => (await t.call('GET', `/api/v1/agent/runs/${runId}`)).body.state === 'SUCCEEDED',
      'the continued run done',
    );

    const long = await t.call('POST', '/api/v1/agent/runs', {
      prompt: 'Work a while\n/wait 30',
      title: 'Long one',
    });
    // The live page follows the run's event stream (fetched with the key in a header, not a URL).
    const feed = page.waitForResponse(
      (r) => r.url().endsWith(`/api/v1/agent/runs/${long.body.run_id}/events`) && r.status() === 200,
    );
    await page.goto(`${t.url}/ui/runs/${long.body.run_id}`);
    const stream = await feed;
    expect(stream.headers()['content-type']).toContain('text/event-stream');
    expect(stream.request().headers().authorization).toBe(`Bearer ${managerKey}`);
    await eventually(
      () => page.locator('.pagehead .badge').getByText('INPROGRESS').isVisible(),
      'the run in progress',
    );
    // Cancelled elsewhere (the API): with the stream open the page polls only every 30 s, so seeing
    // CANCELLED within the wait (20 s) means the stream's event brought it.
    await t.call('POST', `/api/v1/agent/runs/${long.body.run_id}/cancel`);
    await eventually(() => page.locator('.pagehead .badge').getByText('CANCELLED').isVisible(), 'CANCELLED');
    expect(await page.getByRole('button', { name: 'Cancel run' }).count()).toBe(0);

    // The page's own Cancel button, on another live run.
    const other = await t.call('POST', '/api/v1/agent/runs', {
      prompt: 'Work a while\n/wait 30',
      title: 'Another',
    });
    await page.goto(`${t.url}/ui/runs/${other.body.run_id}`);
    await eventually(
      () => page.locator('.pagehead .badge').getByText('INPROGRESS').isVisible(),
      'the other run in progress',
    );
    // A dialog of the page's own says what cancelling does (no browser confirm()).
    await page.getByRole('button', { name: 'Cancel run' }).click();
    const confirmation = page.getByRole('dialog', { name: 'Cancel this run?' });
    expect(await confirmation.textContent()).toContain('its conversation and artifacts so far are kept');
    await confirmation.getByRole('button', { name: 'Cancel run' }).click();
    await eventually(() => page.locator('.pagehead .badge').getByText('CANCELLED').isVisible(), 'CANCELLED');
    expect(await page.getByRole('dialog').count()).toBe(0);
  });

  it('drops a run that leaves the filtered state from the list at once, not at the next poll', async () => {
    const live = await t.call('POST', '/api/v1/agent/runs', {
      prompt: 'Work a while\n/wait 30',
      title: 'Leaves INPROGRESS',
    });
    await eventually(
      async () => (await t.call('GET', `/api/v1/agent/runs/${live.body.run_id}`)).body.state === 'INPROGRESS',
      'the run in progress',
    );
    const feed = page.waitForResponse(
      (r) => new URL(r.url()).pathname === '/api/v1/agent/runs/events' && r.status() === 200,
    );
    await page.goto(`${t.url}/ui/runs?state=INPROGRESS`);
    await feed;
    const row = page.getByRole('link', { name: 'Leaves INPROGRESS' });
    await eventually(() => row.isVisible(), 'the run listed as INPROGRESS');
    // Cancelled elsewhere. With the stream open the list polls every 30 s: the row going within 20 s
    // means the stream told the page (a stream of changes *into* INPROGRESS would never have).
    await t.call('POST', `/api/v1/agent/runs/${live.body.run_id}/cancel`);
    await eventually(async () => !(await row.isVisible()), 'the cancelled run off the INPROGRESS list');
    await eventually(() => visible(page, 'No run matches these filters'), 'the list empty');
  });

  it('creates a webhook and shows its secret once, with the ingress URL and a curl example', async () => {
    await nav(page, 'Factories').click();
    await eventually(() => page.getByRole('link', { name: /support/ }).isVisible(), 'the factories');
    await shot('factories');
    // A commit that does not apply: the history names the file, the line and the reason.
    repo.commit({ 'webhooks/bad.yaml': 'authMode: token\nsecretName: no-such-secret\n' }, 'bad webhook');
    await page.getByRole('link', { name: /backed/ }).click();
    await eventually(() => visible(page, 'Apply history'), 'the factory status');
    await page.getByRole('button', { name: 'Refresh now' }).click();
    // Refresh now says what it did once the reconcile it asked for is recorded.
    const refreshed = page.getByRole('status', { name: 'Refresh' });
    await eventually(
      async () => (await refreshed.textContent())?.includes('did not apply (1 error, below)'),
      'the refresh’s outcome',
    );
    await eventually(() => visible(page, 'webhooks/bad.yaml:2'), 'the failed apply with its file and line');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('backed');
    await eventually(() => visible(page, 'Not ready'), 'the factory not ready');
    expect(await page.getByText('webhooks/bad.yaml:2').first().locator('..').textContent()).toContain(
      'no-such-secret',
    );
    await shot('factory');
    // The factories page says why it is not ready, on its card, and the long repository path stays inside.
    await nav(page, 'Factories').click();
    const card = page.getByRole('link', { name: /backed/ });
    await eventually(() => card.getByTestId('not-ready').isVisible(), 'the reason on the card');
    expect(await card.getByTestId('not-ready').textContent()).toContain('no-such-secret');
    expect(await card.textContent()).toContain(repo.dir);
    expect(await card.evaluate((c: any) => c.scrollWidth - c.clientWidth)).toBeLessThanOrEqual(0);
    // The text itself ends inside the card (its lines' boxes, not its paragraph's), and the card inside
    // the page: the card does not widen to fit the path.
    const [textRight, cardRight] = await card.evaluate((c: any) => {
      const range = c.ownerDocument.createRange();
      range.selectNodeContents(c);
      const lines = [...range.getClientRects()].map((r: any) => r.right as number);
      return [Math.max(...lines), c.getBoundingClientRect().right as number];
    });
    expect(textRight).toBeLessThanOrEqual(cardRight);
    expect(cardRight).toBeLessThanOrEqual(1280);
    await card.click();
    await eventually(() => visible(page, 'Apply history'), 'the factory again');
    // A repository-backed factory shows the file to commit once (with a Copy button), not twice.
    await page.getByRole('link', { name: 'Webhooks', exact: true }).click();
    await page.getByRole('button', { name: 'Add a webhook…' }).click();
    const adding = page.getByRole('dialog');
    await adding.getByLabel(/^Name/).fill('alerts');
    const file = adding.getByLabel('File to commit');
    expect((await file.textContent())!.split('authMode: token').length - 1).toBe(1);
    expect(await adding.getByLabel('File content').textContent()).toBe(
      'authMode: token\nsecretName: webhook-alerts\n',
    );
    await adding.getByRole('button', { name: 'Close' }).click();
    await page.getByRole('link', { name: 'Status', exact: true }).click();
    await page.getByRole('link', { name: 'Agents, skills & automations' }).click();
    // The trigger names its webhook, not only its UID.
    await eventually(
      () => visible(page, `ci · ${backed.hookUid}`),
      'the automation trigger with its webhook name',
    );
    await shot('factory-definition');

    await page.goto(`${t.url}/ui/factories/${managed.uid}/webhooks`);
    await eventually(() => visible(page, 'No webhooks yet'), 'the empty webhooks tab');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel(/^Name/).fill('github-issues');
    expect(await dialog.getByLabel(/^Team secret name/).getAttribute('placeholder')).toBe(
      'webhook-github-issues',
    );
    await dialog.getByRole('button', { name: 'Create webhook' }).click();
    const once = page.getByRole('status', { name: 'New secret' });
    await eventually(() => once.isVisible(), 'the secret shown once');
    secret = (await once.getByLabel('Secret', { exact: true }).textContent())!;
    expect(secret).toMatch(/^[A-Za-z0-9]{40}$/);
    const url = (await once.getByLabel('Ingress URL').textContent())!;
    webhookUid = /\/webhooks\/w\/([A-Za-z0-9]{22})$/.exec(url)![1];
    expect(await once.getByLabel('curl example').textContent()).toContain(`Authorization: Bearer ${secret}`);
    await shot('webhook-created');
    await once.getByRole('link', { name: 'Open the webhook' }).click();
    await eventually(() => visible(page, 'Delivery log'), 'the webhook page');
    await page.reload();
    await eventually(() => visible(page, 'No deliveries yet'), 'the webhook page again');
    expect(await page.content()).not.toContain(secret);
  });

  it('shows a delivery sent with fetch in the log, its hostile payload inert', async () => {
    const res = await fetch(`${t.url}/webhooks/w/${webhookUid}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'x-service-delivery-id': 'delivery-1' },
      body: JSON.stringify(HOSTILE),
    });
    expect(res.status).toBe(202);
    const row = page.getByRole('row', { name: /delivery-1/ });
    await eventually(() => row.isVisible(), 'the delivery in the log (live)');
    await row.click();
    const payload = page.getByLabel('Payload', { exact: true });
    await eventually(() => payload.isVisible(), 'the stored payload');
    const text = (await payload.textContent())!;
    expect(JSON.parse(text)).toEqual(HOSTILE);
    expect(text).toContain('  "action": "opened"');
    expect(await page.locator('main img, main b, main script').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as any).__pwned)).toBeUndefined();

    // A delivery with no id of its own is named by its body's hash (71 characters): each cell of its
    // row stays on one line, the hash cut short, the size never split from its unit.
    const hashed = await fetch(`${t.url}/webhooks/w/${webhookUid}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}` },
      body: '{"n":1}',
    });
    const { delivery_id } = (await hashed.json()) as { delivery_id: string };
    expect(delivery_id).toMatch(/^sha256:[0-9a-f]{64}$/);
    const hashRow = page.getByRole('row', { name: new RegExp(delivery_id) });
    await eventually(() => hashRow.isVisible(), 'the hashed delivery in the log');
    const lines = (cell: number) =>
      hashRow
        .locator('td')
        .nth(cell)
        .evaluate((td: any) => {
          const range = td.ownerDocument.createRange();
          range.selectNodeContents(td);
          return new Set([...range.getClientRects()].map((r: any) => Math.round(r.top))).size;
        });
    expect(await lines(1)).toBe(1);
    expect(await lines(2)).toBe(1);
    expect(await hashRow.locator('td').nth(2).textContent()).toBe('7 B');
  });

  it('tests a filter typed as YAML against the stored delivery both ways; a mistake clears the old verdict (issue #30, 2)', async () => {
    const filter = page.getByLabel(/^Filter/);
    // No automation uses this webhook yet: the box starts with an example, in YAML.
    expect(await filter.inputValue()).toBe('payload:\n  action: [opened]\n');
    // JSON is YAML too.
    await filter.fill('{"payload": {"action": ["opened"], "sender": {"login": {"exists": true}}}}');
    await page.getByRole('button', { name: 'Test filter' }).click();
    const verdict = page.getByRole('status', { name: 'Verdict' });
    await eventually(async () => (await verdict.textContent())?.startsWith('Would trigger'), 'Would trigger');
    expect(await verdict.textContent()).toContain('Webhook check: passed');
    await filter.fill('payload:\n  action: [closed]\n  sender:\n    login: {exists: true}\n');
    await page.getByRole('button', { name: 'Test filter' }).click();
    await eventually(
      async () => (await verdict.textContent())?.startsWith('Would not trigger'),
      'Would not trigger',
    );
    // A row per path of the filter: the one that fails, and the one that matches.
    const paths = page.getByRole('table', { name: 'Payload paths' });
    const path = paths.getByRole('row', { name: /^action/ });
    expect(await path.textContent()).toContain('fails in');
    expect(await path.textContent()).toContain('"opened"');
    expect(await paths.getByRole('row', { name: /^sender\.login/ }).textContent()).toContain('matches');
    await shot('webhook', { fullPage: true });
    // A syntax error: the service names the line and what is wrong, and the old verdict goes.
    await filter.fill('payload:\n\taction: [opened]\n');
    await page.getByRole('button', { name: 'Test filter' }).click();
    const problem = page.getByRole('alert').filter({ hasText: 'Not tested' });
    await eventually(() => problem.isVisible(), 'the error');
    expect(await problem.textContent()).toContain(
      'filter, line 2: not valid YAML: this line is indented with a tab, and YAML indents with spaces only',
    );
    expect(await verdict.count()).toBe(0);
    await expectFailed(`/api/v1/webhooks/${webhookUid}/test-filter`, 400);
  });

  it('replays the stored delivery: a Replayed entry linked both ways', async () => {
    const delivery = page.getByLabel('Delivery', { exact: true });
    await delivery.getByRole('button', { name: 'Replay' }).click();
    await eventually(() => delivery.getByText('Replay of').isVisible(), 'the Replayed entry, shown next');
    expect(await delivery.locator('.badge').first().textContent()).toBe('Replayed');
    expect(JSON.parse((await page.getByLabel('Payload', { exact: true }).textContent())!)).toEqual(HOSTILE);
    const original = (await delivery.locator('dd button.link').first().textContent())!;
    const { body } = await t.call('GET', `/api/v1/webhooks/${webhookUid}/deliveries/${original}`);
    expect(body.status).toBe('accepted');
    await delivery.locator('dd button.link').first().click();
    await eventually(() => delivery.getByText('Replayed as').isVisible(), 'the original, listing its replay');
    expect(body.replayed_as).toHaveLength(1);
  });

  it('rotates the secret behind a dialog, shows the new one once in a dialog, and the old one fails at once', async () => {
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const asking = page.getByRole('dialog', { name: 'Rotate the secret of github-issues?' });
    expect(await asking.textContent()).toContain('The old secret stops working at once');
    await asking.getByRole('button', { name: 'Rotate secret' }).click();
    const shown = page.getByRole('dialog', { name: 'The new secret of github-issues' });
    await eventually(() => shown.isVisible(), 'the new secret, once');
    const rotated = (await shown.getByLabel('Secret', { exact: true }).textContent())!;
    expect(rotated).toMatch(/^[A-Za-z0-9]{40}$/);
    expect(rotated).not.toBe(secret);
    const send = (key: string) =>
      fetch(`${t.url}/webhooks/w/${webhookUid}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: '{"after":"rotate"}',
      });
    expect((await send(secret)).status).toBe(401);
    expect((await send(rotated)).status).toBe(202);
    await shown.getByRole('button', { name: 'I have copied it' }).click();
    expect(await page.getByRole('dialog').count()).toBe(0);
    expect(await page.content()).not.toContain(rotated);
    secret = rotated;
  });

  it('disables the webhook with its switch (senders get 404) and deletes it, consequences spelled out', async () => {
    await page.getByRole('switch', { name: 'Enabled' }).click();
    await eventually(
      async () => (await t.call('GET', `/api/v1/webhooks/${webhookUid}`)).body.enabled === false,
      'disabled',
    );
    const refused = await fetch(`${t.url}/webhooks/w/${webhookUid}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}` },
      body: '{}',
    });
    expect(refused.status).toBe(404);
    await page.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.textContent()).toContain('Senders get 404 at once');
    await dialog.getByRole('button', { name: 'Delete webhook' }).click();
    await eventually(
      () => page.url().endsWith(`/ui/factories/${managed.uid}/webhooks`),
      'back on the webhooks tab',
    );
    expect((await t.call('GET', `/api/v1/webhooks/${webhookUid}`)).body.deleted).toBe(true);
  });

  it('shows a key without factory:manage no write buttons', async () => {
    const reader = await browser.browser.newPage();
    watch(reader, seen);
    try {
      await signIn(reader, readerKey, `/ui/factories/${backed.uid}/webhooks`);
      expect(await reader.getByTestId('scopes').textContent()).not.toContain('factory:manage');
      await eventually(() => reader.getByRole('link', { name: 'ci' }).isVisible(), 'the webhooks list');
      expect(await reader.getByRole('button', { name: /Create webhook|Add a webhook/ }).count()).toBe(0);
      await reader.getByRole('link', { name: 'ci' }).click();
      await eventually(() => visible(reader, 'Delivery log'), 'the webhook page');
      expect(await reader.getByRole('button', { name: /Delete|Rotate|Set secret|Replay/ }).count()).toBe(0);
      expect(await reader.getByRole('switch').count()).toBe(0);
      // Reading is allowed: a delivery that starts a run through the automation, and Test filter.
      const sent = await fetch(`${t.url}/webhooks/w/${backed.hookUid}`, {
        method: 'POST',
        headers: { authorization: 'Bearer ci-secret-value', 'x-service-delivery-id': 'issue-7' },
        body: JSON.stringify({ action: 'opened', issue: { number: 7 } }),
      });
      expect(sent.status).toBe(202);
      await reader.getByRole('row', { name: /issue-7/ }).click();
      const delivery = reader.getByLabel('Delivery', { exact: true });
      const started = await eventually(async () => {
        const r = await t.call('GET', `/api/v1/agent/runs?source=WEBHOOK`);
        return r.body.runs[0]?.run_id as string | undefined;
      }, 'the run the delivery started');
      await eventually(
        () => delivery.getByRole('link', { name: started }).isVisible(),
        'the run it started, linked',
      );
      // Test filter starts from this webhook's own automation's filter, as YAML.
      const box = reader.getByLabel(/^Filter/);
      await eventually(
        async () => (await box.inputValue()).includes('webhook_ids'),
        'automation fix’s filter',
      );
      expect(await box.inputValue()).toMatch(
        new RegExp(`^webhook_ids: \\["?${backed.hookUid}"?\\]\npayload:\n {2}action: \\[opened\\]\n$`),
      );
      await reader.getByRole('button', { name: 'Test filter' }).click();
      await eventually(
        async () =>
          (await reader.getByRole('status', { name: 'Verdict' }).textContent())?.startsWith('Would trigger'),
        'its own filter would trigger',
      );
      await reader.getByLabel('Against').selectOption('fix');
      await reader.getByRole('button', { name: 'Test filter' }).click();
      const verdict = reader.getByRole('status', { name: 'Verdict' });
      await eventually(
        async () => (await verdict.textContent())?.startsWith('Would trigger'),
        'the automation would trigger',
      );
      expect(await verdict.textContent()).toContain('automation fix');

      // The run it started: its webhook and delivery are links, its run time reads as people read it.
      await delivery.getByRole('link', { name: started }).click();
      await eventually(() => visible(reader, 'meta: webhook_uid'), 'the run page');
      expect(await reader.getByRole('link', { name: backed.hookUid }).getAttribute('href')).toBe(
        `/ui/webhooks/${backed.hookUid}`,
      );
      const runTime = reader.locator('dt:text-is("Run time") + dd');
      await eventually(
        async () => /^\d+(\.\d)? s$/.test((await runTime.textContent()) ?? ''),
        'the run time',
      );
      expect(await runTime.getAttribute('title')).toMatch(/^PT/);
      await reader.getByRole('link', { name: 'issue-7' }).click();
      await eventually(
        () => reader.url().includes(`/ui/webhooks/${backed.hookUid}?delivery=`),
        'the webhook',
      );
      await eventually(
        () => reader.getByLabel('Delivery', { exact: true }).getByText('issue-7').first().isVisible(),
        'the delivery that started it, selected',
      );
      await reader.goto(`${t.url}/ui/factories/${backed.uid}`);
      await eventually(() => visible(reader, 'Apply history'), 'the factory status');
      expect(await reader.getByRole('button', { name: 'Refresh now' }).count()).toBe(0);
      // A reader may still start runs: runs:write is offered.
      await reader.goto(`${t.url}/ui/runs`);
      await eventually(
        () => reader.getByRole('button', { name: 'New run' }).isVisible(),
        'New run for runs:write',
      );
    } finally {
      await reader.close();
    }
  });

  it('shows skills usage and workers, and fits a phone', async () => {
    await nav(page, 'Skills').click();
    await eventually(() => visible(page, 'pr-comments'), 'the bundled skill load');
    await shot('skills');
    await nav(page, 'Workers').click();
    await eventually(() => visible(page, 'No self-hosted worker connected'), 'the workers empty state');
    // The hint says the key a worker needs.
    expect(await page.getByLabel('Make a worker key').textContent()).toBe(
      'npx factoryd api-keys create --team default --scopes workers --worker-host ID',
    );
    await shot('workers');
    await page.setViewportSize({ width: 390, height: 780 });
    await page.goto(`${t.url}/ui/runs/${runId}`);
    await eventually(() => visible(page, 'Conversation'), 'the run page on a phone');
    const overflow = await page.evaluate(() => {
      const w = globalThis as any;
      return w.document.documentElement.scrollWidth - w.innerWidth;
    });
    expect(overflow).toBeLessThanOrEqual(0);
    await shot('run-phone');
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  it('made no third-party request, never put the key in a URL, and broke no CSP rule', () => {
    expect(requested.length).toBeGreaterThan(10);
    expect(requested.filter((u) => !u.startsWith(t.url) && !u.startsWith('data:'))).toEqual([]);
    expect(requested.filter((u) => u.includes(managerKey) || u.includes(readerKey))).toEqual([]);
    expect(consoleErrors).toEqual([]);
    expect(failed).toEqual([]);
  });
});
