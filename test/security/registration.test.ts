import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newUid } from '../../src/common/ids.js';
import { GitRunner } from '../../src/git/git-runner.js';
import { GitSource } from '../../src/reconciler/git-source.js';
import { ReconcileScheduler } from '../../src/reconciler/reconcile-scheduler.js';
import { runCli } from '../support/cli.js';
import { eventually } from '../support/eventually.js';
import { baseFactory, TestRepo } from '../support/git-repo.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Issue #13, 4: registration reaches other teams. Team evil tries to register team acme's managed
 * repository in every disguise, through `factoryd factories add` run as a child process (there is no
 * API route to register a factory), and through a row written straight into the database.
 */
describe('a factory registration stays inside its team (docs/security.md, "Factory registration")', () => {
  let t: TestService;
  let evilKey: string;
  let acmeRepo: string;
  const scratch = mkdtempSync(join(tmpdir(), 'factoryd-registration-'));
  const own = new TestRepo();
  const marker = join(scratch, 'ext-transport-ran');
  const cli = (args: string[], env: Record<string, string> = {}) =>
    runCli(args, {
      env: { DATABASE_URL: t.databaseUrl, DATA_DIR: t.dataDir, LOG_LEVEL: 'silent', ...env },
    });

  beforeAll(async () => {
    t = await startTestService({ FACTORY_POLL_SECONDS: '3600' });
    await t.newTeam('acme');
    ({ key: evilKey } = await t.newTeam('evil'));
    const made = await cli(['factories', 'add', 'ops', '--managed', '--team', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    acmeRepo = JSON.parse(made.stdout).repository;
    own.commit(baseFactory());
  });
  afterAll(async () => {
    await t?.stop();
    own.remove();
    rmSync(scratch, { recursive: true, force: true });
  });

  const refusals: Array<[string, () => string, RegExp]> = [
    [
      "acme's managed repository",
      () => acmeRepo,
      /is the managed repository of another team's factory: a team registers only its own repositories/,
    ],
    [
      'a folder inside it',
      () => join(acmeRepo, 'agents'),
      /agents is the managed repository of another team's factory/,
    ],
    [
      'a symlink to it (under FACTORY_REPO_ROOTS)',
      () => {
        const link = join(scratch, 'looks-like-mine');
        symlinkSync(acmeRepo, link);
        return link;
      },
      /is the managed repository of another team's factory/,
    ],
    [
      'a file:// URL of it',
      () => `file://${acmeRepo}`,
      /file:\/\/ URLs are refused: give the folder as a local path \(allowed under FACTORY_REPO_ROOTS\)/,
    ],
    [
      'DATA_DIR itself',
      () => t.dataDir,
      /is inside factoryd's DATA_DIR \(.*\), which holds its database, keys and the teams' managed repositories: register the team's own repository/,
    ],
    [
      'an ext:: transport that runs a command',
      () => `ext::sh -c touch% ${marker}`,
      /the git transport "ext::" is refused \(remote helpers run programs on this machine; ext:: runs any command\)/,
    ],
    [
      'a local path that does not exist',
      () => join(scratch, 'nowhere'),
      /nowhere does not exist: give a URL \(https:\/\/, ssh:\/\/, git:\/\/ or user@host:path\) or a local repository/,
    ],
    ['an http:// URL', () => 'http://example.com/acme/ops.git', /the transport http:\/\/ is refused/],
  ];

  it.each(refusals)('refuses %s, naming the rule', async (_what, repo, message) => {
    const r = await cli([
      'factories',
      'add',
      `try-${newUid().slice(0, 6)}`,
      '--repo',
      repo(),
      '--team',
      'evil',
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
  });

  it('refuses a local repository outside FACTORY_REPO_ROOTS, saying how to allow it', async () => {
    const roots = mkdtempSync(join(tmpdir(), 'factoryd-roots-'));
    try {
      const r = await cli(['factories', 'add', 'outside', '--repo', own.dir, '--team', 'evil'], {
        FACTORY_REPO_ROOTS: roots,
      });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(
        `${own.dir} is outside FACTORY_REPO_ROOTS for the team evil (${roots}): set FACTORY_REPO_ROOTS to allow local repositories under ${tmpdir()}`,
      );
      // With the variable set to cover it, the same repository registers.
      const ok = await cli(['factories', 'add', 'inside', '--repo', own.dir, '--team', 'evil', '--json']);
      expect(ok.code, ok.stderr).toBe(0);
    } finally {
      rmSync(roots, { recursive: true, force: true });
    }
  });

  it('registered none of the refused ones, and the ext:: command never ran', async () => {
    const list = JSON.parse((await cli(['factories', 'list', '--json'])).stdout).factories;
    expect(
      list.filter((f: { team: string }) => f.team === 'evil').map((f: { name: string }) => f.name),
    ).toEqual(['inside']);
    expect(existsSync(marker)).toBe(false);
  });

  /** Issue #32, 3: a root bound to one team (FACTORY_REPO_ROOTS=team=/folder) is that team's alone. */
  describe('a root bound to a team', () => {
    const roots = mkdtempSync(join(tmpdir(), 'factoryd-bound-roots-'));
    const [acmeRoot, evilRoot, shared] = ['acme', 'evil', 'shared'].map((d) => join(roots, d));
    const repoAt = (dir: string) => {
      mkdirSync(dir, { recursive: true });
      execFileSync('git', ['init', '--quiet', '--initial-branch=main'], { cwd: dir });
      writeFileSync(join(dir, 'factory.yaml'), 'schemaVersion: v1alpha1\nname: x\n');
      execFileSync('git', ['-c', 'user.name=A', '-c', 'user.email=a@x', 'add', '-A'], { cwd: dir });
      execFileSync('git', ['-c', 'user.name=A', '-c', 'user.email=a@x', 'commit', '-qm', 'x'], { cwd: dir });
      return dir;
    };
    const acmeSkills = repoAt(join(acmeRoot, 'skills'));
    const sharedAcme = repoAt(join(shared, 'acme', 'skills'));
    const sharedOther = repoAt(join(shared, 'common'));
    const evilOwn = repoAt(join(evilRoot, 'own'));
    const bound = `acme=${acmeRoot}:evil=${evilRoot}:${shared}:acme=${join(shared, 'acme')}`;
    const add = (team: string, repo: string) =>
      cli(['factories', 'add', `f-${newUid().slice(0, 6)}`, '--repo', repo, '--team', team], {
        FACTORY_REPO_ROOTS: bound,
      });
    const givenToAcme = (folder: string) =>
      new RegExp(
        `is under ${folder}, which FACTORY_REPO_ROOTS gives to the team acme alone: a team registers only repositories under its own roots \\(${evilRoot}, ${shared}\\)`,
      );
    afterAll(() => rmSync(roots, { recursive: true, force: true }));

    it("refuses evil a repository under acme's root, and says whose root it is", async () => {
      const r = await add('evil', acmeSkills);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(givenToAcme(acmeRoot));
    });

    it("refuses evil a link in its own root to acme's repository, and alternates into it", async () => {
      const link = join(evilRoot, 'looks-mine');
      symlinkSync(acmeSkills, link);
      expect((await add('evil', link)).stderr).toMatch(givenToAcme(acmeRoot));
      const borrowing = repoAt(join(evilRoot, 'borrowing'));
      writeFileSync(
        join(borrowing, '.git', 'objects', 'info', 'alternates'),
        join(acmeSkills, '.git', 'objects'),
      );
      const r = await add('evil', borrowing);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(
        /\(its git data at .*\) is under .*, which FACTORY_REPO_ROOTS gives to the team acme alone/,
      );
    });

    it("refuses evil acme's folder inside a shared root, and leaves it the rest of the shared root", async () => {
      expect((await add('evil', sharedAcme)).stderr).toMatch(givenToAcme(join(shared, 'acme')));
      expect((await add('evil', sharedOther)).code).toBe(0);
    });

    it('registers each team its own', async () => {
      expect((await add('acme', acmeSkills)).code).toBe(0);
      expect((await add('acme', sharedAcme)).code).toBe(0);
      expect((await add('evil', evilOwn)).code).toBe(0);
    });

    it('refuses a team with no root of its own, saying it has none', async () => {
      await t.newTeam('nobody');
      const r = await cli(['factories', 'add', 'x', '--repo', evilOwn, '--team', 'nobody'], {
        FACTORY_REPO_ROOTS: `evil=${evilRoot}`,
      });
      expect(r.stderr).toContain(
        `${evilOwn} is under ${evilRoot}, which FACTORY_REPO_ROOTS gives to the team evil alone: a team registers only repositories under its own roots (none set)`,
      );
    });
  });

  it("a row written straight into the database that points at acme's repository fails its apply, with the reason recorded", async () => {
    const evil = (await t.authRepo.findTeamByName('evil'))!;
    const uid = newUid();
    await t.service.db.execute(
      `INSERT INTO factories (uid, team_id, name, repo_url, branch) VALUES ($1, $2, 'by-hand', $3, 'main')`,
      [uid, evil.id, acmeRepo],
    );
    expect((await t.call('POST', `/api/v1/factory/${uid}/refresh`, undefined, evilKey)).status).toBe(202);
    const failed = await eventually(async () => {
      const res = await t.call('GET', `/api/v1/factory/${uid}/applies`, undefined, evilKey);
      return res.body.applies?.find((a: { result: string }) => a.result === 'failed');
    }, 'a failed apply of the hand-written row');
    expect(failed).toMatchObject({ reason: 'SourceRefused', revision: null });
    expect(failed.errors[0].message).toMatch(/is the managed repository of another team's factory/);
    const factory = (await t.call('GET', `/api/v1/factory/${uid}`, undefined, evilKey)).body;
    expect(factory).toMatchObject({ ready: false, reason: 'SourceRefused', last_applied_revision: null });
    // Nothing of acme's definition reached evil's factory: no foreman to dispatch to.
    expect((await t.call('POST', `/api/v1/factory/${uid}/runs`, { prompt: 'x' }, evilKey)).status).toBe(409);
  });

  it('a hand-written row pointing at DATA_DIR is refused by the poll too (not watched, its apply recorded)', async () => {
    const evil = (await t.authRepo.findTeamByName('evil'))!;
    const uid = newUid();
    await t.service.db.execute(
      `INSERT INTO factories (uid, team_id, name, repo_url, branch) VALUES ($1, $2, 'by-hand-2', $3, 'main')`,
      [uid, evil.id, t.dataDir],
    );
    await t.service.app.get(ReconcileScheduler).pollAll();
    const { applies } = (await t.call('GET', `/api/v1/factory/${uid}/applies`, undefined, evilKey)).body;
    expect(applies).toHaveLength(1);
    expect(applies[0]).toMatchObject({ result: 'failed', reason: 'SourceRefused' });
    expect(applies[0].errors[0].message).toMatch(/is inside factoryd's DATA_DIR/);
  });

  it('git itself refuses file:// and ext:: even when a source gets past the check', async () => {
    const source = new GitSource(t.dataDir, new GitRunner({ gitTimeoutSeconds: 60 }));
    for (const repoUrl of [`file://${acmeRepo}`, `ext::sh -c touch% ${marker}`])
      await expect(source.head({ id: newUid(), repoUrl, branch: 'main' })).rejects.toThrow(
        /transport '(file|ext)' not allowed/,
      );
    expect(existsSync(marker)).toBe(false);
  });
});
