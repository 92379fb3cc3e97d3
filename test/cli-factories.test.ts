import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildProgram } from '../src/cli/program.js';
import { ReconcileScheduler } from '../src/reconciler/reconcile-scheduler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { CLI } from './support/cli.js';
import { eventually } from './support/eventually.js';
import { baseFactory, TestRepo } from './support/git-repo.js';
import { startTestService, type TestService } from './support/service.js';

/** Runs `factoryd …` in this process against the test database; output, exit status, thrown error. */
async function factoryd(args: string[], stdin?: string) {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((c) => ((stdout += String(c)), true));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((c) => ((stderr += String(c)), true));
  const realStdin = Object.getOwnPropertyDescriptor(process, 'stdin')!;
  if (stdin !== undefined)
    Object.defineProperty(process, 'stdin', {
      value: Readable.from([Buffer.from(stdin)]),
      configurable: true,
    });
  process.exitCode = 0;
  let error: Error | undefined;
  try {
    await buildProgram()
      .exitOverride()
      .parseAsync(['node', 'factoryd', ...args]);
  } catch (e) {
    error = e as Error;
  } finally {
    out.mockRestore();
    err.mockRestore();
    Object.defineProperty(process, 'stdin', realStdin);
  }
  const status = error ? 1 : Number(process.exitCode ?? 0);
  process.exitCode = 0;
  return { stdout, stderr, status, error };
}

describe('factoryd factories / secrets / plan / apply', () => {
  let t: TestService;
  const repo = new TestRepo();
  const saved = { ...process.env };
  const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-cli-data-'));

  beforeAll(async () => {
    const env = {
      FACTORY_POLL_SECONDS: '3600',
      SECRETS_KEY: randomBytes(32).toString('base64'),
      FACTORY_REPO_ROOTS: tmpdir(),
    };
    t = await startTestService(env);
    await t.service.app.get(ReconcileScheduler).firstPoll;
    Object.assign(process.env, env, { DATABASE_URL: t.databaseUrl, LOG_LEVEL: 'silent', DATA_DIR: dataDir });
  });
  afterAll(async () => {
    process.env = saved;
    await t?.stop();
    repo.remove();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('sets secrets from stdin or generated (shown once), and lists them without values', async () => {
    const piped = await factoryd(['secrets', 'set', 'hook-secret', '--json'], 'from-stdin\n');
    expect(piped.error).toBeUndefined();
    expect(JSON.parse(piped.stdout)).toEqual({ name: 'hook-secret', team: 'default', version: 1 });
    const generated = await factoryd(['secrets', 'set', 'pager', '--generate', 'url-safe', '--json']);
    const { value } = JSON.parse(generated.stdout);
    expect(value).toMatch(/^[A-Za-z0-9]{40}$/);
    const list = await factoryd(['secrets', 'list']);
    expect(list.stdout).toMatch(/hook-secret\s+1/);
    expect(list.stdout).not.toContain(value);
    expect(list.stdout).not.toContain('from-stdin');
    expect((await factoryd(['secrets', 'set', 'x', '--generate', 'nope'])).error?.message).toMatch(
      /--generate must be one of/,
    );
  });

  // util-linux's `script` gives the CLI a terminal, as a person pasting validate's advice has one.
  it.skipIf(!existsSync('/usr/bin/script'))(
    'at a terminal, secrets set asks for the value and echoes none of it: the advice `npx factoryd secrets set NAME --team T` works as pasted (issue #30, 3)',
    async () => {
      const terminal = spawn('/usr/bin/script', [
        '-qec',
        `${process.execPath} ${CLI} secrets set typed-secret --team default`,
        '/dev/null',
      ]);
      let screen = '';
      terminal.stdout.on('data', (c: Buffer) => (screen += c.toString()));
      const exit = new Promise<number | null>((resolve) => terminal.on('close', resolve));
      await eventually(() => screen.includes('(typed or pasted; not shown), then Enter: '), 'the prompt');
      terminal.stdin.write('typed-value-123\r');
      expect(await exit).toBe(0);
      expect(screen).toContain('Set secret typed-secret of team default (version 1).');
      expect(screen).not.toContain('typed-value-123');
      const stored = await t.service.app.get(SecretsService).current(t.defaultTeam.id, 'typed-secret');
      expect(stored?.value).toBe('typed-value-123');
    },
  );

  it('adds a factory, plans and applies it, lists it', async () => {
    repo.commit(baseFactory());
    const added = await factoryd(['factories', 'add', 'demo', '--repo', repo.dir, '--json']);
    expect(added.error).toBeUndefined();
    expect(JSON.parse(added.stdout)).toMatchObject({ name: 'demo', team: 'default', branch: 'main' });
    expect((await factoryd(['factories', 'add', 'demo', '--repo', repo.dir])).error?.message).toMatch(
      /already has a factory named demo/,
    );
    expect(
      (await factoryd(['factories', 'add', 'x', '--repo', repo.dir, '--team', 'nope'])).error?.message,
    ).toMatch(/no team nope/);
    // One set of rules for a repository the team commits to and a managed one; nothing is registered.
    for (const source of [['--repo', repo.dir], ['--managed']]) {
      expect((await factoryd(['factories', 'add', 'no/slash', ...source])).error?.message).toMatch(
        /a factory name is 1-64 letters, digits/,
      );
      expect(
        (await factoryd(['factories', 'add', 'branchy', '--branch', 'a..b', ...source])).error?.message,
      ).toMatch(/"a\.\.b" is not a valid branch name/);
    }
    const names = JSON.parse((await factoryd(['factories', 'list', '--json'])).stdout).factories.map(
      (f: { name: string }) => f.name,
    );
    expect(names).not.toContain('branchy');
    expect(names).not.toContain('no/slash');

    const plan = await factoryd(['plan', '--factory', 'demo']);
    expect(plan.stdout).toContain('+ webhook ci');
    expect(plan.stdout).toContain('+ agent lead');
    const applied = await factoryd(['apply', '--factory', 'demo', '--json']);
    expect(JSON.parse(applied.stdout).factories[0]).toMatchObject({
      name: 'demo',
      result: 'applied',
      errors: [],
    });
    const list = JSON.parse((await factoryd(['factories', 'list', '--json'])).stdout).factories;
    expect(list.find((f: any) => f.name === 'demo')).toMatchObject({ ready: true, reason: 'Applied' });
    expect((await factoryd(['plan', '--factory', 'demo'])).stdout).toContain('no changes');
  });

  it('adds a managed factory: factoryd makes, commits and applies its repository under DATA_DIR', async () => {
    const added = await factoryd(['factories', 'add', 'helpdesk', '--managed', '--json']);
    expect(added.error).toBeUndefined();
    const out = JSON.parse(added.stdout);
    const dir = join(dataDir, 'factories', 'teams', 'default', 'helpdesk');
    expect(out).toMatchObject({
      name: 'helpdesk',
      managed: true,
      repository: dir,
      result: 'applied',
      errors: [],
    });
    const log = execFileSync('git', ['log', '--format=%an|%s'], { cwd: dir, encoding: 'utf8' }).trim();
    expect(log).toBe(`${userInfo().username}|Create the managed factory helpdesk`);
    const f = (await t.call('GET', `/api/v1/factory/${out.uid}`)).body;
    expect(f).toMatchObject({ managed: true, ready: true, repository: dir });
    const readable = await factoryd(['factories', 'add', 'helpdesk2', '--managed']);
    expect(readable.stdout).toMatch(
      /^Created the managed factory helpdesk2 \(uid \w{22}\) for team default in .*: applied\./,
    );

    expect((await factoryd(['factories', 'add', 'helpdesk', '--managed'])).error?.message).toMatch(
      /already has a factory named helpdesk/,
    );
    expect(
      (await factoryd(['factories', 'add', 'both', '--managed', '--repo', repo.dir])).error?.message,
    ).toMatch(/either --repo URL_OR_PATH .* or --managed/);
    expect((await factoryd(['factories', 'add', 'neither'])).error?.message).toMatch(/either --repo/);
  });

  it('records a repository it cannot fetch as FetchFailed; apply exits 1', async () => {
    // Port 1 on loopback: nothing listens, so the fetch fails at once (a missing local path is refused earlier).
    await factoryd(['factories', 'add', 'ghost', '--repo', 'git://127.0.0.1:1/factory-repo.git']);
    const r = await factoryd(['apply', '--factory', 'ghost']);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/ghost @ \?: failed/);
    const list = JSON.parse((await factoryd(['factories', 'list', '--json'])).stdout).factories;
    expect(list.find((f: any) => f.name === 'ghost')).toMatchObject({ ready: false, reason: 'FetchFailed' });
  });
});
