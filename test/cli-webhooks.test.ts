import { execFileSync, spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { CLI, runCli } from './support/cli.js';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { deliver } from './support/definitions.js';
import { eventually } from './support/eventually.js';
import { baseFactory, TestRepo } from './support/git-repo.js';
import { startTestService, type TestService } from './support/service.js';

/**
 * `factoryd webhooks …` driven as a person would from a shell: the spawned binary against a served
 * factoryd, with its output and exit status checked — the README walkthrough, step by step.
 */
describe('factoryd webhooks (spawned)', () => {
  let t: TestService;
  let env: Record<string, string>;
  const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-cli-webhooks-'));
  const cli = async (args: string[], stdin?: string, extraEnv: Record<string, string> = {}) =>
    runCli(args, { env: { ...env, ...extraEnv }, stdin });
  const json = async (args: string[], stdin?: string) => {
    const r = await cli([...args, '--json'], stdin);
    expect(r.code, `factoryd ${args.join(' ')}: ${r.stderr}`).toBe(0);
    return JSON.parse(r.stdout);
  };

  let hook: { uid: string; secret: string };
  let repo: string;

  beforeAll(async () => {
    const secretsKey = randomBytes(32).toString('base64');
    // One worker slot with the example harness: the run a delivery starts goes on to SUCCEEDED.
    t = await startTestService({
      WORKER_CONCURRENCY: '1',
      FACTORY_POLL_SECONDS: '3600',
      SECRETS_KEY: secretsKey,
    });
    env = {
      FACTORYD_API_URL: t.url,
      FACTORYD_API_KEY: t.adminKey,
      DATABASE_URL: t.databaseUrl,
      DATA_DIR: dataDir,
      SECRETS_KEY: secretsKey,
      LOG_LEVEL: 'silent',
    };
  });
  afterAll(async () => {
    await t?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates a managed factory and a token webhook whose secret is printed once', async () => {
    const factory = await json(['factories', 'add', 'ops', '--managed']);
    expect(factory).toMatchObject({ name: 'ops', managed: true, result: 'applied' });
    repo = factory.repository;

    const created = await cli(['webhooks', 'create', 'ci-alerts', '--factory', 'ops']);
    expect(created.code, created.stderr).toBe(0);
    const uid = /^Created webhook ci-alerts \((\w{22})\)\.$/m.exec(created.stdout)?.[1];
    const secret = /^ {2}([A-Za-z0-9]{40})$/m.exec(created.stdout)?.[1];
    expect(uid && secret, created.stdout).toBeTruthy();
    hook = { uid: uid!, secret: secret! };
    expect(created.stdout).toContain(`Senders POST to ${t.url}/webhooks/w/${uid} with the header`);
    // The factory by name, and the line the README's walkthrough pastes (issue #30, 8).
    expect(created.stdout).toMatch(new RegExp(`^Factory {5}ops \\(\\w{22}\\)$`, 'm'));
    expect(created.stdout.trimEnd().split('\n').at(-1)).toBe(`  export HOOK=${uid} SECRET=${secret}`);

    const list = await cli(['webhooks', 'list', '--factory', 'ops']);
    expect(list.stdout).toMatch(/^UID\s+NAME\s+AUTH\s+ENABLED\s+SECRET\s+URL/);
    expect(list.stdout).toMatch(new RegExp(`${uid}\\s+ci-alerts\\s+token\\s+yes\\s+webhook-ci-alerts`));
    const show = await cli(['webhooks', 'show', uid!]);
    expect(show.stdout).toMatch(/^Name\s+ci-alerts$/m);
    expect(show.stdout).toMatch(/^Factory\s+ops \(\w{22}\)$/m);
    expect(show.stdout).toContain('its value is never shown again');
    expect(`${list.stdout}${show.stdout}`).not.toContain(secret);

    // The change is a commit in the managed repository, authored by the key's principal.
    const log = execFileSync('git', ['log', '--format=%s'], { cwd: repo, encoding: 'utf8' });
    expect(log.split('\n')[0]).toMatch(/ci-alerts/);
  });

  it('a delivery sent with curl shows in the log, and the run its automation started finishes', async () => {
    // An automation on the new webhook, committed to the managed repository as a person would.
    mkdirSync(join(repo, 'automations', 'triage'), { recursive: true });
    writeFileSync(
      join(repo, 'automations', 'triage', 'automation.md'),
      `---\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [${hook.uid}]\n      payload:\n        level: [error]\n---\nTriage the CI alert.\n`,
    );
    const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' });
    git('add', '-A');
    git('-c', 'user.name=Ada', '-c', 'user.email=ada@example.com', 'commit', '-q', '-m', 'Triage CI alerts');
    const applied = await cli(['apply', '--factory', 'ops']);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(applied.stdout).toContain('+ automation triage');

    const sent = await deliver(t.url, `/webhooks/w/${hook.uid}`, '{"level":"error","job":"build"}', {
      authorization: `Bearer ${hook.secret}`,
    });
    expect(sent.status).toBe(202);

    const log = await cli(['webhooks', 'deliveries', hook.uid]);
    expect(log.code).toBe(0);
    expect(log.stdout).toMatch(/^RECEIVED\s+STATUS\s+DELIVERY ID\s+SIZE\s+FROM\s+ENTRY/);
    expect(log.stdout).toMatch(new RegExp(`Accepted\\s+${sent.body.delivery_id}\\s+31 B`));

    const [entry] = (await json(['webhooks', 'deliveries', hook.uid])).deliveries;
    const shown = await cli(['webhooks', 'deliveries', hook.uid, entry.id]);
    expect(shown.stdout).toContain('Runs started:');
    expect(shown.stdout).toContain('"job": "build"');
    const { runs } = await json(['webhooks', 'deliveries', hook.uid, entry.id]);
    expect(runs).toHaveLength(1);

    const watched = await cli(['runs', 'watch', runs[0].run_id, '--interval', '0.2']);
    expect(watched.code, watched.stderr).toBe(0);
    expect(watched.stdout).toMatch(/^State\s+SUCCEEDED$/m);
  });

  it('test-filter answers Would trigger / Would not trigger with each mismatching path', async () => {
    const yes = await cli(['webhooks', 'test-filter', hook.uid, '--automation', 'triage']);
    expect(yes.code, yes.stderr).toBe(0);
    expect(yes.stdout).toMatch(/^Would trigger$/m);
    expect(yes.stdout).toMatch(/^Webhook check\s+pass/m);

    const no = await cli([
      'webhooks',
      'test-filter',
      hook.uid,
      '--filter',
      '{payload: {level: [warning], job: {exists: false}, team: [infra]}}',
    ]);
    expect(no.code, no.stderr).toBe(0);
    expect(no.stdout).toMatch(/^Would not trigger$/m);
    expect(no.stdout).toMatch(/^Payload check\s+FAIL/m);
    expect(no.stdout).toMatch(/^level\s+in\s+\["warning"\]\s+"error"$/m);
    expect(no.stdout).toMatch(/^job\s+exists\s+false\s+"build"$/m);
    expect(no.stdout).toMatch(/^team\s+in\s+\["infra"\]\s+\(missing\)$/m);

    const both = await cli(['webhooks', 'test-filter', hook.uid, '--automation', 'triage', '--filter', '{}']);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain('exactly one of --automation, --filter, --filter-file');
    const unknown = await cli(['webhooks', 'test-filter', hook.uid, '--automation', 'nope']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/^factoryd: 400 invalid_request: .*triage/);
    // The service reads the filter's text, as it reads automation files: a mistake by its line.
    const broken = await cli(['webhooks', 'test-filter', hook.uid, '--filter', 'payload:\n\tlevel: [error]']);
    expect(broken.code).not.toBe(0);
    expect(broken.stderr).toContain(
      'filter, line 2: not valid YAML: this line is indented with a tab, and YAML indents with spaces only',
    );
  });

  it('rotate cuts the old secret at once; disable and enable; delete answers senders 404', async () => {
    const path = `/webhooks/w/${hook.uid}`;
    const rotated = await json(['webhooks', 'rotate', hook.uid]);
    expect(rotated.secret).toMatch(/^[A-Za-z0-9]{40}$/);
    expect(rotated.secret).not.toBe(hook.secret);
    expect((await deliver(t.url, path, '{}', { authorization: `Bearer ${hook.secret}` })).status).toBe(401);
    const fresh = { authorization: `Bearer ${rotated.secret}` };
    expect((await deliver(t.url, path, '{"n":1}', fresh)).status).toBe(202);

    expect((await cli(['webhooks', 'disable', hook.uid])).stdout).toContain(`(${hook.uid}) is disabled.`);
    expect((await deliver(t.url, path, '{"n":2}', fresh)).status).toBe(404);
    expect((await cli(['webhooks', 'enable', hook.uid])).stdout).toContain('is enabled.');
    expect((await deliver(t.url, path, '{"n":3}', fresh)).status).toBe(202);

    const deleted = await cli(['webhooks', 'delete', hook.uid]);
    expect(deleted.code).toBe(0);
    expect((await deliver(t.url, path, '{"n":4}', fresh)).status).toBe(404);
    const list = await json(['webhooks', 'list', '--factory', 'ops', '--include-deleted']);
    expect(list.webhooks.find((w: { uid: string }) => w.uid === hook.uid)).toMatchObject({ deleted: true });
  });

  it('a provider-issued signing secret: created disabled, then set from stdin', async () => {
    const created = await cli([
      'webhooks',
      'create',
      'github',
      '--auth-mode',
      'signature',
      '--scheme',
      'github',
    ]);
    expect(created.code, created.stderr).toBe(0);
    const uid = /\((\w{22})\)/.exec(created.stdout)![1];
    expect(created.stdout).toContain(
      `Disabled until its signing secret is set: npx factoryd webhooks set-secret ${uid}`,
    );
    const set = await json(['webhooks', 'set-secret', uid], 'gh-issued-secret\n');
    expect(set.webhook).toMatchObject({ enabled: true, awaiting_secret: false });
    expect(set.secret).toBeUndefined();

    const body = '{"action":"opened"}';
    const signature = `sha256=${createHmac('sha256', 'gh-issued-secret').update(body).digest('hex')}`;
    const sent = await deliver(t.url, `/webhooks/w/${uid}`, body, {
      'x-hub-signature-256': signature,
      'x-github-delivery': 'delivery-1',
    });
    expect(sent.status).toBe(202);
  });

  it('deliveries --follow prints new deliveries as they arrive', async () => {
    const { webhook, secret } = await json(['webhooks', 'create', 'tail-me', '--factory', 'ops']);
    const child = spawn(
      process.execPath,
      [CLI, 'webhooks', 'deliveries', webhook.uid, '--follow', '--interval', '0.2', '--json'],
      {
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    try {
      // Each delivery is sent once the one before it is printed: the second one arrives while the
      // follower is already running, whenever it started.
      for (const n of [1, 2]) {
        const sent = await deliver(t.url, `/webhooks/w/${webhook.uid}`, JSON.stringify({ n }), {
          authorization: `Bearer ${secret}`,
        });
        expect(sent.status).toBe(202);
        await eventually(() => out.split('\n').filter(Boolean).length >= n, `followed delivery ${n}`);
      }
      const lines = out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(lines.map((d: { status: string }) => d.status)).toEqual(['accepted', 'accepted']);
      expect(lines[0].received_at <= lines[1].received_at).toBe(true);
    } finally {
      child.kill('SIGINT');
    }
  });

  it('errors go to stderr with a non-zero exit: a repository-backed factory, a missing scope, an unknown webhook', async () => {
    // A factory whose team commits to its repository: its webhooks are files there.
    const source = new TestRepo();
    onTestFinished(() => source.remove());
    source.commit({
      ...baseFactory(),
      'webhooks/from-git.yaml': 'authMode: token\nsecretName: hook-secret\n',
    });
    await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'from-git');
    const backed = await t.service.app
      .get(DefinitionStore)
      .register({ teamId: t.defaultTeam.id, name: 'from-repo', repoUrl: source.dir, branch: 'main' });
    expect((await t.service.app.get(Reconciler).request(backed!.id)).errors).toEqual([]);
    const listed = await t.call('GET', `/api/v1/factory/${backed!.uid}/webhooks`);
    const file = listed.body.webhooks.find((w: { name: string }) => w.name === 'from-git');
    const conflict = await cli(['webhooks', 'disable', file.uid]);
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toMatch(/^factoryd: 409 conflict: .*webhooks\/from-git\.yaml/);
    expect(conflict.stdout).toBe('');

    const readOnly = await t.newKey([t.defaultTeam], ['runs:read']);
    const denied = await cli(['webhooks', 'create', 'x', '--factory', 'ops'], undefined, {
      FACTORYD_API_KEY: readOnly,
    });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('403 not_authorized');
    expect(denied.stderr).toContain('factory:manage');

    const missing = await cli(['webhooks', 'show', 'A'.repeat(22)]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^factoryd: 404 resource_not_found/);

    const several = await cli(['webhooks', 'list']);
    expect(several.code).toBe(1);
    expect(several.stderr).toMatch(/several factories; say which with --factory \(.*ops/);
  });
});
