import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrapFactory } from '../src/cli/factory-bootstrap.js';
import { fromRoot } from '../src/common/paths.js';
import { loadConfig } from '../src/config/config.js';
import { ReconcileScheduler } from '../src/reconciler/reconcile-scheduler.js';
import { startTestService, type TestService } from './support/service.js';
import { deliver } from './support/definitions.js';
import { eventually } from './support/eventually.js';

describe('the example factory on the first start', () => {
  let t: TestService;
  const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-example-'));

  beforeAll(async () => {
    t = await startTestService({ FACTORY_POLL_SECONDS: '3600' });
    await t.service.app.get(ReconcileScheduler).firstPoll;
  });
  afterAll(async () => {
    await t?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('seeds the repository in two commits, creates its secrets (printed once), and applies it all', async () => {
    const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
    const { lines, secrets } = await bootstrapFactory(t.service, config);
    expect(lines[0]).toContain(`seeded the example factory in ${join(dataDir, 'factories', 'example')}`);
    // Its files point an editor at the checkout's schemas, from where the copy lies.
    const seeded = join(dataDir, 'factories', 'example');
    const modeline = /\$schema=(\S+)/.exec(readFileSync(join(seeded, 'factory.yaml'), 'utf8'))![1];
    expect(resolve(seeded, modeline)).toBe(fromRoot('schemas', 'editor', 'factory.schema.json'));
    expect(secrets.map((s) => s.name).sort()).toEqual([
      'example-ci-token',
      'example-github-webhook',
      'example-pager-url-token',
    ]);

    const list = (await t.call('GET', '/api/v1/factory')).body.factories;
    expect(list).toHaveLength(1);
    const factory = list[0];
    expect(factory).toMatchObject({ name: 'example', ready: true, reason: 'Applied' });
    const applies = (await t.call('GET', `/api/v1/factory/${factory.uid}/applies`)).body.applies;
    expect(applies.map((a: any) => a.result)).toEqual(['applied', 'applied']);
    expect(applies[0].plan.automations.created.sort()).toEqual([
      'code-labeled-issues',
      'fix-failed-builds',
      'incident-response',
      'triage-new-issues',
    ]);

    const hooks = (await t.call('GET', `/api/v1/factory/${factory.uid}/webhooks`)).body.webhooks;
    const pager = hooks.find((w: any) => w.name === 'pager');
    expect(pager.ingress_url).toMatch(/\/webhooks\/w\/[A-Za-z0-9]{22}\/\{token\}$/);
    const autos = await t.service.db.query(
      `SELECT name, agent_name, triggers FROM automations ORDER BY name`,
    );
    const incident = autos.find((a) => a.name === 'incident-response')!;
    expect(incident.agent_name).toBe('foreman');
    expect(incident.triggers[0].filter.webhook_ids).toEqual([pager.uid]);

    // The Claude Code agent is started by a webhook: an issue labeled agent-code, signed as GitHub does.
    const github = hooks.find((w: any) => w.name === 'github');
    const code = autos.find((a) => a.name === 'code-labeled-issues')!;
    expect(code.agent_name).toBe('coder');
    expect(code.triggers[0].filter.webhook_ids).toEqual([github.uid]);
    const labeled = JSON.stringify({
      action: 'labeled',
      label: { name: 'agent-code' },
      sender: { type: 'User' },
      issue: { title: 'Add a dark mode', number: 7 },
    });
    const key = secrets.find((s) => s.name === 'example-github-webhook')!.value;
    const sent = await deliver(t.url, `/webhooks/w/${github.uid}`, labeled, {
      'content-type': 'application/json',
      'x-github-event': 'issues',
      'x-github-delivery': 'gh-labeled-1',
      'x-hub-signature-256': `sha256=${createHmac('sha256', key).update(labeled).digest('hex')}`,
    });
    expect(sent.status).toBe(202);
    const coded = await eventually(async () => {
      const runs = (await t.call('GET', '/api/v1/agent/runs?source=WEBHOOK')).body.runs;
      return runs.find((r: any) => r.agent_config?.name === 'coder');
    }, 'the coder run of the labeled issue');
    expect(coded.agent_config.harness).toMatchObject({
      type: 'claude',
      auth_secret_name: 'anthropic-api-key',
    });
    // No worker here has Claude Code: the run waits, saying which harness it waits for.
    expect(coded.state).toBe('QUEUED');
    await eventually(async () => {
      const r = (await t.call('GET', `/api/v1/agent/runs/${coded.run_id}`)).body;
      return r.state === 'QUEUED' && /with the claude harness/.test(r.status_message?.message ?? '');
    }, 'the waiting note on the coder run');

    const run = await t.call('POST', `/api/v1/factory/${factory.uid}/runs`, { prompt: 'Plan the week' });
    expect(run.body).toMatchObject({ foreman_agent: 'foreman', state: 'QUEUED' });

    // A later start changes nothing and prints nothing.
    expect(await bootstrapFactory(t.service, config)).toEqual({ lines: [], secrets: [] });
  });
});
