import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchemaRegistry } from '../../src/common/schema-validator.js';
import { DASHBOARD_DIR } from '../../src/dashboard/dashboard-pages.js';
import { DefinitionStore } from '../../src/reconciler/definition-store.js';
import { Reconciler } from '../../src/reconciler/reconciler.js';
import { SecretsService } from '../../src/secrets/secrets.service.js';
import { automation, baseFactory, TestRepo } from '../support/git-repo.js';
import { startTestService, type TestService } from '../support/service.js';

const built = existsSync(`${DASHBOARD_DIR}/index.html`);

// The dashboard's server side: static pages under /ui (built by `npm run build`), and the API
// routes it reads (who the key is, a factory's definition and plan). docs/dashboard.md.
describe.skipIf(!built)('dashboard pages and routes (needs `npm run build`: dist/web)', () => {
  let t: TestService;
  let repo: TestRepo;
  let factory: { uid: string };
  let hookUid: string;

  beforeAll(async () => {
    t = await startTestService({
      FACTORY_POLL_SECONDS: '3600',
      SECRETS_KEY: randomBytes(32).toString('base64'),
    });
    repo = new TestRepo();
    await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'ci-secret-value');
    repo.commit(baseFactory(), 'initial');
    const f = (await t.service.app.get(DefinitionStore).register({
      teamId: t.defaultTeam.id,
      name: 'backed',
      repoUrl: repo.dir,
      branch: 'main',
    }))!;
    await t.service.app.get(Reconciler).request(f.id, true);
    hookUid = (await t.call('GET', `/api/v1/factory/${f.uid}/webhooks`)).body.webhooks[0].uid;
    repo.commit({ 'automations/fix/automation.md': automation(hookUid) }, 'automation');
    expect((await t.service.app.get(Reconciler).request(f.id, true)).result).toBe('applied');
    factory = { uid: f.uid };
  });
  afterAll(async () => {
    await t?.stop();
    repo?.remove();
  });

  const get = (path: string, headers: Record<string, string> = {}) =>
    fetch(`${t.url}${path}`, { headers, redirect: 'manual' });

  it('redirects / to the dashboard', async () => {
    const res = await get('/');
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/ui/');
  });

  it('answers a deep link with the app under a strict CSP, revalidated each time', async () => {
    const res = await get('/ui/runs/4f5d2c1e-0000-4000-8000-000000000000');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await res.text();
    // No inline script: every <script> loads a file of our own.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/https?:\/\//);
    const etag = res.headers.get('etag')!;
    expect((await get('/ui/factories', { 'if-none-match': etag })).status).toBe(304);
  });

  it('caches hashed assets for a year and never answers a missing asset with the page', async () => {
    const html = await (await get('/ui/')).text();
    const script = /src="(\/ui\/assets\/[^"]+\.js)"/.exec(html)![1];
    const res = await get(script);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/javascript');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    // Gzipped for a browser that takes it (Node's fetch asks for it and decodes it), same bytes.
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(res.headers.get('vary')).toBe('Accept-Encoding');
    const plain = await get(script, { 'accept-encoding': 'identity' });
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(await plain.text()).toBe(await res.text());
    expect((await get('/ui/assets/%E0%A4%A')).status).toBe(400);
    const missing = await get('/ui/assets/nope.js');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toContain('application/problem+json');
  });

  it('leaves the API, the ingress, health and metrics where they were', async () => {
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/metrics')).status).toBe(200);
    const api = await get('/api/v1/nope');
    expect(api.status).toBe(404);
    expect(await api.text()).not.toContain('<html');
    expect((await get('/api/v1/openapi.json')).headers.get('content-type')).toContain('application/json');
    const ingress = await fetch(`${t.url}/webhooks/w/${hookUid}`, {
      method: 'POST',
      headers: { authorization: 'Bearer ci-secret-value' },
      body: '{}',
    });
    expect(ingress.status).toBe(202);
  });

  it('tells a key who it is: principal, scopes and every team, and never the key', async () => {
    const second = await t.auth.createTeam('second');
    const key = await t.newKey([t.defaultTeam, second], ['runs:read'], 'two-teams');
    const me = await t.call('GET', '/api/v1/api-key', undefined, key);
    expect(me.status).toBe(200);
    expect(me.body.scopes).toEqual(['runs:read']);
    expect(me.body.teams.map((x: { name: string }) => x.name).sort()).toEqual(['default', 'second']);
    expect(me.body.principal.display_name).toBe('two-teams');
    expect(JSON.stringify(me.body)).not.toContain(key);
    expect((await t.call('GET', '/api/v1/api-key', undefined, '')).status).toBe(401);
    const bad = await t.call('GET', '/api/v1/api-key', undefined, 'fd_not_a_key');
    expect(bad.status).toBe(401);
    expect(bad.body.detail).toMatch(/not valid/);
    const worker = await t.call('GET', '/api/v1/api-key', undefined, await t.workerKey('box-1'));
    expect(worker.status).toBe(403);
    expect(worker.body.detail).toContain('lacks the scope runs:read');
  });

  it('lists a factory’s agents, skills and automations, each webhook trigger with its webhook’s name', async () => {
    const res = await t.call('GET', `/api/v1/factory/${factory.uid}/definition`);
    expect(res.status).toBe(200);
    expect(new SchemaRegistry().check('FactoryDefinitionResponse', res.body)).toEqual([]);
    expect(res.body.agents.map((a: { name: string }) => a.name)).toEqual(['lead', 'fixer']);
    expect(res.body.skills).toEqual([
      { name: 'triage', path: 'skills/triage/SKILL.md', description: 'Triage issues' },
    ]);
    expect(res.body.automations).toHaveLength(1);
    expect(res.body.automations[0]).toMatchObject({ name: 'fix', enabled: true, agent: 'fixer' });
    expect(res.body.automations[0].triggers[0].webhooks).toEqual([
      { uid: hookUid, name: 'ci', deleted: false },
    ]);
    expect(res.body.automations[0].triggers[0].filter.payload).toEqual({ action: ['opened'] });
  });

  it('plans the next reconcile without applying or recording it', async () => {
    const before = (await t.call('GET', `/api/v1/factory/${factory.uid}/applies`)).body.applies.length;
    const head = repo.commit(
      { 'agents/docs/agent.md': '---\ndescription: Writes docs\n---\nYou write docs.\n' },
      'docs',
    );
    const res = await t.call('GET', `/api/v1/factory/${factory.uid}/plan`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ result: 'planned', revision: head, errors: [] });
    expect(new SchemaRegistry().check('FactoryPlanResponse', res.body)).toEqual([]);
    expect(res.body.plan.agents.created).toEqual(['docs']);
    expect((await t.call('GET', `/api/v1/factory/${factory.uid}/applies`)).body.applies.length).toBe(before);
    const agents = (await t.call('GET', `/api/v1/factory/${factory.uid}/definition`)).body.agents;
    expect(agents.map((a: { name: string }) => a.name)).not.toContain('docs');
  });

  it('shows another team neither the definition nor the plan of a factory', async () => {
    const other = await t.newTeam('intruders');
    for (const route of ['definition', 'plan']) {
      const res = await t.call('GET', `/api/v1/factory/${factory.uid}/${route}`, undefined, other.key);
      expect(res.status).toBe(404);
      expect(res.body.detail).toContain('does not exist in team intruders');
    }
  });
});
