import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { GitRunner } from '../git/git-runner.js';
import { ManagedRepositories } from './managed-repositories.js';

/**
 * A person commits in a managed repository too (the README's walkthrough): where git knows no name
 * for them, that first `git commit` must not fail. Each case is a user whose HOME holds only the
 * `.gitconfig` given, with the machine's /etc/gitconfig out of the way.
 */
describe('a managed repository and the identity of the person who commits in it', () => {
  const root = mkdtempSync(join(tmpdir(), 'factoryd-managed-identity-'));
  const saved = { HOME: process.env.HOME, GIT_CONFIG_NOSYSTEM: process.env.GIT_CONFIG_NOSYSTEM };
  let n = 0;

  afterEach(() => {
    for (const [name, value] of Object.entries(saved))
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  /** A managed repository made by a service whose user has `gitconfig` as their only git config. */
  async function managedBy(
    gitconfig: string,
  ): Promise<{ dir: string; person: (...args: string[]) => string }> {
    const home = join(root, `home-${++n}`);
    mkdirSync(home);
    writeFileSync(join(home, '.gitconfig'), gitconfig);
    process.env.HOME = home;
    process.env.GIT_CONFIG_NOSYSTEM = '1';
    const repositories = new ManagedRepositories({ dataDir: root }, new GitRunner({ gitTimeoutSeconds: 30 }));
    const dir = join(root, `repo-${n}`);
    await repositories.init(
      dir,
      'main',
      { 'factory.yaml': 'name: ops\n' },
      { name: 'Op', email: 'op@x.invalid' },
      'First',
    );
    const env = { PATH: process.env.PATH!, HOME: home, GIT_CONFIG_NOSYSTEM: '1' };
    const person = (...args: string[]) =>
      execFileSync('git', args, { cwd: dir, env, encoding: 'utf8' }).trim();
    return { dir, person };
  }

  it('gets the login name when git knows none, so that a plain git commit works', async () => {
    // useConfigOnly: git may not make a name up from the host, as on a host without a domain.
    const { dir, person } = await managedBy('[user]\n\tuseConfigOnly = true\n');
    writeFileSync(join(dir, 'notes.md'), 'hello\n');
    person('add', '-A');
    person('commit', '--quiet', '-m', 'A note');
    const login = userInfo().username;
    expect(person('log', '-1', '--format=%an <%ae>')).toBe(`${login} <${login}@localhost>`);
    // factoryd's own first commit kept its author.
    expect(person('log', '--format=%an', 'HEAD~1')).toBe('Op');
  });

  it("leaves a person's configured identity alone", async () => {
    const { dir, person } = await managedBy('[user]\n\tname = Ada\n\temail = ada@example.com\n');
    expect(() => person('config', '--local', 'user.email')).toThrow();
    writeFileSync(join(dir, 'notes.md'), 'hello\n');
    person('add', '-A');
    person('commit', '--quiet', '-m', 'A note');
    expect(person('log', '-1', '--format=%an <%ae>')).toBe('Ada <ada@example.com>');
  });
});
