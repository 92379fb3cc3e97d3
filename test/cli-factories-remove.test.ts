import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, runCli } from './support/cli.js';
import { createTestDatabase } from './support/database.js';
import { eventually } from './support/eventually.js';
import { baseFactory, TestRepo } from './support/git-repo.js';
import { request, startServeProcess, type ServeProcess } from './support/serve-process.js';

/**
 * `factoryd factories add|remove` as a user runs them, against a `factoryd serve` on the same database
 * and DATA_DIR, whose log is read for the warning a failing factory gets.
 */
describe('factoryd factories remove, and the warning a failing factory logs', () => {
  let database: { url: string; drop(): Promise<void> };
  let serve: ServeProcess;
  const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-remove-data-'));
  const repos: TestRepo[] = [];
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(args, { env: { ...env, LOG_LEVEL: 'silent' } });

  beforeAll(async () => {
    database = await createTestDatabase();
    env = {
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      FACTORY_POLL_SECONDS: '1',
      FACTORY_REPO_ROOTS: tmpdir(),
    };
    serve = await startServeProcess({ ...env, LOG_LEVEL: 'warn' });
    const secret = await runCli(['secrets', 'set', 'hook-secret'], { env, stdin: 'the-token\n' });
    expect(secret.code, secret.stderr).toBe(0);
  });
  afterAll(async () => {
    await serve?.stop();
    await database?.drop();
    repos.forEach((r) => r.remove());
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** A local repository holding `files` on top of the base factory. */
  const repoWith = (files: Record<string, string> = {}) => {
    const repo = new TestRepo();
    repos.push(repo);
    repo.commit({ ...baseFactory(), ...files });
    return repo;
  };
  /** `factoryd …` on a terminal (a pseudo-terminal made by `script`), typing `typed`. */
  const atTerminal = (typed: string, ...args: string[]) =>
    new Promise<{ code: number | null; output: string }>((resolve, reject) => {
      const command = [process.execPath, CLI, ...args].map((a) => `'${a}'`).join(' ');
      const child = spawn('script', ['-qec', command, '/dev/null'], {
        env: { ...process.env, ...env, LOG_LEVEL: 'silent' },
      });
      let output = '';
      child.stdout.on('data', (c: Buffer) => (output += c.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, output }));
      child.stdin.end(typed);
    });
  const factory = async (name: string) => {
    const list = await cli('factories', 'list', '--json');
    return (
      JSON.parse(list.stdout) as {
        factories: Array<{ name: string; uid: string; ready: boolean; last_attempted_revision: string }>;
      }
    ).factories.find((f) => f.name === name);
  };
  /** The server's warning lines about `name`'s failed applies. */
  const warnings = (name: string) =>
    serve
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; factory?: string; msg: string })
      .filter((l) => l.factory === name && l.level === 40);

  it('refuses a repository that does not exist, saying why', async () => {
    const r = await cli('factories', 'add', 'bad', '--repo', '/nonexistent');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^factoryd: \/nonexistent does not exist: give .* that exists\n$/);
    expect(await factory('bad')).toBeUndefined();
  });

  it('logs one warning per failing revision, with the factory, the reason and the first error; not one per poll', async () => {
    const bad =
      '# ci\ndescription: ci\nsecretName: hook-secret\nenabled: true\nauthMode: token\nsignatureScheme: github\n';
    const repo = repoWith({ 'webhooks/ci.yaml': bad });
    expect((await cli('factories', 'add', 'broken', '--repo', repo.dir)).code).toBe(0);
    const [line] = await eventually(() => {
      const lines = warnings('broken');
      return lines.length ? lines : undefined;
    }, 'the warning');
    expect(line.msg).toBe(
      `factory broken (team default) failed to apply: ValidationFailed: 1 error at ${repo.git('rev-parse', 'HEAD').slice(0, 12)}; first: webhooks/ci.yaml:6: signatureScheme is only for authMode: signature (this webhook uses authMode: token); remove it or set authMode: signature`,
    );
    // Two factories registered one after the other are applied by two later polls, each of which
    // also reconciled `broken` at the same revision.
    for (const name of ['later-1', 'later-2']) {
      expect((await cli('factories', 'add', name, '--repo', repoWith().dir)).code).toBe(0);
      await eventually(async () => (await factory(name))?.ready, `${name} applied by a poll`);
    }
    expect(warnings('broken')).toHaveLength(1);
    // A new failing revision is a new warning.
    repo.commit({ 'webhooks/ci.yaml': `${bad}colour: red\n` });
    await eventually(() => warnings('broken').length === 2, 'the second revision’s warning');
  });

  it('removes a factory: its webhook answers 404, its repository is untouched', async () => {
    const repo = repoWith();
    expect((await cli('factories', 'add', 'going', '--repo', repo.dir)).code).toBe(0);
    const f = await eventually(async () => {
      const listed = await factory('going');
      return listed?.ready ? listed : undefined;
    }, 'applied');
    const hooks = await request('webhooks', `${serve.url}/api/v1/factory/${f.uid}/webhooks`, {
      key: serve.adminKey,
    });
    const hook = (hooks.body.webhooks as Array<{ uid: string }>)[0].uid;
    const deliver = () =>
      request('deliver', `${serve.url}/webhooks/w/${hook}`, {
        method: 'POST',
        headers: { authorization: 'Bearer the-token' },
        body: { action: 'opened' },
      });
    expect((await deliver()).status).toBe(202);

    const r = await cli('factories', 'remove', 'going', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      uid: f.uid,
      name: 'going',
      team: 'default',
      webhooks: 1,
      automations: 0,
      repository_deleted: null,
    });
    // Every replica's ingress drops the webhook when the removal's notification reaches it.
    await eventually(async () => (await deliver()).status === 404, 'the webhook answers 404');
    expect(await factory('going')).toBeUndefined();
    expect(existsSync(join(repo.dir, 'factory.yaml'))).toBe(true);
    expect((await cli('factories', 'remove', 'going')).stderr).toMatch(
      /team default has no factory going; see `npx factoryd factories list`/,
    );
  });

  it('deletes a managed factory’s repository only with --yes (no terminal to ask on)', async () => {
    expect((await cli('factories', 'add', 'owned', '--managed')).code).toBe(0);
    const dir = join(dataDir, 'factories', 'teams', 'default', 'owned');
    expect(existsSync(dir)).toBe(true);

    const refused = await cli('factories', 'remove', 'owned');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `owned is a managed factory: removing it deletes its repository ${dir}. Nothing was removed; rerun with --yes, or with --keep-repository to keep the repository`,
    );
    expect(await factory('owned')).toBeDefined();
    expect(existsSync(dir)).toBe(true);

    const removed = await cli('factories', 'remove', 'owned', '--yes');
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toContain(`Deleted its repository ${dir}.`);
    expect(existsSync(dir)).toBe(false);
    expect(await factory('owned')).toBeUndefined();
  });

  it('asks at a terminal before deleting a managed factory’s repository', async () => {
    expect((await cli('factories', 'add', 'asked', '--managed')).code).toBe(0);
    const dir = join(dataDir, 'factories', 'teams', 'default', 'asked');
    const no = await atTerminal('n\n', 'factories', 'remove', 'asked');
    expect(no.output).toContain(`Delete ${dir}, the only copy of asked's repository? [y/N]`);
    expect(no.code).toBe(1);
    expect(existsSync(dir)).toBe(true);
    expect(await factory('asked')).toBeDefined();

    const yes = await atTerminal('y\n', 'factories', 'remove', 'asked');
    expect(yes.code, yes.output).toBe(0);
    expect(existsSync(dir)).toBe(false);
    expect(await factory('asked')).toBeUndefined();
  });
});
