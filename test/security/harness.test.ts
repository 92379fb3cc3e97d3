import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../../src/common/paths.js';
import { reachableCopy } from '../../src/common/shared-runtime.js';
import { EmbeddedPostgres } from '../../src/database/embedded-postgres.js';
import { loadSecretsKey } from '../../src/secrets/secrets-key.js';
import { packageProgramCommand } from '../../src/workers/launcher/harness-programs.js';
import { CLI, runCli } from '../support/cli.js';
import { createTestDatabase } from '../support/database.js';
import { eventually } from '../support/eventually.js';
import { bwrapMissing } from '../support/sandbox-check.js';
import { startServeProcess, type ServeProcess } from '../support/serve-process.js';

/**
 * A harness attacks the service that runs it (docs/security.md, "The harness sandbox"). The real
 * `factoryd serve` runs with an operator's environment (DATABASE_URL, SECRETS_KEY, DATA_DIR,
 * HARNESS_COMMAND, FACTORYD_API_KEY) and a DATA_DIR that holds a database cluster, a secrets key and
 * the default team's managed repository; its harness is test/security/probe-harness.mjs. A run of
 * the default team (the victim) holds an attachment; a run of another team (the attacker) tries to
 * reach all of it and reports what it got. One case per sandbox mode that can run here.
 */
// Copied where the harness's uid reaches it when the checkout keeps others out (harness-programs.ts).
const PROBE = packageProgramCommand('test/security', 'probe-harness.mjs');
const API_KEY_IN_ENV = 'fdk_worker_key_that_must_not_reach_a_harness';
const FORBIDDEN = ['DATABASE_URL', 'SECRETS_KEY', 'DATA_DIR', 'HARNESS_COMMAND', 'FACTORYD_API_KEY'];
const root = process.getuid?.() === 0;

let dataDir: string;
let env: Record<string, string>;
let dropDatabase: () => Promise<void>;
let attackerKey = '';
let adminKey = '';
const children: ChildProcess[] = [];

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'factoryd-security-'));
  chmodSync(dataDir, 0o755); // as root the embedded cluster runs as `postgres`, which must reach it
  // What a DATA_DIR holds: a cluster (its password in pg/cluster.json) and a generated secrets key.
  const cluster = new EmbeddedPostgres({ dir: join(dataDir, 'pg'), durable: false });
  await cluster.start();
  await cluster.stop();
  const key = loadSecretsKey({ dataDir } as Parameters<typeof loadSecretsKey>[0]);
  const db = await createTestDatabase();
  dropDatabase = db.drop;
  env = {
    PATH: process.env.PATH!,
    HOME: process.env.HOME ?? '/root',
    DATA_DIR: dataDir,
    DATABASE_URL: db.url,
    SECRETS_KEY: key.toString('base64'),
    HARNESS_COMMAND: PROBE,
    FACTORYD_API_KEY: API_KEY_IN_ENV,
  };
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
afterAll(async () => {
  await dropDatabase?.();
  rmSync(dataDir, { recursive: true, force: true });
});

/** A `factoryd serve` of these tests, with its API's URL. */
type Served = ServeProcess & { api: string };

/** `factoryd serve` with the operator's environment (only) and HARNESS_SANDBOX=`mode`. */
async function serve(
  mode: string,
  more: Record<string, string> = {},
): Promise<ServeProcess & { api: string }> {
  const served = await startServeProcess(
    { ...env, WORKER_CONCURRENCY: '2', HARNESS_SANDBOX: mode, ...more },
    { bareEnvironment: true },
  );
  children.push(served.child);
  if (!adminKey) {
    // The first start made the default team and printed its admin key (once); then the attacker's team.
    adminKey = served.adminKey;
    const team = await runCli(['teams', 'create', 'attacker', '--json'], { env });
    expect(team.code, team.stderr).toBe(0);
    const created = await runCli(['api-keys', 'create', '--team', 'attacker', '--json'], { env });
    expect(created.code, created.stderr).toBe(0);
    attackerKey = JSON.parse(created.stdout).key;
  }
  return { ...served, api: `${served.url}/api/v1` };
}

async function call(api: string, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${api}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await res.json()) as any;
}

const messages = async (api: string, key: string, runId: string): Promise<string[]> =>
  (await call(api, key, 'GET', `/agent/runs/${runId}/conversation`)).messages
    .map((m: { text?: string }) => m.text)
    .filter(Boolean);

/** What the probe reported from a run of the attacker's team, given the victim's run to go after. */
async function attack(s: Served): Promise<{ found: any; victimWorkspace: string; victimRepo: string }> {
  const victim = await call(s.api, adminKey, 'POST', '/agent/runs', {
    prompt: 'VICTIM',
    attachments: [{ file_name: 'secret.txt', data: Buffer.from('victim-secret').toString('base64') }],
  });
  const victimWorkspace = (
    await eventually(
      async () => (await messages(s.api, adminKey, victim.run_id)).find((m) => m.startsWith('workspace ')),
      "the victim's harness to say its workspace",
    )
  ).slice('workspace '.length);
  const victimRepo = join(dataDir, 'factories', 'example');
  expect(existsSync(join(victimRepo, '.git'))).toBe(true);
  const params = {
    service_pid: s.child.pid,
    data_dir: dataDir,
    victim_workspace: victimWorkspace,
    victim_repo: victimRepo,
  };
  const run = await call(s.api, attackerKey, 'POST', '/agent/runs', {
    prompt: `ATTACK ${JSON.stringify(params)}`,
  });
  const report = await eventually(
    async () => (await messages(s.api, attackerKey, run.run_id)).find((m) => m.startsWith('PROBE ')),
    'the probe to report',
  );
  await call(s.api, adminKey, 'POST', `/agent/runs/${victim.run_id}/cancel`);
  return { found: JSON.parse(report.slice('PROBE '.length)), victimWorkspace, victimRepo };
}

/** Every reach a harness must not have, whatever the mode: all of them in one assertion, to see each one. */
function expectNothingReached(found: any, victimWorkspace: string, victimRepo: string): void {
  const victimName = victimWorkspace.split('/').at(-1)!;
  const reads = [
    'service_environ',
    'other_environ',
    'secrets_key',
    'pg_cluster',
    'pg_data',
    'victim_attachment',
    'victim_by_proc_cwd',
    'repo_write',
    'repo_hook',
  ];
  // A listing, where one works at all, must show none of the service's files and no other run's workspace.
  const listings = ['list_data_dir', 'list_worker_folder', 'list_workspace_root'];
  const reached = [
    ...found.env.filter((n: string) => FORBIDDEN.includes(n)).map((n: string) => `env ${n}`),
    ...reads.filter((r) => found[r].ok).map((r) => `${r}: ${found[r].got}`),
    ...listings
      .filter((l) => found[l].ok && new RegExp(`secrets|pg|factories|${victimName}`).test(found[l].got))
      .map((l) => `${l}: ${found[l].got}`),
    ...(existsSync(join(victimRepo, 'pwned.txt')) ? ['pwned.txt in the repository'] : []),
    ...(existsSync(join(victimRepo, '.git', 'hooks', 'post-commit')) ? ['a post-commit hook'] : []),
  ];
  expect(reached).toEqual([]);
  expect(found.env).toContain('FACTORYD_RUN_ID'); // the run's own variables are there
}

describe('a harness cannot reach the service, its data or other runs', () => {
  const noBwrap = bwrapMissing();
  it.skipIf(noBwrap !== undefined)(`in bwrap ${noBwrap ? `(skipped: ${noBwrap})` : ''}`, async () => {
    const s = await serve('bwrap');
    const { found, victimWorkspace, victimRepo } = await attack(s);
    expectNothingReached(found, victimWorkspace, victimRepo);
    // Its own PID namespace: not even the service is in its /proc.
    expect(found.service_in_proc.ok).toBe(false);
    expect(found.pids_seen).toBeLessThan(10);
    expect(s.output()).toMatch(/harness sandbox: bwrap/);
    await s.stop();
  });

  it.skipIf(!root)(
    `as an unprivileged user ${root ? '' : '(skipped: the tests do not run as root)'}`,
    async () => {
      const s = await serve('user');
      const { found, victimWorkspace, victimRepo } = await attack(s);
      expectNothingReached(found, victimWorkspace, victimRepo);
      expect(s.output()).toMatch(/harness sandbox: user, each harness as a uid of its own/);
      await s.stop();
    },
  );

  // Unconfined, the attacker's harness would read the secrets key and every team's data (the `none`
  // case of test/security/network.test.ts shows what it reaches): such a service runs no harness once
  // it holds two teams. The run is not lost: a start that confines harnesses takes it.
  const confined = noBwrap === undefined ? 'bwrap' : root ? 'user' : undefined;
  it.skipIf(!confined)(
    `in sandbox none, a service of two teams runs no harness; a confined start runs the queued one ${confined ? '' : '(skipped: neither bwrap nor root here)'}`,
    async () => {
      const s = await serve('none'); // the attacker's team exists from here on
      const params = { service_pid: s.child.pid, data_dir: dataDir };
      const run = await call(s.api, attackerKey, 'POST', '/agent/runs', {
        prompt: `ATTACK ${JSON.stringify(params)}`,
      });
      // Made after the second team, the run meets only refused claims, and says why it waits.
      const waiting = await eventually(async () => {
        const r = await call(s.api, attackerKey, 'GET', `/agent/runs/${run.run_id}`);
        return r.status_message && r;
      }, 'the waiting run to say why');
      expect(waiting.state).toBe('QUEUED');
      expect(waiting.status_message.message).toMatch(/^Waiting: the service’s own workers run no harness/);
      expect(s.output()).toContain(
        'service-hosted workers take no run: their harnesses would run unconfined',
      );
      expect(await messages(s.api, attackerKey, run.run_id)).toEqual([]);
      await s.stop();

      const c = await serve(confined!);
      const report = await eventually(
        async () => (await messages(c.api, attackerKey, run.run_id)).find((m) => m.startsWith('PROBE ')),
        'the queued run to go in the confined start',
      );
      const found = JSON.parse(report.slice('PROBE '.length));
      expect([found.secrets_key.ok, found.pg_cluster.ok]).toEqual([false, false]);
      const ended = await eventually(async () => {
        const r = await call(c.api, attackerKey, 'GET', `/agent/runs/${run.run_id}`);
        return r.state === 'SUCCEEDED' && r;
      }, 'the run to end');
      expect(ended.status_message?.message ?? '').not.toMatch(/^Waiting/);
      expect(c.output()).not.toContain('service-hosted workers take no run');
      await c.stop();
    },
  );

  it("a self-hosted worker's harness gets neither its FACTORYD_API_KEY nor its --api-key", async () => {
    const s = await serve('none');
    const created = await runCli(
      [
        'api-keys',
        'create',
        '--team',
        'default',
        '--scopes',
        'workers',
        '--worker-host',
        'build-box',
        '--json',
      ],
      { env },
    );
    expect(created.code, created.stderr).toBe(0);
    const workerKey: string = JSON.parse(created.stdout).key;
    const worker = spawn(
      process.execPath,
      [CLI, 'worker', '--worker-host', 'build-box', '--api', s.api, '--api-key', workerKey],
      { env: { ...env, FACTORYD_API_KEY: workerKey } },
    );
    children.push(worker);
    let out = '';
    worker.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const params = { worker_pid: worker.pid };
    const run = await call(s.api, adminKey, 'POST', '/agent/runs', {
      prompt: `ATTACK ${JSON.stringify(params)}`,
      config: { worker_host: 'build-box' },
    });
    const report = await eventually(
      async () => (await messages(s.api, adminKey, run.run_id)).find((m) => m.startsWith('PROBE ')),
      "the self-hosted worker's probe to report",
      { timeoutMs: 30_000 },
    );
    const found = JSON.parse(report.slice('PROBE '.length));
    expect(found.env.filter((n: string) => FORBIDDEN.includes(n))).toEqual([]);
    expect(report).not.toContain(workerKey);
    for (const reach of ['worker_environ', 'worker_cmdline'])
      if (found[reach].ok) expect(found[reach].got).not.toContain(workerKey);
    expect(out).toMatch(/harness sandbox: /);
    worker.kill('SIGTERM');
    await s.stop();
  });

  it.skipIf(noBwrap !== undefined)(
    'runs the Claude Code wrapper in bwrap, with the variable the operator allowed',
    async () => {
      const s = await serve('bwrap', {
        // examples/harness/claude-code.js's two lines, as a command: it imports dist/harnesses relative
        // to itself, which a copy made for a 0700 checkout as root does not have beside it.
        HARNESS_COMMAND: `FACTORYD_HARNESS_CLI="$CLAUDE_COMMAND" exec ${packageProgramCommand('dist/harnesses', 'claude.harness.js')}`,
        HARNESS_ENV_ALLOW: 'CLAUDE_COMMAND',
        CLAUDE_COMMAND: join(reachableCopy(fromRoot('test', 'fixtures'), 'test-fixtures'), 'fake-claude'),
      });
      const run = await call(s.api, adminKey, 'POST', '/agent/runs', { prompt: 'Triage' });
      const ended = await eventually(async () => {
        const r = await call(s.api, adminKey, 'GET', `/agent/runs/${run.run_id}`);
        return ['SUCCEEDED', 'FAILED', 'ERROR'].includes(r.state) && r;
      }, 'the run to end');
      expect(ended.state, JSON.stringify(ended.status_message)).toBe('SUCCEEDED');
      expect(await messages(s.api, adminKey, run.run_id)).toContain(
        'The issue is a crash in the API: labelled area/api.',
      );
      await s.stop();
    },
  );
});
