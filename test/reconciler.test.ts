import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { startTestService, type TestService } from './support/service.js';
import { automation, baseFactory, TestRepo } from './support/git-repo.js';

describe('reconciler: a factory repository applied commit by commit', () => {
  let t: TestService;
  let repo: TestRepo;
  let reconciler: Reconciler;
  let store: DefinitionStore;
  let secrets: SecretsService;
  let factoryId: string;
  let factoryUid: string;

  beforeAll(async () => {
    t = await startTestService({ FACTORY_POLL_SECONDS: '3600' });
    reconciler = t.service.app.get(Reconciler);
    store = t.service.app.get(DefinitionStore);
    secrets = t.service.app.get(SecretsService);
    repo = new TestRepo();
    await secrets.set(t.defaultTeam.id, 'hook-secret', 'first-value');
    const f = await store.register({
      teamId: t.defaultTeam.id,
      name: 'test-factory',
      repoUrl: repo.dir,
      branch: 'main',
    });
    factoryId = f!.id;
    factoryUid = f!.uid;
  });
  afterAll(async () => {
    await t?.stop();
    repo?.remove();
  });

  const webhooks = async () =>
    (await t.call('GET', `/api/v1/factory/${factoryUid}/webhooks?include_deleted=true`)).body
      .webhooks as Array<Record<string, any>>;

  it('applies a good commit, assigns a webhook UID, records the apply', async () => {
    const sha = repo.commit(baseFactory(), 'initial');
    const out = await reconciler.request(factoryId);
    expect(out.errors).toEqual([]);
    expect(out.result).toBe('applied');
    const f = (await t.call('GET', `/api/v1/factory/${factoryUid}`)).body;
    expect(f).toMatchObject({
      last_attempted_revision: sha,
      last_applied_revision: sha,
      ready: true,
      reason: 'Applied',
    });
    const hooks = await webhooks();
    expect(hooks).toHaveLength(1);
    expect(hooks[0].uid).toMatch(/^[A-Za-z0-9]{22}$/);
    expect(hooks[0].ingress_url).toBe(`${t.url}/webhooks/w/${hooks[0].uid}`);
    const applies = (await t.call('GET', `/api/v1/factory/${factoryUid}/applies`)).body.applies;
    expect(applies[0]).toMatchObject({ revision: sha, result: 'applied', errors: [] });
    expect(applies[0].plan.webhooks.created).toEqual(['ci']);
  });

  it('a poll of the same head does nothing and records nothing', async () => {
    const before = (await t.call('GET', `/api/v1/factory/${factoryUid}/applies`)).body.applies.length;
    expect((await reconciler.request(factoryId)).result).toBe('noop');
    expect((await t.call('GET', `/api/v1/factory/${factoryUid}/applies`)).body.applies.length).toBe(before);
  });
});
