import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG, type Config } from '../src/config/config.js';
import { Database } from '../src/database/database.js';
import { ManagedFactories } from '../src/management/managed-factories.js';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { packageProgramCommand } from '../src/workers/launcher/harness-programs.js';
import { serviceWorkspaceRoot } from '../src/workers/worker/service-workers.js';
import { baseFactory, serveOverGit, TestRepo } from './support/git-repo.js';
import { GitHttpServer } from './support/git-http-server.js';
import { eventually } from './support/eventually.js';
import { runIn, startTestService, type TestService } from './support/service.js';
import { twoTeamsNote, twoTeamsRefused } from './support/sandbox-check.js';

// Environments on real git servers on loopback: a public repository over git:// (`git daemon`), a
// private one over https (`git http-backend` behind basic auth). The service's own workers prepare
// each workspace (repository cache, clone, setup commands in the sandbox) before the harness
// (test/fixtures/environment-harness.mjs) reports what it finds.
const TOKEN = 'right-token-5b1e0c';
const WRONG = 'wrong-value-7f3a91';
const API_TOKEN = 'api-secret-c0ffee';

let t: TestService;
let http: GitHttpServer;
let daemon: { url: string; stop(): void };
let lib: TestRepo;
let app: TestRepo;
let libFirst: string;
const gitRoot = mkdtempSync(join(tmpdir(), 'factoryd-git-root-'));
const appBare = join(gitRoot, 'private', 'app.git');
/** A root of FACTORY_REPO_ROOTS bound to the team default (`default=…`); tmpdir stays shared. */
const boundRoot = mkdtempSync(join(tmpdir(), 'factoryd-env-bound-'));
let appUrl: string;
let other: { team: { id: string; name: string }; key: string };
const factories: TestRepo[] = [];

// Through the package's copy where the harness's uid can read it (a 0700 checkout as root).
const harness = packageProgramCommand('test/fixtures', 'environment-harness.mjs');

/** Registers a factory of `teamId` from `files` and applies it. */
async function factory(teamId: string, name: string, files: Record<string, string>): Promise<void> {
  const repo = new TestRepo();
  factories.push(repo);
  repo.commit(files);
  const f = await t.service.app
    .get(DefinitionStore)
    .register({ teamId, name, repoUrl: repo.dir, branch: 'main' });
  const out = await t.service.app.get(Reconciler).request(f!.id);
  expect(out.errors).toEqual([]);
}

/** A run in `environment` whose harness looks at what `ask` says; its end. */
async function run(environment: string, ask: Record<string, unknown>, key?: string) {
  const res = await t.call(
    'POST',
    '/api/v1/agent/runs',
    { prompt: JSON.stringify(ask), config: { environment_id: environment } },
    key,
  );
  expect(res.status).toBe(200);
  const ended = await runIn(t, res.body.run_id, ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'], key);
  const conversation = (
    await t.call('GET', `/api/v1/agent/runs/${ended.run_id}/conversation`, undefined, key)
  ).body;
  return {
    run: ended,
    found: ended.state === 'SUCCEEDED' ? JSON.parse(ended.status_message.message) : undefined,
    conversation,
  };
}

beforeAll(async () => {
  lib = new TestRepo();
  libFirst = lib.commit({ 'lib.txt': 'lib v1\n' });
  lib.commit({ 'lib.txt': 'lib v2\n' });
  daemon = await serveOverGit(lib);
  app = new TestRepo();
  app.commit({ 'README.md': 'app one' });
  mkdirSync(join(gitRoot, 'private'), { recursive: true });
  execFileSync('git', ['clone', '--quiet', '--bare', app.dir, appBare]);
  http = new GitHttpServer(gitRoot, { username: 'tester', password: TOKEN });
  appUrl = `${await http.start()}/private/app.git`;
  // The operator's CA for the https server, as an operator gives it to git.
  process.env.GIT_SSL_CAINFO = http.caFile;
  t = await startTestService({
    WORKER_CONCURRENCY: '2',
    HARNESS_COMMAND: harness,
    FACTORY_POLL_SECONDS: '3600',
    FACTORY_REPO_ROOTS: `${tmpdir()}:default=${boundRoot}`,
  });
  await t.service.app.get(ReconcileScheduler).firstPoll;
  const secrets = t.service.app.get(SecretsService);
  for (const [name, value] of [
    ['hook-secret', 'hook'],
    ['git-token', TOKEN],
    ['wrong-token', WRONG],
    ['api-token', API_TOKEN],
  ])
    await secrets.set(t.defaultTeam.id, name, value);
  await factory(t.defaultTeam.id, 'envs', {
    ...baseFactory(),
    'environments/full.yaml': [
      'description: both repositories, a setup, variables',
      'dockerImage: debian:bookworm',
      'repositories:',
      `  - url: ${daemon.url}`,
      '    path: lib',
      `    ref: ${libFirst}`,
      `  - url: ${appUrl}`,
      '    branch: main',
      '    credentialSecret: git-token',
      '    username: tester',
      'setupCommands:',
      '  - echo "built from $(cat app/README.md) as $(id -u)" > built.txt',
      '  - test -f lib/lib.txt && echo setup saw $GREETING',
      'env:',
      '  GREETING: hello',
      'secrets:',
      '  API_TOKEN: api-token',
      '',
    ].join('\n'),
    'environments/wrong.yaml': `repositories:\n  - url: ${appUrl}\n    credentialSecret: wrong-token\n    username: tester\n`,
    'environments/slow.yaml': 'setupCommands:\n  - sleep 600\n',
    'environments/failing.yaml':
      'setupCommands:\n  - echo one\n  - echo two; exit 3\n  - echo three > three.txt\n',
  });
  other = await t.newTeam('other');
  await t.service.app.get(SecretsService).set(other.team.id, 'their-hook', 'theirs');
  await factory(other.team.id, 'theirs', {
    ...baseFactory('their-hook'),
    // Team A's private repository, named without any credential of team B's.
    'environments/steal.yaml': `repositories:\n  - url: ${appUrl}\n`,
    'environments/look.yaml': 'env:\n  LOOKING: "yes"\n',
  });
}, 120_000);

afterAll(async () => {
  await t?.stop();
  await http?.stop();
  daemon?.stop();
  lib?.remove();
  app?.remove();
  for (const f of factories) f.remove();
  rmSync(gitRoot, { recursive: true, force: true });
  rmSync(boundRoot, { recursive: true, force: true });
  delete process.env.GIT_SSL_CAINFO;
});

describe.skipIf(twoTeamsRefused)(`environments prepare the workspace${twoTeamsNote}`, () => {
  it('clones a public and a private repository at their ref and branch, runs the setup there, sets variables and secrets', async () => {
    const {
      run: r,
      found,
      conversation,
    } = await run('full', {
      read: ['app/README.md', 'built.txt', 'lib/lib.txt'],
      env: ['GREETING', 'API_TOKEN', 'FACTORYD_GIT_TOKEN'],
      git: ['app', 'lib'],
    });
    expect(r.state).toBe('SUCCEEDED');
    expect(found.files['app/README.md']).toBe('app one');
    expect(found.files['lib/lib.txt']).toBe('lib v1\n'); // the ref, not the branch head
    // The setup command wrote into the workspace, as the harness's user (not the worker's root).
    expect(found.files['built.txt']).toMatch(/^built from app one as \d+\n$/);
    expect(found.files['built.txt']).not.toContain(' as 0\n');
    expect(found.env).toEqual({ GREETING: 'hello', API_TOKEN: API_TOKEN, FACTORYD_GIT_TOKEN: null });
    const appHead = execFileSync('git', ['-C', appBare, 'rev-parse', 'main'], { encoding: 'utf8' }).trim();
    expect(found.heads).toEqual({ app: appHead, lib: libFirst });
    // The clone's origin is the repository's URL, with no credential in it.
    expect(found.origins).toEqual({ app: appUrl, lib: daemon.url });
    // What the run used, as resolved, on the run: image, repositories at their commits, setup; secrets by name.
    expect(r.environment).toMatchObject({
      name: 'full',
      docker_image: 'debian:bookworm',
      repositories: [
        { url: daemon.url, path: 'lib', ref: libFirst, commit: libFirst },
        { url: appUrl, path: 'app', branch: 'main', credential_secret: 'git-token', commit: appHead },
      ],
      setup_commands: [expect.stringContaining('built.txt'), expect.stringContaining('setup saw')],
      env_vars: { GREETING: 'hello' },
      secrets: { API_TOKEN: 'api-token' },
    });
    const actions = conversation.messages.filter((m: any) => m.kind === 'environment_setup');
    expect(actions.map((a: any) => a.input.exit_code)).toEqual([0, 0]);
    // The setup's output is in the run's transcript.
    const transcript = await t.service.app
      .get(Database)
      .query<{ body: { text: string } }>(
        `SELECT body FROM run_events WHERE run_id = $1 AND type = 'transcript'`,
        [r.run_id],
      );
    expect(transcript.map((e) => e.body.text)).toContain('[setup] setup saw hello');
    for (const secret of [TOKEN, API_TOKEN])
      expect(JSON.stringify({ r: r.environment, conversation })).not.toContain(secret);
  });

  it('admits its https repository hosts through the egress proxy, whose addresses are still checked', async (ctx) => {
    const target = new URL(appUrl).host; // the https repository's host:port, on loopback here
    const bare = await run('no-such-environment', { proxy: [target] });
    if (bare.found.proxy[target] === 'no proxy')
      ctx.skip('harnesses here have no egress proxy (sandbox none)');
    // A run without the environment: the allow list refuses the host before any lookup…
    expect(bare.found.proxy[target]).toMatch(/^HTTP\/1\.1 403 [\s\S]*not in the egress allow list/);
    // …with it, the host is on the run's list (EgressRun.allow), and its address is what refuses it.
    const inEnv = await run('full', { proxy: [target] });
    expect(inEnv.found.proxy[target]).toMatch(
      /^HTTP\/1\.1 403 [\s\S]*127\.0\.0\.1 is a loopback, private, link-local or reserved address/,
    );
  });

  it('reuses the cache: a second run fetches nothing from the server, a new commit is fetched once', async () => {
    const before = http.fetches.get('private/app.git') ?? 0;
    expect(before).toBeGreaterThan(0);
    const again = await run('full', { git: ['app'] });
    expect(again.run.state).toBe('SUCCEEDED');
    expect(http.fetches.get('private/app.git')).toBe(before);
    // A new commit reaches the mirror with one fetch, and the next run is at it.
    const work = mkdtempSync(join(tmpdir(), 'factoryd-push-'));
    execFileSync('git', ['clone', '--quiet', appBare, work]);
    execFileSync('git', [
      '-C',
      work,
      '-c',
      'user.email=t@e',
      '-c',
      'user.name=T',
      'commit',
      '--quiet',
      '--allow-empty',
      '-m',
      'two',
    ]);
    execFileSync('git', ['-C', work, 'push', '--quiet', 'origin', 'HEAD:main']);
    const head = execFileSync('git', ['-C', work, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    rmSync(work, { recursive: true, force: true });
    const third = await run('full', { git: ['app'] });
    expect(third.found.heads.app).toBe(head);
    expect(http.fetches.get('private/app.git')).toBe(before + 1);
  });

  it('fails a run whose credential is wrong, saying which repository and secret, with no secret value', async () => {
    const { run: r, conversation } = await run('wrong', {});
    expect(r.state).toBe('FAILED');
    expect(r.status_message.error_code).toBe('environment_setup_failed');
    expect(r.status_message.message).toContain(`Cloning repository 1 (${appUrl}) failed`);
    expect(r.status_message.message).toContain('the team secret "wrong-token"');
    expect(r.status_message.message).toMatch(/Authentication failed|401/);
    expect(JSON.stringify({ r, conversation })).not.toContain(WRONG);
  });

  it('ends the run FAILED at the first setup command that fails, and the agent never starts', async () => {
    const { run: r, conversation } = await run('failing', {});
    expect(r.state).toBe('FAILED');
    expect(r.status_message).toMatchObject({ error_code: 'environment_setup_failed' });
    expect(r.status_message.message).toContain('Setup command 2 of 3 exited with status 3');
    expect(r.status_message.message).toContain('echo two; exit 3');
    const setup = conversation.messages.filter((m: any) => m.kind === 'environment_setup');
    expect(setup.map((a: any) => [a.input.index, a.input.exit_code])).toEqual([
      [0, 0],
      [1, 3],
    ]);
    // No third command, no harness: nothing but the setup's own output and actions.
    expect(JSON.stringify(conversation)).not.toContain('three');
    expect(conversation.messages.some((m: any) => m.type === 'message' && m.role !== 'user')).toBe(false);
  });
});

describe.skipIf(twoTeamsRefused)(`a cancel during the setup${twoTeamsNote}`, () => {
  it('stops the setup command at once and the run ends CANCELLED', async () => {
    const res = await t.call('POST', '/api/v1/agent/runs', {
      prompt: '{}',
      config: { environment_id: 'slow' },
    });
    const id = res.body.run_id as string;
    await runIn(t, id, ['INPROGRESS', 'CLAIMED']);
    const sleeping = () => execFileSync('pgrep', ['-f', '^sleep 600$'], { encoding: 'utf8' }).trim();
    await eventually(() => {
      try {
        return sleeping().length > 0;
      } catch {
        return false;
      }
    }, 'the setup command running');
    expect((await t.call('POST', `/api/v1/agent/runs/${id}/cancel`)).status).toBe(200);
    expect((await runIn(t, id, ['CANCELLED', 'FAILED', 'SUCCEEDED', 'ERROR'])).state).toBe('CANCELLED');
    await eventually(() => {
      try {
        sleeping();
        return false;
      } catch {
        return true;
      }
    }, 'the setup command gone');
  });
});

describe.skipIf(twoTeamsRefused)(`two teams on one worker${twoTeamsNote}`, () => {
  it("never reach each other's cached objects: not by naming the URL, not by path", async () => {
    const config = t.service.app.get<Config>(CONFIG);
    const cache = join(serviceWorkspaceRoot(config), '.repository-cache');
    const teamA = join(cache, 'teams', t.defaultTeam.id);
    // The cache does hold team A's mirror of the private repository (the earlier runs fetched it).
    expect(existsSync(teamA) && readdirSync(teamA).some((n) => n.endsWith('.git'))).toBe(true);
    const refusedBefore = http.refused;
    // Team B names team A's private URL: it is fetched with team B's credentials (none), not from A's mirror.
    const steal = await run('steal', {}, other.key);
    expect(steal.run.state).toBe('FAILED');
    expect(steal.run.status_message.error_code).toBe('environment_setup_failed');
    expect(http.refused).toBeGreaterThan(refusedBefore);
    // Team B's harness looks for team A's objects by path.
    const look = await run(
      'look',
      { probe: [teamA, cache, serviceWorkspaceRoot(config), config.dataDir], env: ['LOOKING'] },
      other.key,
    );
    expect(look.run.state).toBe('SUCCEEDED');
    expect(look.found.env.LOOKING).toBe('yes');
    for (const path of [teamA, cache]) expect(typeof look.found.probe[path]).toBe('string'); // an error: not reachable
    // Outside bwrap (HARNESS_SANDBOX=user), a harness runs as a uid of its own: the cache is 0700.
    if (process.getuid?.() === 0)
      expect(spawnSync('/bin/ls', [teamA], { uid: 65534, gid: 65534 }).stderr.toString()).toContain(
        'Permission denied',
      );
    const seen = Object.values(look.found.probe).flatMap((v) => (Array.isArray(v) ? v : []));
    expect(seen.filter((p: string) => p.includes('.repository-cache') || p.endsWith('.pack'))).toEqual([]);
  });
});

describe.skipIf(twoTeamsRefused)(
  `local repositories an environment names: the policy of factories' repositories (issue #32, 2)${twoTeamsNote}`,
  () => {
    const SECRET = 'Acme payroll secret';
    const TOOLS = 'acme tools, bound root';
    const scratch = mkdtempSync(join(tmpdir(), 'factoryd-env-raid-'));
    const gitIn = (dir: string, ...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.com', ...args], {
        cwd: dir,
        encoding: 'utf8',
      }).trim();
    /** A repository of team other's own, under the shared root, with what `plant` does to it. */
    const evilRepo = (plant: (gitDir: string) => void) => {
      const repo = new TestRepo();
      factories.push(repo);
      repo.commit({ 'evil.txt': 'evil own\n' });
      plant(join(repo.dir, '.git'));
      return repo.dir;
    };
    /** A factory of `teamId` with nothing but these environments, each a local repository at `path: repo`. */
    const environments = (teamId: string, name: string, urls: Record<string, string>) =>
      factory(teamId, name, {
        'factory.yaml': `schemaVersion: v1alpha1\nname: ${name}\ndescription: local repositories\n`,
        [`agents/${name}-lead/agent.md`]: '---\nagentType: FOREMAN\ndescription: Leads\n---\nLead.\n',
        ...Object.fromEntries(
          Object.entries(urls).map(([env, url]) => [
            `environments/${env}.yaml`,
            `repositories:\n  - url: ${url}\n    path: repo\n`,
          ]),
        ),
      });
    let acme: string;
    let acmeHead: string;
    let tools: string;
    let own: string;
    let acmeGit: string;
    const managed =
      /is the managed repository of another team's factory: a team names in its environments only its own repositories/;
    /** Each way team other names team default's repositories: how, the path (made in beforeAll), the refusal. */
    const raids: Array<[string, () => string, RegExp]> = [
      ["team default's managed repository, by its path", () => acme, managed],
      [
        'a folder under the shared root whose .git file names it',
        () => {
          const dir = join(scratch, 'gitfile');
          mkdirSync(dir);
          writeFileSync(join(dir, '.git'), `gitdir: ${acmeGit}\n`);
          return dir;
        },
        managed,
      ],
      [
        'a symbolic link to it under the shared root',
        () => {
          const link = join(scratch, 'link');
          symlinkSync(acme, link);
          return link;
        },
        managed,
      ],
      [
        'its own repository with a .git/.git file naming it',
        () => evilRepo((g) => writeFileSync(join(g, '.git'), `gitdir: ${acmeGit}\n`)),
        /\.git\/\.git is a \.git file inside the git data of .*: git would take it for the repository/,
      ],
      [
        'its own repository whose .git/objects and refs/heads are links into it',
        () =>
          evilRepo((g) => {
            for (const part of ['objects', join('refs', 'heads')]) {
              rmSync(join(g, part), { recursive: true, force: true });
              symlinkSync(join(acmeGit, part), join(g, part));
            }
          }),
        /is a symbolic link \(to .*\): git would read whatever it leads to as this repository/,
      ],
      [
        'a repository under the root bound to team default',
        () => tools,
        /which FACTORY_REPO_ROOTS gives to the team default alone: a team names in its environments only repositories under its own roots/,
      ],
    ];

    beforeAll(async () => {
      // Team default's managed repository, with what team other is after.
      const { factory: payroll } = await t.service.app.get(ManagedFactories).create({
        team: t.defaultTeam,
        name: 'payroll',
        branch: 'main',
        author: { name: 'Setup', email: 'setup@example.com' },
      });
      acme = payroll.repoUrl;
      writeFileSync(join(acme, 'PAYROLL.md'), `${SECRET}\n`);
      gitIn(acme, 'add', '-A');
      gitIn(acme, 'commit', '--quiet', '-m', 'payroll');
      acmeHead = gitIn(acme, 'rev-parse', 'HEAD');
      acmeGit = join(acme, '.git');
      // A repository under the root bound to team default.
      tools = join(boundRoot, 'tools');
      mkdirSync(tools);
      gitIn(tools, 'init', '--quiet', '--initial-branch=main');
      writeFileSync(join(tools, 'TOOLS.md'), `${TOOLS}\n`);
      gitIn(tools, 'add', '-A');
      gitIn(tools, 'commit', '--quiet', '-m', 'tools');
      own = evilRepo(() => undefined);
      await environments(
        other.team.id,
        'raid',
        Object.fromEntries([...raids.map(([, path], i) => [`raid-${i}`, path()]), ['mine', own]]),
      );
      await environments(t.defaultTeam.id, 'tooling', { tools });
    });
    afterAll(() => rmSync(scratch, { recursive: true, force: true }));

    it.each(raids.map(([how, , reason], i) => [how, i, reason] as const))(
      'refuses %s, with the rule and never its content',
      async (how, i, reason) => {
        const { run: r, conversation } = await run(`raid-${i}`, { read: ['repo/PAYROLL.md'] }, other.key);
        expect(r.state).toBe('FAILED');
        expect(r.status_message.error_code).toBe('environment_setup_failed');
        expect(r.status_message.message).toMatch(/^Repository 1 \(\/.*\) is refused: /);
        expect(r.status_message.message).toMatch(reason);
        const said = JSON.stringify({ r, conversation });
        for (const content of [SECRET, TOOLS, acmeHead]) expect(said).not.toContain(content);
      },
    );

    it("left nothing of team default's in team other's mirrors", () => {
      const config = t.service.app.get<Config>(CONFIG);
      const mirrors = join(serviceWorkspaceRoot(config), '.repository-cache', 'teams', other.team.id);
      for (const mirror of existsSync(mirrors) ? readdirSync(mirrors) : [])
        expect(spawnSync('git', ['-C', join(mirrors, mirror), 'cat-file', '-e', acmeHead]).status).not.toBe(
          0,
        );
    });

    it("clones a team's own local repositories: under the shared root, and under its bound root for its own team only", async () => {
      const mine = await run('mine', { read: ['repo/evil.txt'], git: ['repo'] }, other.key);
      expect(mine.run.state).toBe('SUCCEEDED');
      expect(mine.found.files['repo/evil.txt']).toBe('evil own\n');
      expect(mine.found.heads.repo).toBe(gitIn(own, 'rev-parse', 'HEAD'));
      const bound = await run('tools', { read: ['repo/TOOLS.md'] });
      expect(bound.run.state).toBe('SUCCEEDED');
      expect(bound.found.files['repo/TOOLS.md']).toBe(`${TOOLS}\n`);
      // A second run fetches into the mirror the first made (from the git directory checked again).
      gitIn(tools, 'commit', '--quiet', '--allow-empty', '-m', 'two');
      const again = await run('tools', { git: ['repo'] });
      expect(again.found.heads.repo).toBe(gitIn(tools, 'rev-parse', 'HEAD'));
    });
  },
);

describe.skipIf(twoTeamsRefused)(`environments over the API${twoTeamsNote}`, () => {
  it('creates, reads, replaces and deletes the file of a managed factory; a repository-backed one answers 409', async () => {
    const { factory } = await t.service.app.get(ManagedFactories).create({
      team: t.defaultTeam,
      name: 'managed-envs',
      branch: 'main',
      author: { name: 'Setup', email: 'setup@example.com' },
    });
    const created = await t.call('POST', '/api/v1/agent/environments', {
      name: 'api-env',
      factory_uid: factory.uid,
      docker_image: 'debian:bookworm',
      repositories: [{ url: daemon.url, path: 'lib' }],
      setup_commands: ['echo "api $A" > api.txt'],
      env_vars: { A: 'one' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      config: {
        name: 'api-env',
        docker_image: 'debian:bookworm',
        setup_commands: ['echo "api $A" > api.txt'],
      },
      factory_uid: factory.uid,
      file: 'environments/api-env.yaml',
      setup_failed: false,
    });
    const uid = created.body.uid as string;
    // The change is a commit of the file in the managed repository.
    const file = execFileSync('git', ['-C', factory.repoUrl, 'show', 'main:environments/api-env.yaml'], {
      encoding: 'utf8',
    });
    expect(file).toContain('dockerImage: debian:bookworm');
    expect((await t.call('GET', `/api/v1/agent/environments/${uid}`)).body).toEqual(created.body);
    const listed = (await t.call('GET', '/api/v1/agent/environments?sort_by=name')).body.environments;
    expect(listed.filter((e: any) => e.config.name === 'api-env').map((e: any) => e.uid)).toEqual([uid]);
    const used = await run(uid, { read: ['api.txt', 'lib/lib.txt'] });
    expect(used.found.files).toEqual({ 'api.txt': 'api one\n', 'lib/lib.txt': 'lib v2\n' });

    // Every check of the file applies, with file:line.
    const bad = await t.call('PUT', `/api/v1/agent/environments/${uid}`, { env_vars: { HOME: '/x' } });
    expect(bad.status).toBe(400);
    expect(bad.body.invalid_params[0].name).toMatch(/^environments\/api-env\.yaml:\d+$/);
    expect(bad.body.detail).toContain('HOME');
    const token = await t.call('PUT', `/api/v1/agent/environments/${uid}`, {
      repositories: [{ url: 'https://someone:pw@example.com/x.git' }],
    });
    expect(token.status).toBe(400);
    expect(JSON.stringify(token.body)).toContain('credentialSecret');
    const replaced = await t.call('PUT', `/api/v1/agent/environments/${uid}`, { setup_commands: ['true'] });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ uid, config: { setup_commands: ['true'], repositories: [] } });

    expect(
      (await t.call('POST', '/api/v1/agent/environments', { name: 'api-env', factory_uid: factory.uid }))
        .status,
    ).toBe(409);
    const backed = await t.call('PUT', '/api/v1/agent/environments/full', { setup_commands: [] });
    expect(backed.status).toBe(409);
    expect(backed.body.detail).toContain('environments/full.yaml');

    expect((await t.call('DELETE', `/api/v1/agent/environments/${uid}`)).status).toBe(204);
    expect((await t.call('GET', `/api/v1/agent/environments/${uid}`)).status).toBe(404);
    // Another team's environment is not there for this team.
    expect((await t.call('GET', '/api/v1/agent/environments/steal')).status).toBe(404);
  });
});
