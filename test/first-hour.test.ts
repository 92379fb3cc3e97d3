import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../src/common/paths.js';
import { CLI, runCli } from './support/cli.js';
import { createTestDatabase } from './support/database.js';
import { eventually } from './support/eventually.js';
import { startServeProcess, type ServeProcess } from './support/serve-process.js';
import { startTestService, type TestService } from './support/service.js';

/**
 * A new user's first hour (issue #19), with the built `factoryd` as a child process: `npm start` in one
 * terminal, the CLI in another, the same folder (DATA_DIR), a port that is not 8080.
 */
const RULE = '─'.repeat(78);

describe('factoryd --version', () => {
  it('prints the version of package.json', async () => {
    const { version } = JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { version: string };
    const r = await runCli(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(version);
  });
});

describe('factoryd serve in one terminal, the CLI in another', () => {
  let db: { url: string; drop(): Promise<void> };
  let dataDir: string;
  let served: ServeProcess;
  let url: string;
  let adminKey: string;
  /** The CLI in "another terminal": the same DATA_DIR, nothing said about where the service listens. */
  const cli = (args: string[], env: Record<string, string> = {}) =>
    runCli(args, {
      env: { DATA_DIR: dataDir, FACTORYD_API_URL: '', PORT: '', FACTORYD_API_KEY: adminKey, ...env },
    });

  /** `serve` as a new user starts it: no inherited variables beyond PATH and HOME, this test's database and DATA_DIR. */
  const serveEnv = () => ({
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    FACTORY_POLL_SECONDS: '3600',
  });

  beforeAll(async () => {
    db = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'factoryd-first-hour-'));
    served = await startServeProcess(serveEnv(), { bareEnvironment: true });
    ({ url, adminKey } = served);
  });
  afterAll(async () => {
    served?.child.kill('SIGKILL');
    await db?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('ends its first-start banner with the admin key and the webhook secrets, also kept in a file only its owner reads', async () => {
    const out = served.output();
    const banner = out.split(RULE)[1];
    expect(banner).not.toMatch(/^\{/m); // a block of its own, not a JSON log line
    expect(banner).toContain(`export FACTORYD_API_KEY=${adminKey}`);
    expect(banner).toContain('first-start-credentials.txt (readable by you only)');
    expect(banner).toContain('npx factoryd api-keys create --team default');
    const secrets = [...banner.matchAll(/^ {2}(example-[\w-]+): (\S+)$/gm)].map((m) => [m[1], m[2]]);
    expect(secrets.map(([name]) => name).sort()).toEqual([
      'example-ci-token',
      'example-github-webhook',
      'example-pager-url-token',
    ]);

    const file = join(dataDir, 'first-start-credentials.txt');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const saved = readFileSync(file, 'utf8');
    expect(saved).toContain(`\nFACTORYD_API_KEY=${adminKey}\n`);
    for (const [name, value] of secrets) expect(saved).toContain(`\n${name}=${value}\n`);
    const res = await fetch(`${url}/api/v1/agent/runs`, { headers: { authorization: `Bearer ${adminKey}` } });
    expect(res.status).toBe(200);
  });

  it('records its address under DATA_DIR, and the CLI finds it there on its non-default port', async () => {
    expect(new URL(url).port).not.toBe('8080');
    expect(JSON.parse(readFileSync(join(dataDir, 'service.json'), 'utf8'))).toEqual({
      url,
      pid: served.child.pid,
      database: 'DATABASE_URL',
    });
    const created = await cli(['runs', 'create', '--prompt', 'Found by itself', '--json']);
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ state: 'QUEUED' });
  });

  it('validate checks the team secrets and webhook UIDs against the running service, or says precisely why not', async () => {
    // The example as seeded, on the UIDs the service assigned (examples/factory holds placeholders).
    const example = join(dataDir, 'factories', 'example');
    const checked = await cli(['validate', example], { DATABASE_URL: db.url });
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.stdout).toContain('checked against the running service: team default, factory example');
    expect(checked.stdout).not.toContain('skipped');

    const elsewhere = await cli(['validate', example], { DATABASE_URL: '' });
    expect(elsewhere.stdout).toContain(
      `skipped: team secrets (secretName) were not checked: the factoryd serve at ${url} uses DATABASE_URL: set the same DATABASE_URL here`,
    );
    const offline = await cli(['validate', example, '--offline'], { DATABASE_URL: db.url });
    expect(offline.stdout).toContain('were not checked: offline (--offline)');
  });

  it('validate says what to fix: the line of a YAML mistake in words, why a check was skipped, advice that works when pasted (issue #30, 3)', async () => {
    const broken = mkdtempSync(join(tmpdir(), 'factoryd-broken-'));
    try {
      cpSync(join(dataDir, 'factories', 'example'), broken, {
        recursive: true,
        filter: (from) => !from.endsWith('.git'),
      });
      // Line 7 (agentDefaults:) indented under the repositories list above it.
      const factoryYaml = readFileSync(join(broken, 'factory.yaml'), 'utf8').split('\n');
      expect(factoryYaml[6]).toBe('agentDefaults:');
      factoryYaml[6] = `    ${factoryYaml[6]}`;
      writeFileSync(join(broken, 'factory.yaml'), factoryYaml.join('\n'));
      const hook = join(broken, 'webhooks', 'ci-alerts.yaml');
      writeFileSync(hook, readFileSync(hook, 'utf8').replace('example-ci-token', 'missing-ci-token'));

      const r = await cli(['validate', broken], { DATABASE_URL: db.url });
      expect(r.code).toBe(1);
      expect(r.stderr.trim().split('\n')).toEqual([
        'factory.yaml:7: not valid YAML: this line is indented 4 spaces, deeper than line 6 above it (2), which already has its value: YAML reads this line as more of that value. Indent it like the keys it belongs with',
        'webhooks/ci-alerts.yaml:4: secret "missing-ci-token" does not exist in team default: create it with `npx factoryd secrets set missing-ci-token --team default --generate token`',
      ]);
      expect(r.stdout).toContain(
        'skipped: webhook UIDs in triggers were not checked: factory.yaml cannot be read (its error is above), so the factory to check against is unknown: name it with --factory NAME',
      );
      const named = await cli(['validate', broken, '--factory', 'nope'], { DATABASE_URL: db.url });
      expect(named.stdout).toContain(
        'were not checked: team default has no factory named nope (`npx factoryd factories list`; --factory NAME names another)',
      );
    } finally {
      rmSync(broken, { recursive: true, force: true });
    }
  });

  it('on SIGTERM says each stage as it ends and forgets its address; a record left by a dead process is ignored', async () => {
    expect(await served.stop()).toBe(0);
    const out = served.output();
    const stages = out.slice(out.indexOf('SIGTERM: shutting down'));
    expect(stages.split('\n').filter(Boolean)).toEqual([
      'SIGTERM: shutting down',
      'workers stopped',
      'HTTP drained and closed',
      'database connections closed',
      'factoryd stopped',
    ]);
    expect(existsSync(join(dataDir, 'service.json'))).toBe(false);

    // A killed serve leaves its record: the CLI looks past it, to http://127.0.0.1:$PORT.
    writeFileSync(join(dataDir, 'service.json'), JSON.stringify({ url, pid: await deadPid() }));
    const r = await cli(['runs', 'list'], { PORT: '9' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('cannot reach factoryd at http://127.0.0.1:9 ');
  });

  it('starts quietly: the banner within its first lines, a restart in under 20, requests at debug (issue #30, 4)', async () => {
    // The first start: a few lines of what matters (the sandbox, the network, a passwordless
    // database), then the banner; the requests the CLI made since are not in the log at info.
    const out = served.output();
    const before = out.slice(0, out.indexOf(RULE)).trim().split('\n');
    expect(before.length, before.join('\n')).toBeLessThanOrEqual(4);
    expect(out).not.toContain('request completed');
    expect(out).not.toContain('Mapped {');

    const again = await startServeProcess(serveEnv(), { bareEnvironment: true });
    try {
      const said = again.output();
      const upToBanner = said.slice(0, said.lastIndexOf(RULE) + RULE.length).split('\n');
      expect(upToBanner.length, said).toBeLessThan(20);
      expect((await fetch(`${again.url}/healthz`)).status).toBe(200);
      expect(again.output()).not.toContain('request completed');
    } finally {
      await again.stop();
    }
  });
});

describe('factoryd runs against a test service', () => {
  let t: TestService;
  let env: Record<string, string>;
  beforeAll(async () => {
    t = await startTestService();
    env = { FACTORYD_API_KEY: t.adminKey, FACTORYD_API_URL: '', DATA_DIR: t.dataDir };
  });
  afterAll(async () => t?.stop());

  it('--api is the service’s root URL; the API’s own URL (…/api/v1) means the same', async () => {
    for (const api of [t.url, `${t.url}/`, `${t.url}/api/v1`, `${t.url}/api/v1/`]) {
      const r = await runCli(['runs', 'list', '--json', '--api', api], { env });
      expect(r.code, `${api}: ${r.stderr}`).toBe(0);
    }
    const fromEnv = await runCli(['runs', 'list', '--json'], {
      env: { ...env, FACTORYD_API_URL: `${t.url}/api/v1` },
    });
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    for (const help of [
      ['runs', 'list', '--help'],
      ['worker', '--help'],
    ]) {
      // Read as words: the help wraps its column to the widest option's.
      expect((await runCli(help)).stdout.replace(/\s+/g, ' ')).toContain(
        'the service’s root URL, e.g. https://factoryd.example.com',
      );
    }
  });

  it('runs create without a prompt or a skill is refused before anything is sent', async () => {
    const before = (await t.call('GET', '/api/v1/agent/runs?limit=100')).body.runs.length;
    for (const stdin of ['', '  \n']) {
      const r = await runCli(['runs', 'create', '--api', t.url], { env, stdin });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('a run needs a prompt or a skill: --prompt TEXT');
    }
    expect((await t.call('GET', '/api/v1/agent/runs?limit=100')).body.runs.length).toBe(before);
  });

  it('runs create returns at once in a script, and follows the run on a terminal', async () => {
    const scripted = await runCli(['runs', 'create', '--api', t.url, '--prompt', 'In a script'], { env });
    expect(scripted.code, scripted.stderr).toBe(0);
    expect(scripted.stdout).toMatch(/^Started run \S+ \(QUEUED\)\.\n$/);

    // `script` gives the CLI a terminal; the run is cancelled so that the watch ends.
    const onTerminal = spawn(
      'script',
      [
        '-qec',
        `"${process.execPath}" "${CLI}" runs create --api ${t.url} --prompt "On a terminal"`,
        '/dev/null',
      ],
      { env: { ...process.env, ...env } },
    );
    let seen = '';
    onTerminal.stdout.on('data', (d: Buffer) => (seen += d.toString()));
    const ended = new Promise<number | null>((resolve) => onTerminal.on('exit', resolve));
    const run = await eventually(async () => {
      const runs = (await t.call('GET', '/api/v1/agent/runs?q=On%20a%20terminal')).body.runs;
      return runs[0] as { run_id: string } | undefined;
    }, 'the run started on a terminal');
    await eventually(() => seen.includes(`${run.run_id}  QUEUED`), 'the live progress line');
    await t.call('POST', `/api/v1/agent/runs/${run.run_id}/cancel`);
    expect(await ended).toBe(1); // watch: exit 1 when the run did not succeed
    expect(seen).toContain('CANCELLED');
  });
});

/** The pid of a process that has ended. */
async function deadPid(): Promise<number> {
  const p = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => p.on('exit', resolve));
  return p.pid!;
}
