import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newUid } from '../../src/common/ids.js';
import { runCli } from '../support/cli.js';
import { eventually } from '../support/eventually.js';
import { baseFactory, TestRepo } from '../support/git-repo.js';
import { serveOverHttps } from '../support/git-https.js';
import { startTestService, type TestService } from '../support/service.js';

/** The command lines of every process of the machine, as `ps` shows them to any user. */
function commandLines(): string[] {
  const lines: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p)))
    try {
      lines.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '));
    } catch {
      /* ended meanwhile */
    }
  return lines;
}

/**
 * Issue #32, 4: credentials in a repository URL showed in the process list during every fetch
 * (another team's harness read them with `ps`) and sat in clear in the database. A team registers an
 * https:// repository with its password in the URL; while each fetch is in flight, the test reads
 * every process's command line as another user of the machine would.
 */
describe("a repository's credentials stay out of command lines and the database (docs/security.md)", () => {
  let t: TestService;
  let key: string;
  const password = `pw-${newUid()}`;
  const repo = new TestRepo();
  const leaks: string[] = [];
  let server: Awaited<ReturnType<typeof serveOverHttps>>;
  const savedCa = process.env.GIT_SSL_CAINFO;
  const withPassword = () => server.url.replace('https://', `https://alice:${encodeURIComponent(password)}@`);
  const cli = (args: string[]) =>
    runCli(args, { env: { DATABASE_URL: t.databaseUrl, DATA_DIR: t.dataDir, LOG_LEVEL: 'silent' } });
  const appliedOnce = (uid: string) =>
    eventually(async () => {
      const { applies } = (await t.call('GET', `/api/v1/factory/${uid}/applies`, undefined, key)).body;
      return applies?.find((a: { result: string }) => a.result === 'applied');
    }, `an apply of ${uid}`);

  beforeAll(async () => {
    repo.commit({ ...baseFactory(), 'webhooks/ci.yaml': null });
    server = await serveOverHttps(repo, { username: 'alice', password }, () =>
      leaks.push(...commandLines().filter((l) => l.includes(password))),
    );
    process.env.GIT_SSL_CAINFO = server.caFile; // the service's git trusts the test's certificate
    t = await startTestService({ FACTORY_POLL_SECONDS: '3600' });
    ({ key } = await t.newTeam('acme'));
  });
  afterAll(async () => {
    await t?.stop();
    server?.stop();
    repo.remove();
    if (savedCa === undefined) delete process.env.GIT_SSL_CAINFO;
    else process.env.GIT_SSL_CAINFO = savedCa;
  });

  it('registers the URL without its credentials and keeps them as a named team secret, encrypted', async () => {
    const r = await cli([
      'factories',
      'add',
      'private',
      '--repo',
      withPassword(),
      '--team',
      'acme',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ repository: `${server.url}`, credentials_secret: 'git-credentials-private' });
    const [row] = await t.service.db.query(`SELECT * FROM factories WHERE uid = $1`, [out.uid]);
    expect(row).toMatchObject({ repo_url: server.url, repo_credentials_secret: 'git-credentials-private' });
    const stored = await t.service.db.query(
      `SELECT v.ciphertext FROM secret_versions v JOIN secrets s ON s.id = v.secret_id WHERE s.name = $1`,
      ['git-credentials-private'],
    );
    expect(stored).toHaveLength(1);
    expect(Buffer.from(stored[0].ciphertext).includes(password)).toBe(false);

    expect((await t.call('POST', `/api/v1/factory/${out.uid}/refresh`, undefined, key)).status).toBe(202);
    await appliedOnce(out.uid);
    expect(server.seen).toContain(`alice:${password}`); // git did authenticate, with the secret's value
    expect(leaks).toEqual([]);
  });

  it('moves the credentials of a row that still has them in its URL before its first fetch', async () => {
    const team = (await t.authRepo.findTeamByName('acme'))!;
    const uid = newUid();
    await t.service.db.execute(
      `INSERT INTO factories (uid, team_id, name, repo_url, branch) VALUES ($1, $2, 'legacy', $3, 'main')`,
      [uid, team.id, withPassword()],
    );
    const before = server.seen.length;
    expect((await t.call('POST', `/api/v1/factory/${uid}/refresh`, undefined, key)).status).toBe(202);
    await appliedOnce(uid);
    expect(leaks).toEqual([]);
    const [row] = await t.service.db.query(
      `SELECT repo_url, repo_credentials_secret FROM factories WHERE uid = $1`,
      [uid],
    );
    expect(row).toEqual({ repo_url: server.url, repo_credentials_secret: 'git-credentials-legacy' });
    expect(server.seen.slice(before)).toContain(`alice:${password}`);
    const shown = (await t.call('GET', `/api/v1/factory/${uid}`, undefined, key)).body;
    expect(JSON.stringify(shown)).not.toContain(password);
  });

  it('says which secret to set when it is gone, and git asks nothing of a terminal', async () => {
    const r = await cli(['factories', 'add', 'orphan', '--repo', withPassword(), '--team', 'acme', '--json']);
    const { uid } = JSON.parse(r.stdout);
    await t.service.db.execute(`DELETE FROM secrets WHERE name = 'git-credentials-orphan'`);
    expect((await t.call('POST', `/api/v1/factory/${uid}/refresh`, undefined, key)).status).toBe(202);
    const failed = await eventually(async () => {
      const { applies } = (await t.call('GET', `/api/v1/factory/${uid}/applies`, undefined, key)).body;
      return applies?.find((a: { result: string }) => a.result === 'failed');
    }, 'the failed fetch');
    expect(failed.reason).toBe('FetchFailed');
    expect(failed.errors[0].message).toContain(
      'the team secret git-credentials-orphan, which holds the credentials of the repository, does not exist: set it to USERNAME:PASSWORD (or a token alone) with `npx factoryd secrets set git-credentials-orphan --team acme`',
    );
  });

  it('refuses a password in an ssh:// URL (ssh runs in batch mode: a key, not a password)', async () => {
    const r = await cli([
      'factories',
      'add',
      'sshpw',
      '--repo',
      'ssh://git:pw@example.com/x.git',
      '--team',
      'acme',
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('an ssh:// URL may hold no password');
  });
});
