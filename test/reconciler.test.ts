import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { GitSource } from '../src/reconciler/git-source.js';
import { ReconcileScheduler } from '../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { eventually } from './support/eventually.js';
import { automation, baseFactory, serveOverGit, TestRepo } from './support/git-repo.js';
import { startTestService, type TestService } from './support/service.js';

// Replicas share SECRETS_KEY (each would otherwise generate its own under its DATA_DIR).
const ENV = { FACTORY_POLL_SECONDS: '3600', SECRETS_KEY: randomBytes(32).toString('base64') };

describe('reconciler: a factory repository applied commit by commit', () => {
  let t: TestService;
  let repo: TestRepo;
  let reconciler: Reconciler;
  let secrets: SecretsService;
  let factoryId: string;
  let factoryUid: string;
  let ciUid: string;

  beforeAll(async () => {
    t = await startTestService(ENV);
    reconciler = t.service.app.get(Reconciler);
    secrets = t.service.app.get(SecretsService);
    repo = new TestRepo();
    // The start-up poll has run: from here on, this test drives the reconciles.
    await t.service.app.get(ReconcileScheduler).firstPoll;
    await secrets.set(t.defaultTeam.id, 'hook-secret', 'first-value');
    const f = await t.service.app
      .get(DefinitionStore)
      .register({ teamId: t.defaultTeam.id, name: 'test-factory', repoUrl: repo.dir, branch: 'main' });
    factoryId = f!.id;
    factoryUid = f!.uid;
  });
  afterAll(async () => {
    await t?.stop();
    repo?.remove();
  });

  const status = async () => (await t.call('GET', `/api/v1/factory/${factoryUid}`)).body;
  const applies = async () =>
    (await t.call('GET', `/api/v1/factory/${factoryUid}/applies`)).body.applies as any[];
  const webhooks = async (all = true) =>
    (await t.call('GET', `/api/v1/factory/${factoryUid}/webhooks${all ? '?include_deleted=true' : ''}`)).body
      .webhooks as Array<Record<string, any>>;
  const pinned = async (uid: string) =>
    (await t.service.db.query(`SELECT secret_version_id FROM webhooks WHERE uid = $1`, [uid]))[0]
      .secret_version_id;

  it('applies a good commit, assigns a webhook UID, records the apply and notifies replicas', async () => {
    const listener = new pg.Client({ connectionString: t.databaseUrl });
    await listener.connect();
    const notified = new Promise<string>((resolve) =>
      listener.on('notification', (n) => resolve(n.payload!)),
    );
    await listener.query('LISTEN factoryd_definitions_applied');
    const sha = repo.commit(baseFactory(), 'initial');
    const out = await reconciler.request(factoryId);
    expect(out.errors).toEqual([]);
    expect(out.result).toBe('applied');
    expect(await notified).toBe(factoryId);
    await listener.end();
    expect(await status()).toMatchObject({
      last_attempted_revision: sha,
      last_applied_revision: sha,
      ready: true,
      reason: 'Applied',
    });
    const hooks = await webhooks();
    expect(hooks).toHaveLength(1);
    ciUid = hooks[0].uid;
    expect(ciUid).toMatch(/^[A-Za-z0-9]{22}$/);
    expect(hooks[0]).toMatchObject({
      name: 'ci',
      auth_mode: 'token',
      secret_name: 'hook-secret',
      enabled: true,
      deleted: false,
    });
    expect(hooks[0].ingress_url).toBe(`${t.url}/webhooks/w/${ciUid}`);
    const [latest] = await applies();
    expect(latest).toMatchObject({ revision: sha, result: 'applied', errors: [] });
    expect(latest.plan.webhooks.created).toEqual(['ci']);
    expect(latest.plan.agents.created.sort()).toEqual(['fixer', 'lead']);
  });

  it('a git URL is fetched into the mirror and applied from there, commit by commit', async () => {
    const remote = new TestRepo();
    const served = await serveOverGit(remote);
    try {
      const f = await t.service.app.get(DefinitionStore).register({
        teamId: t.defaultTeam.id,
        name: 'from-a-url',
        repoUrl: served.url,
        branch: 'main',
      });
      const first = remote.commit(baseFactory());
      const applied = await reconciler.request(f!.id);
      expect(applied).toMatchObject({ result: 'applied', revision: first });
      expect((await reconciler.request(f!.id)).result).toBe('noop');
      const second = remote.commit({ 'agents/fixer/agent.md': '---\ndescription: Fixes\n---\nFix it.\n' });
      expect(await reconciler.request(f!.id)).toMatchObject({ result: 'applied', revision: second });
    } finally {
      served.stop();
      remote.remove();
    }
  });

  it('a poll of the same head does nothing and records nothing', async () => {
    const before = (await applies()).length;
    expect((await reconciler.request(factoryId)).result).toBe('noop');
    expect(await applies()).toHaveLength(before);
  });

  it('good → bad → good: a bad commit leaves the last good revision live, recorded with every error', async () => {
    const good = repo.commit({ 'automations/fix/automation.md': automation(ciUid) }, 'automation');
    expect((await reconciler.request(factoryId)).result).toBe('applied');
    const bad = repo.commit(
      {
        'automations/fix/automation.md': automation('ci'),
        'webhooks/ci.yaml': 'authMode: signature\nsecretName: hook-secret\n',
        'agents/fixer/agent.md': '---\nagentType: FOREMAN\n---\n',
      },
      'bad',
    );
    const out = await reconciler.request(factoryId);
    expect(out.result).toBe('failed');
    const s = await status();
    expect(s).toMatchObject({
      last_attempted_revision: bad,
      last_applied_revision: good,
      ready: false,
      reason: 'ValidationFailed',
    });
    const [latest] = await applies();
    expect(latest.result).toBe('failed');
    expect(latest.errors).toEqual([
      {
        path: 'agents/lead/agent.md',
        line: 2,
        message:
          'a factory has exactly one foreman, and agents/fixer/agent.md already is one: make this agent CUSTOM',
      },
      {
        path: 'automations/fix/automation.md',
        line: 7,
        message: `"ci" is a file name, not a UID: use the UID ${ciUid} of webhooks/ci.yaml`,
      },
      {
        path: 'webhooks/ci.yaml',
        line: 1,
        message:
          'signatureScheme is required with authMode: signature: set it to one of standard_webhooks, github, stripe, slack, shopify, gitlab, linear, sentry, pagerduty, vercel',
      },
    ]);
    // Nothing of the bad commit is live.
    const [hook] = await webhooks();
    expect(hook.auth_mode).toBe('token');
    const [auto] = await t.service.db.query(`SELECT triggers FROM automations WHERE factory_id = $1`, [
      factoryId,
    ]);
    expect(auto.triggers[0].filter.webhook_ids).toEqual([ciUid]);
    // The next good commit applies.
    const fixed = repo.commit(
      {
        ...baseFactory(),
        'automations/fix/automation.md': automation(ciUid, '        sender: {type: {not_in: [Bot]}}\n'),
      },
      'good',
    );
    expect((await reconciler.request(factoryId)).result).toBe('applied');
    expect(await status()).toMatchObject({
      last_attempted_revision: fixed,
      last_applied_revision: fixed,
      ready: true,
    });
    expect((await webhooks())[0].uid).toBe(ciUid);
  });

  it('ApplyFailed: a valid commit the database refuses is recorded; the last good revision stays whole', async () => {
    // PostgreSQL text holds no NUL character and the validator does not know it: a real failure
    // halfway through the apply (skills are written after agents and automations, before webhooks).
    const own = new TestRepo();
    try {
      const f = (await t.service.app
        .get(DefinitionStore)
        .register({ teamId: t.defaultTeam.id, name: 'apply-fails', repoUrl: own.dir, branch: 'main' }))!;
      const good = own.commit(baseFactory());
      expect((await reconciler.request(f.id)).result).toBe('applied');
      const row = async () =>
        (
          await t.service.db.query(
            `SELECT f.definition, f.description,
                    (SELECT description FROM agents WHERE factory_id = f.id AND name = 'fixer') AS fixer,
                    (SELECT array_agg(name ORDER BY name) FROM webhooks WHERE factory_id = f.id AND deleted_at IS NULL) AS hooks,
                    (SELECT array_agg(name ORDER BY name) FROM factory_skills WHERE factory_id = f.id AND deleted_at IS NULL) AS skills
               FROM factories f WHERE f.id = $1`,
            [f.id],
          )
        )[0];
      const before = await row();
      const bad = own.commit({
        'factory.yaml': 'schemaVersion: v1alpha1\nname: test-factory\ndescription: changed\n',
        'agents/fixer/agent.md': '---\ndescription: Fixes more\n---\nYou fix bugs.\n',
        'skills/nul/SKILL.md': '---\nname: nul\ndescription: holds a NUL\n---\nbefore\u0000after\n',
        'webhooks/ci.yaml': null,
      });
      const out = await reconciler.request(f.id);
      expect(out).toMatchObject({
        result: 'failed',
        revision: bad,
        failure: { reason: 'ApplyFailed', revision: bad },
      });
      expect(out.errors).toEqual([
        {
          path: '',
          line: 0,
          message: expect.stringMatching(
            `^apply of ${bad.slice(0, 12)} failed: unsupported Unicode escape sequence`,
          ),
        },
      ]);
      const s = (await t.call('GET', `/api/v1/factory/${f.uid}`)).body;
      expect(s).toMatchObject({
        last_attempted_revision: bad,
        last_applied_revision: good,
        ready: false,
        reason: 'ApplyFailed',
        message: out.errors[0].message,
      });
      const [latest] = (await t.call('GET', `/api/v1/factory/${f.uid}/applies`)).body.applies;
      expect(latest).toMatchObject({ revision: bad, result: 'failed', errors: out.errors });
      // Nothing of the refused commit is live: not the agent written before the failure, not the
      // tombstone or the factory's description that would have come after.
      expect(await row()).toEqual(before);
      expect(before).toMatchObject({ fixer: 'Fixes bugs', hooks: ['ci'], skills: ['triage'] });
      // A dry run of the same head stops before apply: it plans, and records nothing.
      expect((await reconciler.plan(f.id)).result).toBe('planned');
      expect((await t.call('GET', `/api/v1/factory/${f.uid}/applies`)).body.applies).toHaveLength(2);
      // The next commit without the NUL applies.
      const fixed = own.commit({ 'skills/nul/SKILL.md': '---\nname: nul\ndescription: fine\n---\nfine\n' });
      expect(await reconciler.request(f.id)).toMatchObject({ result: 'applied', revision: fixed });
      expect(await row()).toMatchObject({ fixer: 'Fixes more', hooks: null, skills: ['nul', 'triage'] });
    } finally {
      own.remove();
    }
  });

  it('a new secret value takes effect on the next applied change, not before', async () => {
    const first = await pinned(ciUid);
    const v2 = await secrets.set(t.defaultTeam.id, 'hook-secret', 'second-value');
    // A reconcile of the same head (here forced, as POST refresh does) changes nothing.
    expect((await reconciler.request(factoryId, true)).result).toBe('unchanged');
    expect(await pinned(ciUid)).toBe(first);
    repo.commit({ 'README.md': 'docs only\n' }, 'docs');
    expect((await reconciler.request(factoryId)).result).toBe('applied');
    expect(await pinned(ciUid)).toBe(v2.versionId);
    expect((await applies())[0].plan.webhooks.updated).toEqual(['ci']);
  });

  it('keeps UIDs across applies and restarts; a removed file is a tombstone; the automation stays', async () => {
    repo.commit({ 'webhooks/pager.yaml': 'secretName: hook-secret\ndescription: pages\n' }, 'pager');
    await reconciler.request(factoryId);
    const pagerUid = (await webhooks()).find((w) => w.name === 'pager')!.uid;
    // A second service on the same database ("after a restart") sees the same UIDs and applies nothing new.
    const t2 = await startTestService(ENV, { sameDatabaseAs: t });
    await t2.service.app.get(ReconcileScheduler).firstPoll;
    try {
      expect((await t2.service.app.get(Reconciler).request(factoryId)).result).toBe('noop');
      repo.commit({ 'webhooks/pager.yaml': 'secretName: hook-secret\ndescription: pages people\n' }, 'edit');
      expect((await t2.service.app.get(Reconciler).request(factoryId)).result).toBe('applied');
    } finally {
      await t2.stop();
    }
    const after = await webhooks();
    expect(after.find((w) => w.name === 'pager')!.uid).toBe(pagerUid);
    expect(after.find((w) => w.name === 'ci')!.uid).toBe(ciUid);

    repo.commit({ 'webhooks/ci.yaml': null }, 'remove ci');
    expect((await reconciler.request(factoryId)).errors).toEqual([]);
    expect((await webhooks(false)).map((w) => w.name)).toEqual(['pager']);
    expect((await webhooks()).find((w) => w.uid === ciUid)).toMatchObject({ deleted: true });
    const [auto] = await t.service.db.query(
      `SELECT deleted_at, triggers FROM automations WHERE factory_id = $1`,
      [factoryId],
    );
    expect(auto.deleted_at).toBeNull();
    expect(auto.triggers[0].filter.webhook_ids).toEqual([ciUid]);
    // The same file name again is a new webhook with a new UID.
    repo.commit({ 'webhooks/ci.yaml': 'secretName: hook-secret\n' }, 'ci again');
    await reconciler.request(factoryId);
    const live = (await webhooks(false)).find((w) => w.name === 'ci')!;
    expect(live.uid).not.toBe(ciUid);
  });

  it('two replicas applying the same commit at once: one applies, both see it', async () => {
    const t2 = await startTestService(ENV, { sameDatabaseAs: t });
    await t2.service.app.get(ReconcileScheduler).firstPoll;
    try {
      const sha = repo.commit({ 'agents/extra/agent.md': '---\ndescription: extra\n---\nExtra.\n' }, 'extra');
      const outcomes = await Promise.all([
        reconciler.request(factoryId),
        t2.service.app.get(Reconciler).request(factoryId),
      ]);
      expect(outcomes.map((o) => o.result).sort()).toEqual(['applied', 'noop']);
      const recorded = (await applies()).filter((a) => a.revision === sha);
      expect(recorded).toHaveLength(1);
      for (const svc of [t, t2]) {
        const s = (await svc.call('GET', `/api/v1/factory/${factoryUid}`, undefined, t.adminKey)).body;
        expect(s.last_applied_revision).toBe(sha);
      }
    } finally {
      await t2.stop();
    }
  });

  it("a plan takes its turn in the factory's queue: its fetch never overlaps a reconcile's into the mirror", async () => {
    const remote = new TestRepo();
    const served = await serveOverGit(remote);
    const source = t.service.app.get(GitSource);
    const store = t.service.app.get(DefinitionStore);
    const { head } = source;
    const { find } = store;
    try {
      const f = (await store.register({
        teamId: t.defaultTeam.id,
        name: 'planned-while-reconciling',
        repoUrl: served.url,
        branch: 'main',
      }))!;
      const sha = remote.commit(baseFactory());
      const events: string[] = [];
      let passes = 0;
      // A pass begins by reading the factory's row outside a transaction, on the very call that starts it
      // (the read with `tx` is the pass locking the row later on).
      store.find = (id, tx) => {
        if (id === f.id && !tx) events.push(`pass ${++passes} starts`);
        return find.call(store, id, tx);
      };
      // The source step is where the mirror is fetched: the first pass is held inside it.
      let entered!: () => void;
      const inFetch = new Promise<void>((resolve) => (entered = resolve));
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      source.head = async (ref) => {
        if (ref.repoUrl !== served.url) return head.call(source, ref);
        const pass = passes;
        events.push(`pass ${pass} fetches`);
        if (pass === 1) {
          entered();
          await held;
        }
        try {
          return await head.call(source, ref);
        } finally {
          events.push(`pass ${pass} fetched`);
        }
      };
      const reconciling = reconciler.request(f.id, true);
      await inFetch;
      const planning = reconciler.plan(f.id);
      events.push('released');
      release();
      expect(await reconciling).toMatchObject({ result: 'applied', revision: sha });
      expect(await planning).toMatchObject({ result: 'planned', revision: sha });
      expect(events).toEqual([
        'pass 1 starts',
        'pass 1 fetches',
        'released',
        'pass 1 fetched',
        'pass 2 starts',
        'pass 2 fetches',
        'pass 2 fetched',
      ]);
    } finally {
      delete (source as Partial<GitSource>).head;
      delete (store as Partial<DefinitionStore>).find;
      served.stop();
      remote.remove();
    }
  });

  it('POST /factory/{uid}/refresh → 202 and a reconcile that is recorded', async () => {
    const before = (await applies()).length;
    const res = await t.call('POST', `/api/v1/factory/${factoryUid}/refresh`);
    expect(res.status).toBe(202);
    await eventually(async () => (await applies()).length > before, 'the refresh recorded');
    expect((await applies())[0].result).toBe('unchanged');
    const { key } = await t.newTeam('others');
    expect((await t.call('POST', `/api/v1/factory/${factoryUid}/refresh`, undefined, key)).status).toBe(404);
    const readOnly = await t.newKey([t.defaultTeam], ['runs:read']);
    expect((await t.call('POST', `/api/v1/factory/${factoryUid}/refresh`, undefined, readOnly)).status).toBe(
      403,
    );
  });

  it('the watch applies a commit to a local repository, with no poll due for an hour', async () => {
    await t.service.app.get(ReconcileScheduler).pollAll(); // the watch is ready when this resolves
    const sha = repo.commit({ 'agents/watched/agent.md': '---\ndescription: w\n---\nW.\n' }, 'watched');
    // FACTORY_POLL_SECONDS is 3600 and nothing asks for a refresh: only the watch can apply it.
    await eventually(
      async () => (await status()).last_applied_revision === sha,
      'the watched commit applied',
    );
  });
});
