import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchemaRegistry } from '../src/common/schema-validator.js';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { automation, baseFactory, TestRepo } from './support/git-repo.js';
import { startTestService, type TestService } from './support/service.js';

/** What the API documents (and the CLI and the dashboard are typed by) is what it answers. */
const schemas = new SchemaRegistry();

describe('factory API', () => {
  let t: TestService;
  const repos: TestRepo[] = [];
  let uid: string;

  beforeAll(async () => {
    t = await startTestService({
      FACTORY_POLL_SECONDS: '3600',
      WEBHOOK_BASE_URL: 'https://hooks.example.com',
    });
    await t.service.app.get(ReconcileScheduler).firstPoll;
    const secrets = t.service.app.get(SecretsService);
    await secrets.set(t.defaultTeam.id, 'hook-secret', 'v');
    await secrets.set(t.defaultTeam.id, 'url-secret', 'url-safe-token');
    const store = t.service.app.get(DefinitionStore);
    const reconciler = t.service.app.get(Reconciler);
    for (const name of ['alpha', 'beta', 'gamma']) {
      const repo = new TestRepo();
      repos.push(repo);
      repo.commit({
        ...baseFactory(),
        'webhooks/pager.yaml': 'authMode: url_token\nsecretName: url-secret\n',
        'webhooks/gh.yaml':
          'authMode: signature\nsignatureScheme: github\nsecretName: hook-secret\ndeliveryIdHeader: X-Request-Id\n',
      });
      const f = (await store.register({
        teamId: t.defaultTeam.id,
        name,
        repoUrl: repo.dir,
        branch: 'main',
      }))!;
      expect((await reconciler.request(f.id)).errors).toEqual([]);
      if (name === 'alpha') uid = f.uid;
    }
  });
  afterAll(async () => {
    await t?.stop();
    for (const r of repos) r.remove();
  });

  it('lists the team’s factories with search and cursor pages', async () => {
    const all = await t.call('GET', '/api/v1/factory');
    expect(all.status).toBe(200);
    expect(all.body.factories.map((f: any) => f.name)).toEqual(['alpha', 'beta', 'gamma']);
    expect(all.body.page_info).toEqual({ has_next_page: false });
    expect(schemas.check('FactoryListResponse', all.body)).toEqual([]);
    const p1 = await t.call('GET', '/api/v1/factory?limit=2');
    expect(p1.body.factories.map((f: any) => f.name)).toEqual(['alpha', 'beta']);
    expect(p1.body.page_info.has_next_page).toBe(true);
    const p2 = await t.call('GET', `/api/v1/factory?limit=2&cursor=${p1.body.page_info.next_cursor}`);
    expect(p2.body.factories.map((f: any) => f.name)).toEqual(['gamma']);
    expect((await t.call('GET', '/api/v1/factory?search=et')).body.factories.map((f: any) => f.name)).toEqual(
      ['beta'],
    );
    expect((await t.call('GET', '/api/v1/factory?limit=101')).status).toBe(400);
    expect((await t.call('GET', '/api/v1/factory?cursor=nonsense!')).body.error).toBe('invalid_request');
    const { key } = await t.newTeam('others');
    expect((await t.call('GET', '/api/v1/factory', undefined, key)).body.factories).toEqual([]);
    expect((await t.call('GET', `/api/v1/factory/${uid}`, undefined, key)).status).toBe(404);
  });

  it('shows a factory with its apply status', async () => {
    const res = await t.call('GET', `/api/v1/factory/${uid}`);
    expect(schemas.check('FactoryItem', res.body)).toEqual([]);
    expect(res.body).toMatchObject({
      uid,
      name: 'alpha',
      ready: true,
      reason: 'Applied',
      team_uid: t.defaultTeam.uid,
      default_model: 'base-model',
      default_environment: null,
      agent_defaults: { default_runner_uid: '', mcp_servers: {}, secrets: [], worker_host: 'warp' },
      code_forge: 'NONE',
      repositories: [],
    });
    expect(res.body.last_applied_revision).toMatch(/^[0-9a-f]{40}$/);
    expect((await t.call('GET', '/api/v1/factory/nope')).status).toBe(404);
  });

  it('pages the apply history, newest first', async () => {
    const first = await t.call('GET', `/api/v1/factory/${uid}/applies?limit=1`);
    expect(first.body.applies).toHaveLength(1);
    expect(first.body.applies[0]).toMatchObject({ result: 'applied', errors: [] });
    expect(first.body.applies[0].revision).toMatch(/^[0-9a-f]{40}$/);
    expect(typeof first.body.applies[0].duration_ms).toBe('number');
    expect(first.body.page_info).toEqual({ has_next_page: false });
    expect(schemas.check('FactoryApplyListResponse', first.body)).toEqual([]);
    expect((await t.call('GET', `/api/v1/factory/${uid}/applies?limit=0`)).status).toBe(400);
  });

  it('lists webhooks with ingress URLs; a url_token URL shows {token}', async () => {
    const res = await t.call('GET', `/api/v1/factory/${uid}/webhooks`);
    expect(schemas.check('WebhookListResponse', res.body)).toEqual([]);
    const byName = Object.fromEntries(res.body.webhooks.map((w: any) => [w.name, w]));
    expect(byName.pager.ingress_url).toBe(`https://hooks.example.com/webhooks/w/${byName.pager.uid}/{token}`);
    expect(byName.gh).toMatchObject({
      auth_mode: 'signature',
      signature_scheme: 'github',
      delivery_id_header: 'X-Request-Id',
    });
    expect(byName.ci.ingress_url).toBe(`https://hooks.example.com/webhooks/w/${byName.ci.uid}`);
    expect(JSON.stringify(res.body)).not.toContain('url-safe-token');
  });

  it('dispatches work to the foreman: a FACTORY run with the resolved config', async () => {
    const res = await t.call('POST', `/api/v1/factory/${uid}/runs`, { prompt: 'Ship the release\nDetails.' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ factory_uid: uid, foreman_agent: 'lead', state: 'QUEUED' });
    const run = (await t.call('GET', `/api/v1/agent/runs/${res.body.run_id}`)).body;
    expect(run).toMatchObject({ title: 'Ship the release', source: 'FACTORY', state: 'QUEUED' });
    expect(run.agent_config).toMatchObject({
      name: 'lead',
      model_id: 'lead-model',
      worker_host: 'warp',
      base_prompt: 'You lead the factory.',
    });
    expect((await t.call('POST', `/api/v1/factory/${uid}/runs`, {})).status).toBe(400);
    expect((await t.call('POST', `/api/v1/factory/${uid}/runs`, { prompt: 'x', extra: 1 })).status).toBe(400);
    const readOnly = await t.newKey([t.defaultTeam], ['runs:read']);
    expect((await t.call('POST', `/api/v1/factory/${uid}/runs`, { prompt: 'x' }, readOnly)).status).toBe(403);
  });

  it('refuses to dispatch to a factory that never applied', async () => {
    const repo = new TestRepo();
    repos.push(repo);
    repo.commit({ 'factory.yaml': 'schemaVersion: v1alpha1\nname: broken\n' });
    const f = (await t.service.app
      .get(DefinitionStore)
      .register({ teamId: t.defaultTeam.id, name: 'broken', repoUrl: repo.dir, branch: 'main' }))!;
    await t.service.app.get(Reconciler).request(f.id);
    const res = await t.call('POST', `/api/v1/factory/${f.uid}/runs`, { prompt: 'x' });
    expect(res.status).toBe(409);
    expect(res.body.detail).toMatch(/no applied definition yet \(ValidationFailed/);
    expect((await t.call('GET', `/api/v1/factory/${f.uid}`)).body).toMatchObject({
      ready: false,
      last_applied_revision: null,
    });
  });

  it('publishes the definition schemas without authentication', async () => {
    const res = await t.call('GET', '/api/v1/factory-files/schemas', undefined, '');
    expect(res.status).toBe(200);
    expect(res.body.schemas.map((s: any) => s.id)).toEqual([
      'FactoryFile',
      'AgentFrontMatter',
      'AutomationFrontMatter',
      'WebhookFile',
      'NotificationFile',
      'EnvironmentFile',
    ]);
    const one = await t.call('GET', '/api/v1/factory-files/schemas/automation.schema.json', undefined, '');
    expect(one.body.$defs.AgentOverrides).toBeDefined();
    expect(one.body.$defs.McpServerConfig).toBeDefined();
    expect(JSON.stringify(one.body)).not.toMatch(/"\$ref":"(?!#)/);
    expect((await t.call('GET', '/api/v1/factory-files/schemas/nope.json', undefined, '')).status).toBe(404);
  });

  it('keeps automations that use a webhook in the factory', async () => {
    const hooks = (await t.call('GET', `/api/v1/factory/${uid}/webhooks`)).body.webhooks;
    const ci = hooks.find((w: any) => w.name === 'ci');
    repos[0].commit({ 'automations/fix/automation.md': automation(ci.uid) });
    const f = (await t.call('GET', `/api/v1/factory/${uid}`)).body;
    const out = await t.service.app
      .get(Reconciler)
      .request((await t.service.db.query(`SELECT id FROM factories WHERE uid = $1`, [f.uid]))[0].id);
    expect(out.result).toBe('applied');
  });
});
