import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrapFactory } from '../src/cli/factory-bootstrap.js';
import { fromRoot } from '../src/common/paths.js';
import { loadConfig } from '../src/config/config.js';
import { ReconcileScheduler } from '../src/reconciler/reconcile-scheduler.js';
import { startTestService, type TestService } from './support/service.js';

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

    const run = await t.call('POST', `/api/v1/factory/${factory.uid}/runs`, { prompt: 'Plan the week' });
    expect(run.body).toMatchObject({ foreman_agent: 'foreman', state: 'QUEUED' });

    // A later start changes nothing and prints nothing.
    expect(await bootstrapFactory(t.service, config)).toEqual({ lines: [], secrets: [] });
  });
});
