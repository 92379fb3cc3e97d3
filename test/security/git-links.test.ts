import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newUid } from '../../src/common/ids.js';
import { runCli } from '../support/cli.js';
import { eventually } from '../support/eventually.js';
import { baseFactory, TestRepo } from '../support/git-repo.js';
import { startTestService, type TestService } from '../support/service.js';

const git = (dir: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=Acme', '-c', 'user.email=a@example.com', ...args], {
    cwd: dir,
    encoding: 'utf8',
  }).trim();

/**
 * Issue #32, 2: a local repository whose `.git` internals are links into another team's managed
 * repository passed the policy, and its factory applied the other team's head. Team evil builds its
 * repository under its root (FACTORY_REPO_ROOTS) with a link in each place git reads, and registers it
 * with the real `factoryd factories add`; then it swaps links into a repository already registered.
 * The same for a `.git` inside the git data (`.git/.git`), which is no link at all: git run in the
 * git directory takes it for the repository.
 */
describe('a local repository is read without following a link out of its git data (docs/security.md)', () => {
  let t: TestService;
  let evilKey: string;
  let acme: string;
  let acmeGit: string;
  const repos: TestRepo[] = [];
  const scratch = mkdtempSync(join(tmpdir(), 'factoryd-git-links-'));
  const cli = (args: string[]) =>
    runCli(args, { env: { DATABASE_URL: t.databaseUrl, DATA_DIR: t.dataDir, LOG_LEVEL: 'silent' } });

  /** A valid repository of evil's own, made by a person, under the root the tests use (tmpdir). */
  const evilRepo = () => {
    const repo = new TestRepo();
    repos.push(repo);
    repo.commit({ ...baseFactory(), 'webhooks/ci.yaml': null }); // valid without a team secret
    return repo;
  };
  const replaceWithLink = (path: string, target: string) => {
    rmSync(path, { recursive: true, force: true });
    symlinkSync(target, path);
  };

  beforeAll(async () => {
    t = await startTestService({ FACTORY_POLL_SECONDS: '3600' });
    await t.newTeam('acme');
    ({ key: evilKey } = await t.newTeam('evil'));
    const made = await cli(['factories', 'add', 'payroll', '--managed', '--team', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    acme = JSON.parse(made.stdout).repository;
    acmeGit = join(acme, '.git');
    // What evil is after: acme's agents and prompts.
    mkdirSync(join(acme, 'agents', 'lead'), { recursive: true });
    writeFileSync(
      join(acme, 'agents', 'lead', 'agent.md'),
      '---\nagentType: FOREMAN\n---\nAcme payroll lead.\n',
    );
    git(acme, 'add', '-A');
    git(acme, 'commit', '--quiet', '--allow-empty', '-m', 'acme secret work');
    git(acme, 'pack-refs', '--all', '--no-prune');
  });
  afterAll(async () => {
    await t?.stop();
    for (const r of repos) r.remove();
    rmSync(scratch, { recursive: true, force: true });
  });

  const linkRefused =
    /is a symbolic link \(to .*\): git would read whatever it leads to as this repository, another team's included/;
  const managedRefused = /is the managed repository of another team's factory/;
  const dotGitRefused =
    /\.git\/\.git is a \.git (file|folder) inside the git data of .*: git would take it for the repository/;
  /** git, run in `<repo>/.git`, finds `.git/.git` before the folder itself: a file naming acme's git directory. */
  const dotGitFile = (d: string) => writeFileSync(join(d, '.git', '.git'), `gitdir: ${acmeGit}\n`);
  /** Or a git directory of its own there, whose commondir is acme's. */
  const dotGitFolder = (d: string) => {
    const nested = join(d, '.git', '.git');
    mkdirSync(join(nested, 'refs'), { recursive: true });
    writeFileSync(join(nested, 'HEAD'), 'ref: refs/heads/main\n');
    writeFileSync(join(nested, 'commondir'), `${acmeGit}\n`);
  };
  const positions: Array<[string, (dir: string) => string | void, RegExp]> = [
    [
      '.git/objects',
      (d) => replaceWithLink(join(d, '.git', 'objects'), join(acmeGit, 'objects')),
      linkRefused,
    ],
    [
      '.git/refs/heads',
      (d) => replaceWithLink(join(d, '.git', 'refs', 'heads'), join(acmeGit, 'refs', 'heads')),
      linkRefused,
    ],
    [
      'a single ref file',
      (d) =>
        replaceWithLink(join(d, '.git', 'refs', 'heads', 'main'), join(acmeGit, 'refs', 'heads', 'main')),
      linkRefused,
    ],
    [
      '.git/packed-refs',
      (d) => symlinkSync(join(acmeGit, 'packed-refs'), join(d, '.git', 'packed-refs')),
      linkRefused,
    ],
    ['.git/HEAD', (d) => replaceWithLink(join(d, '.git', 'HEAD'), join(acmeGit, 'HEAD')), linkRefused],
    ['.git itself', (d) => replaceWithLink(join(d, '.git'), acmeGit), linkRefused],
    [
      'objects/info/alternates',
      (d) => writeFileSync(join(d, '.git', 'objects', 'info', 'alternates'), `${join(acmeGit, 'objects')}\n`),
      managedRefused,
    ],
    [
      'a link as objects/info/alternates',
      (d) => {
        const list = join(scratch, `alternates-${newUid()}`);
        writeFileSync(list, `${join(acmeGit, 'objects')}\n`);
        symlinkSync(list, join(d, '.git', 'objects', 'info', 'alternates'));
      },
      linkRefused,
    ],
    ['commondir', (d) => writeFileSync(join(d, '.git', 'commondir'), acmeGit), managedRefused],
    [
      'a .git file with gitdir:',
      (d) => {
        rmSync(join(d, '.git'), { recursive: true, force: true });
        writeFileSync(join(d, '.git'), `gitdir: ${acmeGit}\n`);
      },
      managedRefused,
    ],
    ['.git/.git, a file with gitdir: (no link at all)', dotGitFile, dotGitRefused],
    [".git/.git, a git directory whose commondir is acme's", dotGitFolder, dotGitRefused],
    [
      'the repository folder itself',
      () => {
        const link = join(scratch, `mine-${newUid()}`);
        symlinkSync(acme, link);
        return link;
      },
      managedRefused,
    ],
  ];

  it.each(positions)(
    'refuses at registration what git would follow at %s, naming it',
    async (_where, plant, message) => {
      const repo = evilRepo();
      const path = plant(repo.dir) ?? repo.dir;
      const r = await cli([
        'factories',
        'add',
        `try-${newUid().slice(0, 6)}`,
        '--repo',
        path,
        '--team',
        'evil',
      ]);
      expect(r.code, r.stdout).not.toBe(0);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toContain('Acme payroll lead');
    },
  );

  it('registered none of them', async () => {
    const list = JSON.parse((await cli(['factories', 'list', '--json'])).stdout).factories;
    expect(list.filter((f: { team: string }) => f.team === 'evil')).toEqual([]);
  });

  it("refuses the reconcile of a repository whose objects and heads became links after registration: nothing of acme's applied", async () => {
    const repo = evilRepo();
    const r = await cli(['factories', 'add', 'later', '--repo', repo.dir, '--team', 'evil', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const uid = JSON.parse(r.stdout).uid as string;
    expect((await t.call('POST', `/api/v1/factory/${uid}/refresh`, undefined, evilKey)).status).toBe(202);
    const first = await eventually(async () => {
      const { applies } = (await t.call('GET', `/api/v1/factory/${uid}/applies`, undefined, evilKey)).body;
      return applies?.find((a: { result: string }) => a.result === 'applied');
    }, "the first apply of evil's own repository");
    replaceWithLink(join(repo.dir, '.git', 'objects'), join(acmeGit, 'objects'));
    replaceWithLink(join(repo.dir, '.git', 'refs', 'heads'), join(acmeGit, 'refs', 'heads'));
    expect((await t.call('POST', `/api/v1/factory/${uid}/refresh`, undefined, evilKey)).status).toBe(202);
    const refused = await eventually(async () => {
      const { applies } = (await t.call('GET', `/api/v1/factory/${uid}/applies`, undefined, evilKey)).body;
      return applies?.find((a: { result: string }) => a.result === 'failed');
    }, 'the refused reconcile');
    expect(refused).toMatchObject({ reason: 'SourceRefused', revision: null });
    expect(refused.errors[0].message).toMatch(linkRefused);
    const factory = (await t.call('GET', `/api/v1/factory/${uid}`, undefined, evilKey)).body;
    expect(factory.last_applied_revision).toBe(first.revision);
    expect(JSON.stringify(factory)).not.toContain('Acme payroll lead');
  });

  it.each([
    ['a .git/.git file with gitdir:', dotGitFile],
    ["a .git/.git git directory whose commondir is acme's", dotGitFolder],
  ])(
    "refuses the reconcile of a registered repository given %s: nothing of acme's applied",
    async (_what, plant) => {
      const repo = evilRepo();
      const name = `dotgit-${newUid().slice(0, 6)}`;
      const r = await cli(['factories', 'add', name, '--repo', repo.dir, '--team', 'evil', '--json']);
      expect(r.code, r.stderr).toBe(0);
      const uid = JSON.parse(r.stdout).uid as string;
      expect((await t.call('POST', `/api/v1/factory/${uid}/refresh`, undefined, evilKey)).status).toBe(202);
      const first = await eventually(async () => {
        const { applies } = (await t.call('GET', `/api/v1/factory/${uid}/applies`, undefined, evilKey)).body;
        return applies?.find((a: { result: string }) => a.result === 'applied');
      }, "the first apply of evil's own repository");
      plant(repo.dir);
      // What git itself makes of it, run where the reconciler runs it without GIT_DIR: acme's head.
      expect(git(join(repo.dir, '.git'), 'log', '-1', '--format=%s')).toBe('acme secret work');
      expect((await t.call('POST', `/api/v1/factory/${uid}/refresh`, undefined, evilKey)).status).toBe(202);
      const refused = await eventually(async () => {
        const { applies } = (await t.call('GET', `/api/v1/factory/${uid}/applies`, undefined, evilKey)).body;
        return applies?.find((a: { result: string }) => a.result === 'failed');
      }, 'the refused reconcile');
      expect(refused).toMatchObject({ reason: 'SourceRefused', revision: null });
      expect(refused.errors[0].message).toMatch(dotGitRefused);
      const factory = (await t.call('GET', `/api/v1/factory/${uid}`, undefined, evilKey)).body;
      expect(factory.last_applied_revision).toBe(first.revision);
      expect(JSON.stringify(factory)).not.toContain('Acme payroll lead');
    },
  );

  it('a definition file committed as a symbolic link: `factoryd validate` and the reconciler give the same error (issue #32, 8)', async () => {
    const repo = evilRepo();
    const outside = join(scratch, `prompt-${newUid()}.md`);
    writeFileSync(outside, '---\ndescription: from outside the repository\n---\nOutside.\n');
    replaceWithLink(join(repo.dir, 'agents', 'fixer', 'agent.md'), outside);
    git(repo.dir, 'add', '-A');
    git(repo.dir, 'commit', '--quiet', '-m', 'link');
    const expected = {
      path: 'agents/fixer/agent.md',
      line: 1,
      message: expect.stringContaining(
        'the file is a symbolic link: a definition file must be a regular file',
      ),
    };
    const validated = await cli(['validate', repo.dir, '--offline', '--json']);
    expect(validated.code).toBe(1);
    expect(JSON.parse(validated.stdout).errors).toEqual([expected]);
    const r = await cli(['factories', 'add', 'linked', '--repo', repo.dir, '--team', 'evil', '--json']);
    const { uid } = JSON.parse(r.stdout);
    expect((await t.call('POST', `/api/v1/factory/${uid}/refresh`, undefined, evilKey)).status).toBe(202);
    const failed = await eventually(async () => {
      const { applies } = (await t.call('GET', `/api/v1/factory/${uid}/applies`, undefined, evilKey)).body;
      return applies?.find((a: { result: string }) => a.result === 'failed');
    }, 'the failed apply');
    expect(failed.errors).toEqual([expected]);
  });
});
