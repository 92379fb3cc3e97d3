import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManagedFactories } from '../../src/management/managed-factories.js';
import { ReconcileScheduler } from '../../src/reconciler/reconcile-scheduler.js';
import { SecretsService } from '../../src/secrets/secrets.service.js';
import { startTestService, type TestService } from '../support/service.js';

/** A person's commit in a managed factory's working copy, as the README's walkthrough has them make. */
const git = (dir: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=Mallory', '-c', 'user.email=m@example.com', ...args], {
    cwd: dir,
    encoding: 'utf8',
  }).trim();

/**
 * Issue #13, 6: the managed working copy was written through symlinks. A committed
 * `webhooks/x.yaml -> <a file outside>` (or a linked `webhooks/` folder) and a management write of
 * that webhook through the API rewrote the file outside the repository.
 */
describe('management writes never follow a symlink out of a managed repository (docs/security.md)', () => {
  let t: TestService;
  const outside = mkdtempSync(join(tmpdir(), 'factoryd-outside-'));
  const victim = join(outside, 'precious.yaml');
  // Valid webhook YAML, so that following the link would parse and rewrite it without a hitch.
  const original = Buffer.from(
    "# not factoryd's file\nauthMode: token\nsecretName: precious\nenabled: true\n",
  );

  const managedFactory = async (name: string) => {
    const { factory } = await t.service.app.get(ManagedFactories).create({
      team: t.defaultTeam,
      name,
      branch: 'main',
      author: { name: 'Setup', email: 'setup@example.com' },
    });
    return factory;
  };

  beforeAll(async () => {
    t = await startTestService({
      FACTORY_POLL_SECONDS: '3600',
      SECRETS_KEY: randomBytes(32).toString('base64'),
    });
    await t.service.app.get(ReconcileScheduler).firstPoll;
    writeFileSync(victim, original);
  });
  afterAll(async () => {
    await t?.stop();
    rmSync(outside, { recursive: true, force: true });
  });

  it('a webhook file committed as a symlink: PATCH, disable and delete are 409, the outside file unchanged byte for byte', async () => {
    const factory = await managedFactory('linked-file');
    const created = await t.call('POST', `/api/v1/factory/${factory.uid}/webhooks`, { name: 'x' });
    expect(created.status).toBe(201);
    const uid = created.body.webhook.uid;
    unlinkSync(join(factory.repoUrl, 'webhooks/x.yaml'));
    symlinkSync(victim, join(factory.repoUrl, 'webhooks/x.yaml'));
    git(factory.repoUrl, 'add', '-A');
    git(factory.repoUrl, 'commit', '--quiet', '-m', 'x.yaml is a link now');
    const head = git(factory.repoUrl, 'rev-parse', 'HEAD');

    for (const [method, path, body] of [
      ['PATCH', `/api/v1/webhooks/${uid}`, { description: 'pwned' }],
      ['POST', `/api/v1/webhooks/${uid}/disable`, undefined],
      ['DELETE', `/api/v1/webhooks/${uid}`, undefined],
    ] as const) {
      const res = await t.call(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(409);
      expect(res.body.detail).toMatch(
        /^webhooks\/x\.yaml is a symbolic link in the factory's repository, so factoryd will not rewrite it: it writes only regular files inside its repository and never follows links/,
      );
      expect(readFileSync(victim).equals(original)).toBe(true);
    }
    expect(git(factory.repoUrl, 'rev-parse', 'HEAD')).toBe(head);
  });

  it('a webhooks/ folder committed as a symlink: creating a webhook is 409 and writes nothing outside', async () => {
    const factory = await managedFactory('linked-folder');
    symlinkSync(outside, join(factory.repoUrl, 'webhooks'));
    git(factory.repoUrl, 'add', '-A');
    git(factory.repoUrl, 'commit', '--quiet', '-m', 'webhooks/ is a link now');

    const res = await t.call('POST', `/api/v1/factory/${factory.uid}/webhooks`, { name: 'y' });
    expect(res.status).toBe(409);
    expect(res.body.detail).toMatch(
      /^webhooks is a symbolic link in the factory's repository, so factoryd will not write under it/,
    );
    expect(readdirSync(outside)).toEqual(['precious.yaml']);
    expect(readFileSync(victim).equals(original)).toBe(true);
    expect((await t.call('GET', `/api/v1/factory/${factory.uid}/webhooks`)).body.webhooks).toEqual([]);
    // The secret made for the refused webhook was withdrawn with it.
    const secrets = await t.service.app.get(SecretsService).list(t.defaultTeam.id);
    expect(secrets.map((s) => s.name)).not.toContain('webhook-y');
  });

  it('an uncommitted link in the working copy is replaced by git, not followed, when a change lands', async () => {
    const factory = await managedFactory('untracked-link');
    symlinkSync(outside, join(factory.repoUrl, 'webhooks'));
    const res = await t.call('POST', `/api/v1/factory/${factory.uid}/webhooks`, { name: 'z' });
    expect(res.status).toBe(201);
    expect(existsSync(join(outside, 'z.yaml'))).toBe(false);
    expect(readFileSync(join(factory.repoUrl, 'webhooks/z.yaml'), 'utf8')).toMatch(/secretName: webhook-z/);
  });
});
