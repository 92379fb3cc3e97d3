import { execFileSync } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TeamRef } from '../src/auth/auth-context.js';
import { SchemaRegistry } from '../src/common/schema-validator.js';
import { CONFIG, type Config } from '../src/config/config.js';
import { ManagedFactories } from '../src/management/managed-factories.js';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { WebhookDirectory } from '../src/webhooks/webhook-directory.js';
import { deliver } from './support/definitions.js';
import { baseFactory, TestRepo } from './support/git-repo.js';
import { startTestService, type TestService } from './support/service.js';

const ENV = { FACTORY_POLL_SECONDS: '3600', SECRETS_KEY: randomBytes(32).toString('base64') };
const schemas = new SchemaRegistry();
const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });
const githubSignature = (secret: string, body: string) =>
  `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

/** A managed factory's repository as a person would inspect it. */
const git = (dir: string, ...args: string[]) =>
  execFileSync('git', args, { cwd: dir, encoding: 'utf8' }).trim();

describe('webhook management (docs/webhooks.md, "Managing webhooks")', () => {
  let t: TestService;
  let managerKey: string;
  let manager: { uid: string; name: string };
  let readerKey: string;
  let other: { team: TeamRef; key: string };
  let managed: { uid: string; id: string; dir: string };
  let backed: { uid: string; id: string; repo: TestRepo; hookUid: string };

  beforeAll(async () => {
    t = await startTestService(ENV);
    await t.service.app.get(ReconcileScheduler).firstPoll;
    const created = await t.auth.createApiKey({
      teams: [t.defaultTeam],
      scopes: ['runs:read', 'runs:write', 'factory:manage'],
      name: 'Ada Lovelace',
      type: 'user',
    });
    managerKey = created.key;
    manager = { uid: created.principalUid, name: 'Ada Lovelace' };
    readerKey = await t.newKey([t.defaultTeam], ['runs:read', 'runs:write']);
    other = await t.newTeam('other-team');

    const { factory, outcome } = await t.service.app.get(ManagedFactories).create({
      team: t.defaultTeam,
      name: 'support',
      branch: 'main',
      author: { name: 'Setup', email: 'setup@example.com' },
    });
    expect(outcome.result).toBe('applied');
    managed = { uid: factory.uid, id: factory.id, dir: factory.repoUrl };

    const repo = new TestRepo();
    await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'ci-secret-value');
    repo.commit(baseFactory(), 'initial');
    const f = (await t.service.app.get(DefinitionStore).register({
      teamId: t.defaultTeam.id,
      name: 'backed',
      repoUrl: repo.dir,
      branch: 'main',
    }))!;
    expect((await t.service.app.get(Reconciler).request(f.id, true)).result).toBe('applied');
    const hooks = (await t.call('GET', `/api/v1/factory/${f.uid}/webhooks`)).body.webhooks;
    backed = { uid: f.uid, id: f.id, repo, hookUid: hooks[0].uid };
  });
  afterAll(async () => {
    await t?.stop();
    backed?.repo.remove();
  });

  const create = (body: unknown, key = managerKey, factoryUid = managed.uid) =>
    t.call('POST', `/api/v1/factory/${factoryUid}/webhooks`, body, key);
  const head = () => git(managed.dir, 'rev-parse', 'HEAD');
  const commits = () => Number(git(managed.dir, 'rev-list', '--count', 'HEAD'));

  it('documents every management route in OpenAPI with the schemas that validate it', async () => {
    const doc = (await t.call('GET', '/api/v1/openapi.json')).body;
    const op = (path: string, method: string) => doc.paths[path]?.[method];
    const body = (path: string, method: string) =>
      op(path, method)?.requestBody?.content['application/json'].schema.$ref;
    const ok = (path: string, method: string, status = '200') =>
      op(path, method)?.responses[status]?.content?.['application/json']?.schema.$ref;
    const ref = (id: string) => `#/components/schemas/${id}`;
    expect(body('/api/v1/factory/{uid}/webhooks', 'post')).toBe(ref('WebhookCreateRequest'));
    expect(ok('/api/v1/factory/{uid}/webhooks', 'post', '201')).toBe(ref('WebhookWithSecret'));
    expect(ok('/api/v1/webhooks/{uid}', 'get')).toBe(ref('WebhookItem'));
    expect(body('/api/v1/webhooks/{uid}', 'patch')).toBe(ref('WebhookUpdateRequest'));
    for (const action of ['enable', 'disable'])
      expect(ok(`/api/v1/webhooks/{uid}/${action}`, 'post')).toBe(ref('WebhookItem'));
    expect(ok('/api/v1/webhooks/{uid}/rotate', 'post')).toBe(ref('WebhookWithSecret'));
    expect(body('/api/v1/webhooks/{uid}/secret', 'post')).toBe(ref('WebhookSecretRequest'));
    expect(op('/api/v1/webhooks/{uid}', 'delete').responses['204']).toBeDefined();
    expect(body('/api/v1/webhooks/{uid}/test-filter', 'post')).toBe(ref('WebhookTestFilterRequest'));
    expect(ok('/api/v1/webhooks/{uid}/test-filter', 'post')).toBe(ref('WebhookTestFilterResponse'));
    expect(
      op('/api/v1/webhooks/{uid}/rotate', 'post').responses['409'].content['application/problem+json'],
    ).toBeDefined();
  });

  describe('managed factories', () => {
    it('factoryd owns a repository under DATA_DIR/factories/teams/<team>/<name>, applied with a foreman', async () => {
      const dataDir = t.service.app.get<Config>(CONFIG).dataDir;
      expect(managed.dir).toBe(join(dataDir, 'factories', 'teams', 'default', 'support'));
      expect(git(managed.dir, 'log', '--format=%an <%ae>|%s')).toBe(
        'Setup <setup@example.com>|Create the managed factory support',
      );
      expect(readFileSync(join(managed.dir, 'factory.yaml'), 'utf8')).toContain('name: support');
      const f = (await t.call('GET', `/api/v1/factory/${managed.uid}`)).body;
      expect(f).toMatchObject({ managed: true, ready: true, last_applied_revision: head() });
      const run = await t.call('POST', `/api/v1/factory/${managed.uid}/runs`, { prompt: 'hello' });
      expect(run.body).toMatchObject({ foreman_agent: 'foreman', state: 'QUEUED' });
    });

    it('a second factory of the same name in the team is a conflict, and no repository is made', async () => {
      await expect(
        t.service.app.get(ManagedFactories).create({
          team: t.defaultTeam,
          name: 'support',
          branch: 'main',
          author: { name: 'x', email: 'x@example.com' },
        }),
      ).rejects.toThrow(/already has a factory named support/);
    });
  });

  describe('create', () => {
    it('token: 201 with the generated secret once; a commit by the caller; senders authenticate at once', async () => {
      const before = commits();
      const res = await create({
        name: 'ci',
        description: 'Build results',
        delivery_id_header: 'X-CI-Delivery',
      });
      expect(res.status).toBe(201);
      expect(schemas.check('WebhookWithSecret', res.body)).toEqual([]);
      const { webhook, secret } = res.body;
      expect(webhook).toMatchObject({
        name: 'ci',
        auth_mode: 'token',
        secret_name: 'webhook-ci',
        delivery_id_header: 'X-CI-Delivery',
        enabled: true,
        deleted: false,
        factory_uid: managed.uid,
        description: 'Build results',
        awaiting_secret: false,
        ingress_url: `${t.url}/webhooks/w/${webhook.uid}`,
      });
      expect(secret).toMatch(/^[A-Za-z0-9]{40}$/);
      expect(commits()).toBe(before + 1);
      expect(git(managed.dir, 'log', '-1', '--format=%an <%ae>|%cn|%s')).toBe(
        `Ada Lovelace <${manager.uid}@factoryd.invalid>|factoryd|Create webhook ci (token)`,
      );
      expect(readFileSync(join(managed.dir, 'webhooks/ci.yaml'), 'utf8')).toBe(
        'authMode: token\nsecretName: webhook-ci\ndeliveryIdHeader: X-CI-Delivery\nenabled: true\ndescription: Build results\n',
      );
      const sent = await deliver(t.url, `/webhooks/w/${webhook.uid}`, '{"ok":true}', {
        ...bearer(secret),
        'x-ci-delivery': 'build-1',
      });
      expect(sent).toMatchObject({ status: 202, body: { delivery_id: 'build-1' } });
      // Later views never show the value again.
      const shown = await t.call('GET', `/api/v1/webhooks/${webhook.uid}`);
      expect(shown.status).toBe(200);
      expect(shown.body).toEqual(webhook);
      expect(JSON.stringify(shown.body)).not.toContain(secret);
      const list = (await t.call('GET', `/api/v1/factory/${managed.uid}/webhooks`)).body.webhooks;
      expect(list.map((w: { uid: string }) => w.uid)).toContain(webhook.uid);
    });

    it('url_token: a URL-safe secret shown once; views render {token}', async () => {
      const res = await create({ name: 'pager', auth_mode: 'url_token' });
      expect(res.status).toBe(201);
      const { webhook, secret } = res.body;
      expect(secret).toMatch(/^[A-Za-z0-9._~-]+$/);
      expect(webhook.ingress_url).toBe(`${t.url}/webhooks/w/${webhook.uid}/{token}`);
      expect((await t.call('GET', `/api/v1/webhooks/${webhook.uid}`)).body.ingress_url).toMatch(
        /\/\{token\}$/,
      );
      expect((await deliver(t.url, `/webhooks/w/${webhook.uid}/${secret}`, '{}')).status).toBe(202);
      expect((await deliver(t.url, `/webhooks/w/${webhook.uid}/wrong`, '{}')).status).toBe(401);
    });

    it('signature + standard_webhooks with a blank secret: a whsec_ secret is generated and shown once', async () => {
      const res = await create({
        name: 'svix',
        auth_mode: 'signature',
        signature_scheme: 'standard_webhooks',
        secret: '',
      });
      expect(res.status).toBe(201);
      const { webhook, secret } = res.body;
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      expect(webhook).toMatchObject({ signature_scheme: 'standard_webhooks', enabled: true });
      const body = '{"type":"invoice.paid"}';
      const ts = Math.floor(Date.now() / 1000);
      const sig = createHmac('sha256', Buffer.from(secret.slice(6), 'base64'))
        .update(`msg-1.${ts}.${body}`)
        .digest('base64');
      const sent = await deliver(t.url, `/webhooks/w/${webhook.uid}`, body, {
        'webhook-id': 'msg-1',
        'webhook-timestamp': String(ts),
        'webhook-signature': `v1,${sig}`,
      });
      expect(sent).toMatchObject({ status: 202, body: { delivery_id: 'msg-1' } });
    });

    it('a provider that issues its secret later (github): created disabled, then the secret enables it', async () => {
      const res = await create({ name: 'github', auth_mode: 'signature', signature_scheme: 'github' });
      expect(res.status).toBe(201);
      expect(res.body.secret).toBeUndefined();
      const { webhook } = res.body;
      expect(webhook).toMatchObject({ enabled: false, awaiting_secret: true });
      const path = `/webhooks/w/${webhook.uid}`;
      const body = '{"action":"opened"}';
      expect((await deliver(t.url, path, body)).status).toBe(404);
      // It cannot be enabled without its secret.
      const early = await t.call('POST', `/api/v1/webhooks/${webhook.uid}/enable`, undefined, managerKey);
      expect(early.status).toBe(409);
      expect(early.body.detail).toContain(`/api/v1/webhooks/${webhook.uid}/secret`);
      const blank = await t.call('POST', `/api/v1/webhooks/${webhook.uid}/secret`, {}, managerKey);
      expect(blank.status).toBe(400);
      expect(blank.body.detail).toMatch(/give the signing secret github issued/);

      const set = await t.call(
        'POST',
        `/api/v1/webhooks/${webhook.uid}/secret`,
        { secret: 'gh-issued' },
        managerKey,
      );
      expect(set.status).toBe(200);
      expect(set.body).toEqual({
        webhook: expect.objectContaining({ enabled: true, awaiting_secret: false }),
      });
      expect(git(managed.dir, 'log', '-1', '--format=%s')).toMatch(
        /^Set the signing secret of webhook github .*; enable it$/,
      );
      const ok = await deliver(t.url, path, body, {
        'x-hub-signature-256': githubSignature('gh-issued', body),
        'x-github-delivery': 'gh-1',
      });
      expect(ok.status).toBe(202);
      // A later secret from the provider replaces it at once.
      await t.call('POST', `/api/v1/webhooks/${webhook.uid}/secret`, { secret: 'gh-issued-2' }, managerKey);
      const stale = await deliver(t.url, path, body, {
        'x-hub-signature-256': githubSignature('gh-issued', body),
        'x-github-delivery': 'gh-2',
      });
      expect(stale.status).toBe(401);
      // Rotation belongs to the provider for this scheme.
      const rotate = await t.call('POST', `/api/v1/webhooks/${webhook.uid}/rotate`, undefined, managerKey);
      expect(rotate.status).toBe(400);
      expect(rotate.body).toMatchObject({ error: 'operation_not_supported' });
    });

    it('signature with the provider secret given: enabled, and the secret is not echoed', async () => {
      const res = await create({
        name: 'stripe',
        auth_mode: 'signature',
        signature_scheme: 'stripe',
        secret: 'whsec_stripe1',
      });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        webhook: expect.objectContaining({ enabled: true, awaiting_secret: false }),
      });
    });

    it('secret_name naming an existing team secret reuses it (value never shown); a taken default name gets a suffix', async () => {
      await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'shared-token', 'shared-value-123');
      const res = await create({ name: 'reuse', secret_name: 'shared-token' });
      expect(res.status).toBe(201);
      expect(res.body.secret).toBeUndefined();
      expect(res.body.webhook.secret_name).toBe('shared-token');
      expect(
        (await deliver(t.url, `/webhooks/w/${res.body.webhook.uid}`, '{}', bearer('shared-value-123')))
          .status,
      ).toBe(202);
      const withValue = await create({
        name: 'reuse2',
        auth_mode: 'signature',
        signature_scheme: 'github',
        secret_name: 'shared-token',
        secret: 'x',
      });
      expect(withValue.status).toBe(409);
      expect(withValue.body.detail).toMatch(/team secret shared-token exists/);

      await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'webhook-taken', 'someone-elses');
      const taken = await create({ name: 'taken' });
      expect(taken.status).toBe(201);
      expect(taken.body.webhook.secret_name).toBe('webhook-taken-2');
    });

    it('bad requests: 400 naming the field; a duplicate name is 409', async () => {
      const cases: Array<[unknown, RegExp]> = [
        [{}, /name is required/],
        [{ name: '../escape' }, /not a valid name/],
        [{ name: 'x', auth_mode: 'signature' }, /signature_scheme is required/],
        [{ name: 'x', signature_scheme: 'github' }, /signature_scheme/],
        [{ name: 'x', auth_mode: 'bearer' }, /auth_mode must be one of/],
        [{ name: 'x', secret: 'mine' }, /secret is generated by factoryd/],
        [
          { name: 'x', auth_mode: 'signature', signature_scheme: 'standard_webhooks', secret: 'nope' },
          /whsec_/,
        ],
        [
          { name: 'x', auth_mode: 'signature', signature_scheme: 'github', enabled: true },
          /cannot be enabled before/,
        ],
        [{ name: 'x', colour: 'red' }, /colour is not a known field/],
      ];
      for (const [body, message] of cases) {
        const res = await create(body);
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.headers.get('content-type')).toContain('application/problem+json');
        expect(res.body.error).toBe('invalid_request');
        expect(res.body.detail, JSON.stringify(body)).toMatch(message);
      }
      const dup = await create({ name: 'ci' });
      expect(dup.status).toBe(409);
      expect(dup.body).toMatchObject({ error: 'conflict' });
      expect(dup.body.detail).toMatch(/already has a webhook named ci/);
    });

    it('a change the reconciler refuses is 400 with file:line, and leaves no commit and no secret', async () => {
      const before = head();
      const res = await create({ name: 'bad-header', delivery_id_header: 'Authorization' });
      expect(res.status).toBe(400);
      expect(res.body.detail).toMatch(
        /webhooks\/bad-header\.yaml:3: deliveryIdHeader may not be Authorization/,
      );
      expect(res.body.invalid_params[0].name).toBe('webhooks/bad-header.yaml:3');
      expect(head()).toBe(before);
      expect(git(managed.dir, 'status', '--porcelain')).toBe('');
      expect(existsSync(join(managed.dir, 'webhooks/bad-header.yaml'))).toBe(false);
      const secrets = await t.service.app.get(SecretsService).list(t.defaultTeam.id);
      expect(secrets.map((s) => s.name)).not.toContain('webhook-bad-header');
      expect((await t.call('GET', `/api/v1/factory/${managed.uid}`)).body).toMatchObject({
        ready: true,
        last_applied_revision: before,
      });
    });
  });

  describe('enable, disable, rotate, update, delete', () => {
    it('disable cuts senders off at once (404); enable lets them in again', async () => {
      const { webhook, secret } = (await create({ name: 'toggle' })).body;
      const send = () => deliver(t.url, `/webhooks/w/${webhook.uid}`, '{}', bearer(secret));
      expect((await send()).status).toBe(202);
      const off = await t.call('POST', `/api/v1/webhooks/${webhook.uid}/disable`, undefined, managerKey);
      expect(off.status).toBe(200);
      expect(off.body).toMatchObject({ uid: webhook.uid, enabled: false });
      expect(git(managed.dir, 'log', '-1', '--format=%s')).toBe('Disable webhook toggle');
      expect((await send()).status).toBe(404);
      const again = commits();
      expect(
        (await t.call('POST', `/api/v1/webhooks/${webhook.uid}/disable`, undefined, managerKey)).status,
      ).toBe(200);
      expect(commits()).toBe(again); // nothing changed, nothing committed
      const on = await t.call('POST', `/api/v1/webhooks/${webhook.uid}/enable`, undefined, managerKey);
      expect(on.body).toMatchObject({ enabled: true });
      expect((await send()).status).toBe(202);
    });

    it('rotate: a new secret shown once; the old one fails at once (401), the new one works', async () => {
      const { webhook, secret: old } = (await create({ name: 'rotating' })).body;
      const send = (s: string) =>
        deliver(t.url, `/webhooks/w/${webhook.uid}`, JSON.stringify({ n: Math.random() }), bearer(s));
      expect((await send(old)).status).toBe(202);
      const res = await t.call('POST', `/api/v1/webhooks/${webhook.uid}/rotate`, undefined, managerKey);
      expect(res.status).toBe(200);
      expect(schemas.check('WebhookWithSecret', res.body)).toEqual([]);
      expect(res.body.secret).toMatch(/^[A-Za-z0-9]{40}$/);
      expect(res.body.secret).not.toBe(old);
      expect((await send(old)).status).toBe(401);
      expect((await send(res.body.secret)).status).toBe(202);
      expect(git(managed.dir, 'log', '-1', '--format=%an|%s')).toBe(
        'Ada Lovelace|Rotate the secret of webhook rotating (team secret webhook-rotating, version 2)',
      );
    });

    it('rotate of a secret shared by webhooks of the factory: every one of them takes the new value at once', async () => {
      await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'team-shared', 'team-shared-old');
      const a = (await create({ name: 'shared-a', secret_name: 'team-shared' })).body.webhook;
      const b = (await create({ name: 'shared-b', secret_name: 'team-shared' })).body.webhook;
      const res = await t.call('POST', `/api/v1/webhooks/${a.uid}/rotate`, undefined, managerKey);
      expect(res.status).toBe(200);
      for (const w of [a, b]) {
        expect(
          (await deliver(t.url, `/webhooks/w/${w.uid}`, '{"s":1}', bearer('team-shared-old'))).status,
        ).toBe(401);
        expect(
          (await deliver(t.url, `/webhooks/w/${w.uid}`, '{"s":2}', bearer(res.body.secret))).status,
        ).toBe(202);
      }
      for (const w of [a, b]) await t.call('DELETE', `/api/v1/webhooks/${w.uid}`, undefined, managerKey);
    });

    it('rotate or set-secret of a secret shared with a webhook of another kind: 409 naming it, nothing changed', async () => {
      await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'mixed-shared', 'mixed-old');
      const token = (await create({ name: 'mixed-token', secret_name: 'mixed-shared' })).body.webhook;
      const github = (
        await create({
          name: 'mixed-github',
          auth_mode: 'signature',
          signature_scheme: 'github',
          secret_name: 'mixed-shared',
        })
      ).body.webhook;
      const before = head();
      const rotate = await t.call('POST', `/api/v1/webhooks/${token.uid}/rotate`, undefined, managerKey);
      expect(rotate.status).toBe(409);
      expect(rotate.body.detail).toMatch(
        /team secret mixed-shared is also the secret of webhook mixed-github \(github signature, factory \S+\): a new value would break it/,
      );
      const set = await t.call(
        'POST',
        `/api/v1/webhooks/${github.uid}/secret`,
        { secret: 'gh-new' },
        managerKey,
      );
      expect(set.status).toBe(409);
      expect(set.body.detail).toMatch(/also the secret of webhook mixed-token \(token, factory \S+\)/);
      // Nothing changed: no commit, and both still take the old value.
      expect(head()).toBe(before);
      expect((await deliver(t.url, `/webhooks/w/${token.uid}`, '{"m":1}', bearer('mixed-old'))).status).toBe(
        202,
      );
      const body = '{"m":2}';
      const signed = await deliver(t.url, `/webhooks/w/${github.uid}`, body, {
        'x-hub-signature-256': githubSignature('mixed-old', body),
        'x-github-delivery': 'mixed-1',
      });
      expect(signed.status).toBe(202);
      for (const w of [token, github])
        await t.call('DELETE', `/api/v1/webhooks/${w.uid}`, undefined, managerKey);
    });

    it('rotate of a url_token webhook: the old URL fails at once', async () => {
      const { webhook, secret: old } = (await create({ name: 'pager-rotating', auth_mode: 'url_token' }))
        .body;
      const res = await t.call('POST', `/api/v1/webhooks/${webhook.uid}/rotate`, undefined, managerKey);
      expect(res.body.secret).toMatch(/^[A-Za-z0-9._~-]+$/);
      expect((await deliver(t.url, `/webhooks/w/${webhook.uid}/${old}`, '{"a":1}')).status).toBe(401);
      expect((await deliver(t.url, `/webhooks/w/${webhook.uid}/${res.body.secret}`, '{"a":2}')).status).toBe(
        202,
      );
    });

    it('rename is unsupported (400 operation_not_supported); description and delivery-id header can change', async () => {
      const { webhook } = (await create({ name: 'patchable' })).body;
      const rename = await t.call(
        'PATCH',
        `/api/v1/webhooks/${webhook.uid}`,
        { name: 'renamed' },
        managerKey,
      );
      expect(rename.status).toBe(400);
      expect(rename.body).toMatchObject({ error: 'operation_not_supported' });
      expect(rename.body.detail).toMatch(
        /renaming a webhook is not supported.*Create a webhook named renamed.*delete patchable/,
      );
      const mode = await t.call(
        'PATCH',
        `/api/v1/webhooks/${webhook.uid}`,
        { auth_mode: 'url_token' },
        managerKey,
      );
      expect(mode.status).toBe(400);
      expect(mode.body.error).toBe('operation_not_supported');
      const ok = await t.call(
        'PATCH',
        `/api/v1/webhooks/${webhook.uid}`,
        { name: 'patchable', description: 'Now described', delivery_id_header: 'X-Id' },
        managerKey,
      );
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ description: 'Now described', delivery_id_header: 'X-Id' });
      const cleared = await t.call(
        'PATCH',
        `/api/v1/webhooks/${webhook.uid}`,
        { delivery_id_header: null },
        managerKey,
      );
      expect(cleared.body.delivery_id_header).toBeUndefined();
      expect(readFileSync(join(managed.dir, 'webhooks/patchable.yaml'), 'utf8')).toBe(
        'authMode: token\nsecretName: webhook-patchable\nenabled: true\ndescription: Now described\n',
      );
    });

    it('delete: 204, senders get 404 at once, the file is gone; a second delete is 404', async () => {
      const { webhook, secret } = (await create({ name: 'doomed' })).body;
      expect((await deliver(t.url, `/webhooks/w/${webhook.uid}`, '{}', bearer(secret))).status).toBe(202);
      const res = await t.call('DELETE', `/api/v1/webhooks/${webhook.uid}`, undefined, managerKey);
      expect(res.status).toBe(204);
      expect((await deliver(t.url, `/webhooks/w/${webhook.uid}`, '{"x":1}', bearer(secret))).status).toBe(
        404,
      );
      expect(existsSync(join(managed.dir, 'webhooks/doomed.yaml'))).toBe(false);
      expect(git(managed.dir, 'log', '-1', '--format=%s')).toBe('Delete webhook doomed');
      expect((await t.call('GET', `/api/v1/webhooks/${webhook.uid}`)).body).toMatchObject({ deleted: true });
      expect((await t.call('DELETE', `/api/v1/webhooks/${webhook.uid}`, undefined, managerKey)).status).toBe(
        404,
      );
      expect(
        (await t.call('POST', `/api/v1/webhooks/${webhook.uid}/enable`, undefined, managerKey)).status,
      ).toBe(404);
      // The name is free again: a new webhook with a new UID.
      const again = await create({ name: 'doomed' });
      expect(again.status).toBe(201);
      expect(again.body.webhook.uid).not.toBe(webhook.uid);
    });

    it('concurrent creates on one factory all land, each in its own commit', async () => {
      const before = commits();
      const names = ['c1', 'c2', 'c3', 'c4', 'c5'];
      const results = await Promise.all(names.map((name) => create({ name })));
      expect(results.map((r) => r.status)).toEqual(names.map(() => 201));
      expect(new Set(results.map((r) => r.body.webhook.uid)).size).toBe(5);
      expect(commits()).toBe(before + 5);
      const list = (await t.call('GET', `/api/v1/factory/${managed.uid}/webhooks`)).body.webhooks;
      for (const name of names) expect(list.map((w: { name: string }) => w.name)).toContain(name);
      for (const r of results)
        expect(
          (await deliver(t.url, `/webhooks/w/${r.body.webhook.uid}`, '{}', bearer(r.body.secret))).status,
        ).toBe(202);
    });

    it('two factories creating the same webhook name at once get separate default secrets', async () => {
      const { factory } = await t.service.app.get(ManagedFactories).create({
        team: t.defaultTeam,
        name: 'support-2',
        branch: 'main',
        author: { name: 'Setup', email: 'setup@example.com' },
      });
      const [a, b] = await Promise.all([
        create({ name: 'twin' }),
        create({ name: 'twin' }, managerKey, factory.uid),
      ]);
      expect([a.status, b.status]).toEqual([201, 201]);
      expect([a.body.webhook.secret_name, b.body.webhook.secret_name].sort()).toEqual([
        'webhook-twin',
        'webhook-twin-2',
      ]);
      for (const r of [a, b])
        expect(
          (await deliver(t.url, `/webhooks/w/${r.body.webhook.uid}`, '{}', bearer(r.body.secret))).status,
        ).toBe(202);
      await t.call('DELETE', `/api/v1/webhooks/${a.body.webhook.uid}`, undefined, managerKey);
    });

    it('the 21st webhook: the reconciler’s limit as 400, nothing committed, the secret withdrawn', async () => {
      const live = (await t.call('GET', `/api/v1/factory/${managed.uid}/webhooks`)).body.webhooks.length;
      for (let i = live; i < 20; i++) expect((await create({ name: `fill-${i}` })).status).toBe(201);
      const before = head();
      const res = await create({ name: 'zz-one-too-many' });
      expect(res.status).toBe(400);
      expect(res.body.detail).toMatch(/webhooks\/zz-one-too-many\.yaml:1: a factory has at most 20 webhooks/);
      expect(head()).toBe(before);
      expect(git(managed.dir, 'status', '--porcelain')).toBe('');
      const names = (await t.service.app.get(SecretsService).list(t.defaultTeam.id)).map((s) => s.name);
      expect(names).not.toContain('webhook-zz-one-too-many');
      const status = (await t.call('GET', `/api/v1/factory/${managed.uid}`)).body;
      expect(status).toMatchObject({ ready: true, last_applied_revision: before });
      const applies = (await t.call('GET', `/api/v1/factory/${managed.uid}/applies?limit=2`)).body.applies;
      expect(applies.map((a: { result: string }) => a.result)).toEqual(['unchanged', 'failed']);
      // Room again after deleting.
      const fills = (await t.call('GET', `/api/v1/factory/${managed.uid}/webhooks`)).body.webhooks.filter(
        (w: { name: string }) => w.name.startsWith('fill-'),
      );
      for (const w of fills)
        expect((await t.call('DELETE', `/api/v1/webhooks/${w.uid}`, undefined, managerKey)).status).toBe(204);
      const created = await create({ name: 'zz-one-too-many' });
      expect(created.status).toBe(201);
      await t.call('DELETE', `/api/v1/webhooks/${created.body.webhook.uid}`, undefined, managerKey);
    });

    it('no secret value ever reaches the repository', () => {
      const history = git(managed.dir, 'log', '--all', '-p');
      for (const value of ['gh-issued', 'whsec_stripe1', 'shared-value-123'])
        expect(history).not.toContain(value);
    });
  });

  describe('permissions and teams', () => {
    it('a key without factory:manage gets 403 for every write, and may read', async () => {
      const { webhook } = (await create({ name: 'guarded' })).body;
      const writes: Array<[string, string, unknown?]> = [
        ['POST', `/api/v1/factory/${managed.uid}/webhooks`, { name: 'nope' }],
        ['POST', `/api/v1/webhooks/${webhook.uid}/enable`],
        ['POST', `/api/v1/webhooks/${webhook.uid}/disable`],
        ['POST', `/api/v1/webhooks/${webhook.uid}/rotate`],
        ['POST', `/api/v1/webhooks/${webhook.uid}/secret`, {}],
        ['PATCH', `/api/v1/webhooks/${webhook.uid}`, { description: 'x' }],
        ['DELETE', `/api/v1/webhooks/${webhook.uid}`],
      ];
      for (const [method, path, body] of writes) {
        const res = await t.call(method, path, body, readerKey);
        expect(res.status, `${method} ${path}`).toBe(403);
        expect(res.body).toMatchObject({ error: 'not_authorized' });
        expect(res.body.detail).toContain('factory:manage');
      }
      expect((await t.call('GET', `/api/v1/webhooks/${webhook.uid}`, undefined, readerKey)).status).toBe(200);
    });

    it('another team sees none of it: 404 everywhere', async () => {
      const { webhook } = (await create({ name: 'private' })).body;
      const calls: Array<[string, string, unknown?]> = [
        ['POST', `/api/v1/factory/${managed.uid}/webhooks`, { name: 'intruder' }],
        ['GET', `/api/v1/webhooks/${webhook.uid}`],
        ['POST', `/api/v1/webhooks/${webhook.uid}/enable`],
        ['POST', `/api/v1/webhooks/${webhook.uid}/disable`],
        ['POST', `/api/v1/webhooks/${webhook.uid}/rotate`],
        ['POST', `/api/v1/webhooks/${webhook.uid}/secret`, { secret: 'x' }],
        ['PATCH', `/api/v1/webhooks/${webhook.uid}`, { description: 'x' }],
        ['DELETE', `/api/v1/webhooks/${webhook.uid}`],
        ['POST', `/api/v1/webhooks/${webhook.uid}/test-filter`, { filter: {} }],
      ];
      for (const [method, path, body] of calls) {
        const res = await t.call(method, path, body, other.key);
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.error).toBe('resource_not_found');
      }
      expect((await t.call('GET', `/api/v1/webhooks/${webhook.uid}`)).body.enabled).toBe(true);
    });
  });

  describe('a repository-backed factory', () => {
    it('every write is 409 naming the file (or the secret) to change in its repository', async () => {
      const uid = backed.hookUid;
      const expectations: Array<[string, string, unknown, RegExp]> = [
        [
          'POST',
          `/api/v1/factory/${backed.uid}/webhooks`,
          { name: 'github' },
          /add webhooks\/github\.yaml there and commit it/,
        ],
        ['POST', `/api/v1/webhooks/${uid}/enable`, undefined, /set `enabled: true` in webhooks\/ci\.yaml/],
        ['POST', `/api/v1/webhooks/${uid}/disable`, undefined, /set `enabled: false` in webhooks\/ci\.yaml/],
        ['PATCH', `/api/v1/webhooks/${uid}`, { description: 'x' }, /in webhooks\/ci\.yaml/],
        ['DELETE', `/api/v1/webhooks/${uid}`, undefined, /remove webhooks\/ci\.yaml there/],
        [
          'POST',
          `/api/v1/webhooks/${uid}/rotate`,
          undefined,
          /`npx factoryd secrets set hook-secret --team default --generate token`/,
        ],
      ];
      for (const [method, path, body, detail] of expectations) {
        const res = await t.call(method, path, body, managerKey);
        expect(res.status, `${method} ${path}`).toBe(409);
        expect(res.body.error).toBe('conflict');
        expect(res.body.detail).toContain(`repository ${backed.repo.dir} (branch main)`);
        expect(res.body.detail, `${method} ${path}`).toMatch(detail);
      }
      // Reads work, and nothing changed.
      expect((await t.call('GET', `/api/v1/webhooks/${uid}`)).body).toMatchObject({
        name: 'ci',
        enabled: true,
      });
      const rename = await t.call('PATCH', `/api/v1/webhooks/${uid}`, { name: 'other' }, managerKey);
      expect(rename.body.error).toBe('operation_not_supported');
    });
  });

  describe('test filter', () => {
    let hook: { uid: string; secret: string };
    const automation = (uid: string, enabled = true) =>
      `---\nenabled: ${enabled}\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [${uid}]\n      payload:\n        action: [opened, reopened]\n        sender: { type: { not_in: [Bot] } }\n        issue: { pull_request: { exists: false } }\n---\nTriage it.\n`;
    const testFilter = (body: unknown, key = readerKey, uid = backed.hookUid) =>
      t.call('POST', `/api/v1/webhooks/${uid}/test-filter`, body, key);

    beforeAll(async () => {
      backed.repo.commit({
        'automations/triage/automation.md': automation(backed.hookUid),
        'automations/paused/automation.md': automation(backed.hookUid, false),
      });
      expect((await t.service.app.get(Reconciler).request(backed.id)).result).toBe('applied');
      // A repository commit reaches the ingress by LISTEN/NOTIFY; don't race the notification here.
      await t.service.app.get(WebhookDirectory).refresh(backed.id);
      hook = { uid: backed.hookUid, secret: 'ci-secret-value' };
    });

    it('no Accepted delivery yet: 404 saying so', async () => {
      const res = await testFilter({ automation: 'triage' });
      expect(res.status).toBe(404);
      expect(res.body.detail).toMatch(/no Accepted delivery/);
    });

    it('an automation’s trigger on a matching payload: would trigger', async () => {
      const sent = await deliver(
        t.url,
        `/webhooks/w/${hook.uid}`,
        JSON.stringify({ action: 'opened', sender: { type: 'User' }, issue: { number: 7 } }),
        bearer(hook.secret),
      );
      expect(sent.status).toBe(202);
      const res = await testFilter({ automation: 'triage' });
      expect(res.status).toBe(200);
      expect(schemas.check('WebhookTestFilterResponse', res.body)).toEqual([]);
      expect(res.body).toMatchObject({
        result: 'would_trigger',
        automation: 'triage',
        delivery: { delivery_id: sent.body.delivery_id },
        webhook_check: { passed: true },
        payload_check: { passed: true, mismatches: [] },
      });
      // The ingress agreed: that delivery started a run of triage.
      const entry = (await t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries/${res.body.delivery.id}`))
        .body;
      expect(entry.runs).toHaveLength(1);
    });

    it('a failing payload: would not trigger, naming each mismatching path with expected and actual', async () => {
      await deliver(
        t.url,
        `/webhooks/w/${hook.uid}`,
        JSON.stringify({ action: 'closed', sender: { type: 'Bot' }, issue: { pull_request: {} } }),
        bearer(hook.secret),
      );
      const res = await testFilter({ automation: 'triage' });
      expect(res.body).toMatchObject({ result: 'would_not_trigger', webhook_check: { passed: true } });
      // Stored triggers are jsonb, which keeps its own key order: compare the mismatches as a set.
      const { payload_check } = res.body;
      expect(payload_check.passed).toBe(false);
      expect(payload_check.message).toMatch(/^3 conditions of the payload filter fail: /);
      for (const path of ['action', 'sender.type', 'issue.pull_request'])
        expect(payload_check.message).toContain(path);
      expect(payload_check.mismatches).toHaveLength(3);
      expect(payload_check.mismatches).toEqual(
        expect.arrayContaining([
          {
            path: 'action',
            condition: 'in',
            expected: ['opened', 'reopened'],
            actual: 'closed',
            present: true,
          },
          { path: 'sender.type', condition: 'not_in', expected: ['Bot'], actual: 'Bot', present: true },
          { path: 'issue.pull_request', condition: 'exists', expected: false, actual: {}, present: true },
        ]),
      );
      const entry = (await t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries/${res.body.delivery.id}`))
        .body;
      expect(entry.runs).toHaveLength(0);
    });

    it('a filter from the request, and a named delivery; a missing field is reported without an actual value', async () => {
      const deliveries = (await t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries?status=accepted`)).body
        .deliveries;
      const first = deliveries.at(-1);
      const res = await testFilter({
        delivery: first.id,
        filter: { webhook_ids: [hook.uid], payload: { issue: { number: [7] }, label: { in: ['bug'] } } },
      });
      expect(res.body).toMatchObject({
        result: 'would_not_trigger',
        delivery: { id: first.id },
        webhook_check: { passed: true },
        payload_check: {
          passed: false,
          mismatches: [{ path: 'label', condition: 'in', expected: ['bug'], present: false }],
        },
      });
      expect(res.body.payload_check.mismatches[0]).not.toHaveProperty('actual');
      expect(res.body).not.toHaveProperty('automation');
      const all = await testFilter({ delivery: first.id, filter: { payload: { issue: { number: [7] } } } });
      expect(all.body).toMatchObject({
        result: 'would_trigger',
        webhook_check: { passed: true, message: expect.stringMatching(/names no webhook_ids/) },
      });
    });

    it('a filter as text, as an automation file writes it (YAML), read by the rules of definition files (issue #30, 2)', async () => {
      const text = [
        `webhook_ids: [${hook.uid}]`,
        'payload:',
        '  issue:',
        '    number: [7]',
        '  label: { in: [bug] }',
      ].join('\n');
      const first = (
        await t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries?status=accepted`)
      ).body.deliveries.at(-1).id;
      const res = await testFilter({ delivery: first, filter: text });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        result: 'would_not_trigger',
        webhook_check: { passed: true },
        payload_check: {
          mismatches: [{ path: 'label', condition: 'in', expected: ['bug'], present: false }],
          // Every path the filter tests, passed or not: what the dashboard lists.
          paths: ['issue.number', 'label'],
        },
      });
      // JSON is YAML too, and gives the verdict the same filter as an object gives.
      const asJson = await testFilter({
        delivery: first,
        filter: JSON.stringify({ payload: { issue: { number: [7] } } }),
      });
      const asObject = await testFilter({ delivery: first, filter: { payload: { issue: { number: [7] } } } });
      expect(asJson.body).toEqual(asObject.body);
      expect(asJson.body.result).toBe('would_trigger');

      const cases: Array<[string, RegExp]> = [
        // The syntax error at its line, in words.
        [
          'payload:\n  action: [opened]\n    sender: x\n',
          /^filter, line 3: not valid YAML: this line is indented 4 spaces, deeper than line 2 above it \(2\)/,
        ],
        [
          'payload: {action: [opened]\n',
          /^filter, line 1: not valid YAML: the "\{" on this line is never closed/,
        ],
        // Text that is no map, and a map that is no filter: the same checks as an object.
        ['- opened\n', /the text is a map of webhook_ids, payload and headers/],
        [
          'action: [opened]\n',
          /^filter\.action is not a known field; the known fields are webhook_ids, payload, headers$/,
        ],
        ['payload:\n  a: { in: [{}] }\n', /must match exactly one allowed shape/],
      ];
      for (const [filter, detail] of cases) {
        const bad = await testFilter({ filter });
        expect(bad.status, filter).toBe(400);
        expect(bad.body.detail, filter).toMatch(detail);
      }
    });

    it('the webhook check fails for another webhook’s filter and for a disabled automation, saying why', async () => {
      const elsewhere = await testFilter({ filter: { webhook_ids: ['A'.repeat(22)] } });
      expect(elsewhere.body).toMatchObject({
        result: 'would_not_trigger',
        webhook_check: { passed: false, message: expect.stringMatching(/selects A{22}, not this webhook/) },
        payload_check: { passed: true },
      });
      const paused = await testFilter({ automation: 'paused' });
      expect(paused.body.webhook_check).toEqual({
        passed: false,
        message: 'automation paused is disabled (enabled: false in automations/paused/automation.md)',
      });
      expect(paused.body.result).toBe('would_not_trigger');
    });

    it('bad requests: 400 or 404 with a clear message', async () => {
      const rejected = await deliver(t.url, `/webhooks/w/${hook.uid}`, '{}', bearer('wrong'));
      expect(rejected.status).toBe(401);
      const [entry] = (await t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries?status=rejected_auth`))
        .body.deliveries;
      const cases: Array<[unknown, number, RegExp]> = [
        [{}, 400, /exactly one of automation .* or filter/],
        [{ automation: 'triage', filter: {} }, 400, /exactly one of/],
        [{ automation: 'nope' }, 400, /has no automation nope; its automations: paused, triage/],
        [
          { delivery: entry.id, automation: 'triage' },
          400,
          /is rejected_auth, and only Accepted deliveries keep their payload/,
        ],
        [
          { delivery: '00000000-0000-0000-0000-000000000000', automation: 'triage' },
          404,
          /no delivery log entry/,
        ],
        [{ delivery: 'not-a-uuid', automation: 'triage' }, 404, /no delivery log entry/],
        [
          { filter: { payload: { a: { in: Array.from({ length: 101 }, (_, i) => i) } } } },
          400,
          /a list of 101 values; the limit is 100/,
        ],
        [{ filter: { payload: { in: [1] } } }, 400, /invalid key "in"/],
        [{ filter: { payload: { a: { in: [{}] } } } }, 400, /must match exactly one allowed shape/],
      ];
      for (const [body, status, detail] of cases) {
        const res = await testFilter(body);
        expect(res.status, JSON.stringify(body)).toBe(status);
        expect(res.body.detail, JSON.stringify(body)).toMatch(detail);
      }
    });

    it('works on a managed factory’s webhook with a filter', async () => {
      const { webhook, secret } = (await create({ name: 'tested' })).body;
      await deliver(t.url, `/webhooks/w/${webhook.uid}`, '{"kind":"build","ok":false}', bearer(secret));
      const res = await testFilter({ filter: { payload: { ok: [true] } } }, readerKey, webhook.uid);
      expect(res.body).toMatchObject({
        result: 'would_not_trigger',
        payload_check: {
          mismatches: [{ path: 'ok', condition: 'in', expected: [true], actual: false, present: true }],
        },
      });
    });
  });
});
