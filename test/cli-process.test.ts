import { execFile, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from './support/database.js';
import { startTestService, type TestService } from './support/service.js';
import { eventually } from './support/eventually.js';
import { baseFactory, TestRepo } from './support/git-repo.js';
import { startServeProcess, type ServeProcess } from './support/serve-process.js';

/**
 * The built `factoryd` binary as a user runs it: configuration errors, JSON logs without
 * credentials, graceful shutdown of the embedded PostgreSQL, and the teams / api-keys commands.
 */
const ROOT = resolve(import.meta.dirname, '..');
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const run = promisify(execFile);
const tempDirs: string[] = [];
const children: ChildProcess[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'factoryd-cli-test-'));
  chmodSync(dir, 0o755); // as root, the embedded server runs as `postgres`, which must reach it
  tempDirs.push(dir);
  return dir;
}

/** The environment of a child: nothing from the test's own (no DATABASE_URL leaks in by accident). */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, ...env };
}

/** `factoryd serve` in the project folder, with only PATH and HOME from here and `env`. */
async function serve(env: Record<string, string>): Promise<ServeProcess> {
  const s = await startServeProcess(env, { cwd: ROOT, bareEnvironment: true });
  children.push(s.child);
  return s;
}

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

describe('factoryd serve', () => {
  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['LOG_LEVEL', 'loud'],
  ])('stops with %s=%s: non-zero exit, one line naming the variable', async (name, value) => {
    const err = await run(process.execPath, [CLI, 'serve'], {
      cwd: ROOT,
      env: childEnv({ [name]: value, DATA_DIR: tempDir() }),
    }).catch((e: { code: number; stdout: string; stderr: string }) => e);
    expect('code' in err && err.code).not.toBe(0);
    expect((err as { code: number }).code).toBeGreaterThan(0);
    const lines = (err as { stderr: string }).stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^factoryd: configuration error: ${name}: `));
    expect((err as { stdout: string }).stdout).toBe('');
  });

  it('registers FACTORY_REPO for team default on a start; a name the team already has is said, not registered', async () => {
    const db = await createTestDatabase();
    const [first, second] = [new TestRepo(), new TestRepo()];
    try {
      // Two repositories of one factory name (test-factory).
      first.commit(baseFactory());
      second.commit(baseFactory());
      const env = {
        DATABASE_URL: db.url,
        DATA_DIR: tempDir(),
        FACTORY_POLL_SECONDS: '3600',
        WORKER_CONCURRENCY: '0',
      };
      const s = await serve({ ...env, FACTORY_REPO: first.dir });
      expect(s.output()).toContain(`factory: test-factory from ${first.dir} (main): `);
      expect(await s.stop()).toBe(0);
      const again = await serve({ ...env, FACTORY_REPO: second.dir });
      expect(again.output()).toContain(
        'factory: team default already has a factory named test-factory; FACTORY_REPO not registered',
      );
      expect(await again.stop()).toBe(0);
    } finally {
      first.remove();
      second.remove();
      await db.drop();
    }
  });

  it('writes JSON logs with request ids (at debug) and never the Authorization header or a URL token', async () => {
    const db = await createTestDatabase();
    try {
      const s = await serve({ DATABASE_URL: db.url, LOG_LEVEL: 'debug', DATA_DIR: tempDir() });
      expect(s.adminKey).toMatch(/\S{20,}/);
      const token = 'url-token-SECRET-4b1d9e7a';
      const ok = await fetch(`${s.url}/api/v1/agent/runs`, {
        headers: { authorization: `Bearer ${s.adminKey}`, 'x-request-id': 'req-log-test-1' },
      });
      expect(ok.status).toBe(200);
      const bad = await fetch(`${s.url}/api/v1/agent/runs`, {
        headers: { authorization: 'Bearer fd_wrong_secret_key_zzzzzzzz', cookie: 'session=cookie-SECRET' },
      });
      expect(bad.status).toBe(401);
      await fetch(`${s.url}/webhooks/w/AbCdEfGhIjKlMnOpQrStUv/${token}?x=1`, { method: 'POST', body: '{}' });
      await fetch(`${s.url}/webhooks/w/AbCdEfGhIjKlMnOpQrStUv/${token}`, { method: 'GET' });
      s.child.kill('SIGTERM');
      expect(await s.exited).toBe(0);

      const logLines = s
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'));
      const entries = logLines.map((l) => JSON.parse(l) as Record<string, any>);
      const requestLogs = entries.filter((e) => e.req);
      expect(requestLogs.length).toBeGreaterThanOrEqual(4);
      expect(requestLogs.find((e) => e.req.id === 'req-log-test-1')).toMatchObject({
        req: { method: 'GET', url: '/api/v1/agent/runs' },
        res: { statusCode: 200 },
      });
      const webhookLogs = requestLogs.filter((e) => String(e.req.url).startsWith('/webhooks/w/'));
      expect(webhookLogs.length).toBeGreaterThanOrEqual(2);
      for (const e of webhookLogs)
        expect(e.req.url).toMatch(/^\/webhooks\/w\/AbCdEfGhIjKlMnOpQrStUv\/\[REDACTED\]/);
      const all = logLines.join('\n');
      expect(all).not.toContain(s.adminKey);
      expect(all).not.toContain('fd_wrong_secret_key');
      expect(all).not.toContain(token);
      expect(all).not.toContain('cookie-SECRET');
      expect(all.toLowerCase()).not.toContain('bearer');
    } finally {
      await db.drop();
    }
  });

  it('never logs a webhook secret, given to or generated by the management API, even at trace level', async () => {
    const db = await createTestDatabase();
    try {
      const dataDir = tempDir();
      const env = { DATABASE_URL: db.url, DATA_DIR: dataDir, FACTORY_POLL_SECONDS: '3600' };
      const s = await serve({ ...env, LOG_LEVEL: 'trace' });
      const added = await run(process.execPath, [CLI, 'factories', 'add', 'logged', '--managed', '--json'], {
        env: childEnv({ ...env, LOG_LEVEL: 'silent' }),
      });
      const factory = JSON.parse(added.stdout) as { uid: string };
      const call = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`${s.url}/api/v1${path}`, {
          method,
          headers: {
            authorization: `Bearer ${s.adminKey}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as Record<string, any> };
      };
      const given = ['gh-SECRET-first-7c1e', 'gh-SECRET-second-9a2f', 'tok-SECRET-refused-3b8d'];
      const token = await call('POST', `/factory/${factory.uid}/webhooks`, { name: 'ci' });
      expect(token.status).toBe(201);
      const github = await call('POST', `/factory/${factory.uid}/webhooks`, {
        name: 'gh',
        auth_mode: 'signature',
        signature_scheme: 'github',
        secret: given[0],
      });
      expect(github.status).toBe(201);
      expect(
        (await call('POST', `/webhooks/${github.body.webhook.uid}/secret`, { secret: given[1] })).status,
      ).toBe(200);
      expect(
        (await call('POST', `/factory/${factory.uid}/webhooks`, { name: 'x', secret: given[2] })).status,
      ).toBe(400);
      const rotated = await call('POST', `/webhooks/${token.body.webhook.uid}/rotate`);
      expect(rotated.status).toBe(200);
      const sent = await fetch(`${s.url}/webhooks/w/${token.body.webhook.uid}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${rotated.body.secret}` },
        body: '{}',
      });
      expect(sent.status).toBe(202);
      s.child.kill('SIGTERM');
      expect(await s.exited).toBe(0);
      const out = s.output();
      // The requests that carried or returned the values were logged.
      expect(out).toContain(`"url":"/api/v1/factory/${factory.uid}/webhooks"`);
      expect(out).toContain(`"url":"/api/v1/webhooks/${token.body.webhook.uid}/rotate"`);
      for (const value of [...given, token.body.secret, rotated.body.secret])
        expect(out).not.toContain(value);
    } finally {
      await db.drop();
    }
  });

  // Three service starts, each migrating a new database: about 21 s alone, past the default minute
  // beside the rest of the suite on two cores.
  it(
    'stops on a SIGTERM sent the moment its banner appears (the signal is not lost as it takes over the signals)',
    { timeout: 180_000 },
    async () => {
      // startServeProcess resolves in the very data event that completes the banner, and stop() signals
      // at once: the process was between its starting and its running signal listeners then, and a
      // signal caught there was dropped, the process running on (seen in CI as a close that never ended).
      for (let start = 0; start < 3; start++) {
        const db = await createTestDatabase();
        try {
          const s = await startServeProcess({ DATABASE_URL: db.url, DATA_DIR: tempDir(), LOG_LEVEL: 'info' });
          expect(await s.stop()).toBe(0);
          expect(s.output()).toMatch(/SIGTERM: shutting down/);
        } finally {
          await db.drop();
        }
      }
    },
  );

  it('starts on the embedded PostgreSQL, refuses a second serve on its DATA_DIR, and on SIGTERM exits 0 with the database stopped', async () => {
    const dataDir = tempDir();
    const s = await serve({ DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
    const pidFile = join(dataDir, 'pg', 'data', 'postmaster.pid');
    expect(existsSync(pidFile)).toBe(true);
    const pgPid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    expect(isAlive(pgPid)).toBe(true);
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    // A second serve on the same DATA_DIR would run on this one's database and lose it when this one
    // stops: it refuses, in one line, and this one serves on.
    const second = await run(process.execPath, [CLI, 'serve'], {
      cwd: ROOT,
      env: childEnv({ DATA_DIR: dataDir, PORT: '0' }),
    }).catch((e: { code: number; stderr: string }) => e);
    expect((second as { code: number }).code).toBe(2);
    expect((second as { stderr: string }).stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        new RegExp(
          `^factoryd: another factoryd serve \\(pid ${s.child.pid}, ${s.url}\\) runs on the embedded database`,
        ),
      ),
    ]);
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    expect(s.output()).toMatch(/SIGTERM: shutting down/);
    expect(existsSync(pidFile)).toBe(false);
    expect(isAlive(pgPid)).toBe(false);
    await expect(fetch(`${s.url}/healthz`)).rejects.toThrow();
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('factoryd teams / api-keys', () => {
  let t: TestService;
  beforeAll(async () => {
    // Short, so the revoked key is refused quickly (the service trusts a verified key this long).
    t = await startTestService({ API_KEY_CACHE_SECONDS: '1' });
  });
  afterAll(async () => t?.stop());

  const cli = async (...args: string[]) => {
    const res = await run(process.execPath, [CLI, ...args], {
      cwd: ROOT,
      env: childEnv({ DATABASE_URL: t.service.databaseServer.url, DATA_DIR: tempDir() }),
    }).catch((e: { code: number; stdout: string; stderr: string }) => e);
    return { code: 'code' in res ? res.code : 0, stdout: res.stdout, stderr: res.stderr };
  };

  it('creates a team and a key that works over HTTP; list never prints it; revoke → 401', async () => {
    const team = await cli('teams', 'create', 'cli-team', '--json');
    expect(team.code, team.stderr).toBe(0);
    const teamJson = JSON.parse(team.stdout);
    expect(teamJson).toEqual({ uid: expect.any(String), name: 'cli-team' });

    const created = await cli(
      'api-keys',
      'create',
      '--team',
      'cli-team',
      '--scopes',
      'runs:read,runs:write',
      '--name',
      'ci',
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout) as { id: string; key: string; prefix: string };
    expect(key.key).toMatch(/\S{20,}/);

    const made = await t.call('POST', '/api/v1/agent/runs', { prompt: 'from a CLI key' }, key.key);
    expect(made.status).toBe(200);
    const listed = await t.call('GET', '/api/v1/agent/runs', undefined, key.key);
    expect(listed.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([made.body.run_id]);
    expect(listed.body.runs[0].creator.display_name).toBe('ci');

    for (const args of [
      ['api-keys', 'list'],
      ['api-keys', 'list', '--json'],
    ]) {
      const out = await cli(...args);
      expect(out.code).toBe(0);
      expect(out.stdout).toContain(key.id);
      expect(out.stdout).not.toContain(key.key);
    }

    const revoked = await cli('api-keys', 'revoke', key.id);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain(key.id);
    expect(revoked.stdout).toContain('API_KEY_CACHE_SECONDS');
    await eventually(
      async () => (await t.call('GET', '/api/v1/agent/runs', undefined, key.key)).status === 401,
      'the revoked key to be refused',
    );
    const again = await cli('api-keys', 'revoke', key.id);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/no live API key/);
  });

  it('creates a worker key bound to one host, lists the host, and refuses a worker key mixed with other scopes', async () => {
    const created = await cli(
      'api-keys',
      'create',
      '--team',
      'default',
      '--scopes',
      'workers',
      '--worker-host',
      'build-box',
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout) as { id: string; key: string; worker_host: string };
    expect(key.worker_host).toBe('build-box');
    const connect = await t.call('POST', '/api/v1/agent/workers/connect', { worker_id: 'w1' }, key.key);
    expect(connect.body).toEqual({
      worker_host: 'build-box',
      team: { uid: t.defaultTeam.uid, name: 'default' },
    });
    const listed = JSON.parse((await cli('api-keys', 'list', '--json')).stdout).api_keys;
    expect(listed.find((k: { id: string }) => k.id === key.id)).toMatchObject({
      scopes: ['workers'],
      worker_host: 'build-box',
    });
    expect((await cli('api-keys', 'list')).stdout).toMatch(/WORKER HOST[\s\S]*build-box/);

    for (const [args, message] of [
      [['--scopes', 'workers'], /needs --worker-host/],
      [['--scopes', 'workers,runs:read', '--worker-host', 'x'], /workers scope goes alone/],
      [['--scopes', 'runs:read', '--worker-host', 'x'], /only for a key with --scopes workers/],
    ] as const) {
      const res = await cli('api-keys', 'create', '--team', 'default', ...args);
      expect(res.code).not.toBe(0);
      expect(res.stderr).toMatch(message);
    }
  });

  it('fails with a message and non-zero exit for an unknown team or bad scope', async () => {
    const noTeam = await cli('api-keys', 'create', '--team', 'nope');
    expect(noTeam.code).not.toBe(0);
    expect(noTeam.stderr).toMatch(/no team nope/);
    const badScope = await cli('api-keys', 'create', '--team', 'default', '--scopes', 'runs:everything');
    expect(badScope.code).not.toBe(0);
    expect(badScope.stderr).toMatch(/runs:everything/);
    const dup = await cli('teams', 'create', 'default');
    expect(dup.code).not.toBe(0);
    expect(dup.stderr).toMatch(/exists already/);
  });
});
