import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitRunner, GitStopped, GitTimedOut } from '../../src/git/git-runner.js';
import { DefinitionStore } from '../../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../../src/reconciler/reconcile-scheduler.js';
import { SecretsService } from '../../src/secrets/secrets.service.js';
import { eventually } from '../support/eventually.js';
import { baseFactory, TestRepo } from '../support/git-repo.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * A git remote that misbehaves: a tarpit accepts connections (or, over HTTP, the request) and never
 * answers. Given one beside a healthy factory, the healthy one applies on its own schedule, the
 * tarpit's fetch is cut by the time limit (GIT_TIMEOUT_SECONDS, short here) and recorded as
 * FetchFailed, and no git process of the service is left behind — also when the service stops mid-fetch.
 */

/**
 * A misbehaving remote on loopback. `tcp`: accepts connections and never answers. `http`: accepts
 * the request and sends nothing. `drip`: answers 200 and sends 4 KiB every half second, forever — fast
 * enough for HTTP's low-speed limit, so only the time limit ends it. `close` drops its connections.
 */
async function tarpit(kind: 'tcp' | 'http' | 'drip'): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server =
    kind === 'tcp'
      ? createServer()
      : createHttpServer((_req, res) => {
          if (kind === 'http') return;
          res.writeHead(200, { 'content-type': 'application/x-git-upload-pack-advertisement' });
          const drip = setInterval(() => res.write(Buffer.alloc(4096, '0')), 500);
          res.on('close', () => clearInterval(drip));
        });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A process's command line, '' once it has ended (a zombie's is empty too). */
function cmdlineOf(pid: number | string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

interface Proc {
  pid: number;
  cmdline: string;
}

/** Live git processes on this machine whose command line names `127.0.0.1:<port>`. */
function gitProcessesNaming(port: number): Proc[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map((entry) => ({ pid: Number(entry), cmdline: cmdlineOf(entry) }))
    .filter((p) => /^(\S*\/)?git(-[\w-]+)? /.test(p.cmdline) && p.cmdline.includes(`127.0.0.1:${port}/`));
}

/** A check for `eventually`: at least `count` git processes naming the port (the list), else undefined. */
const gitOn =
  (port: number, count = 1) =>
  () => {
    const found = gitProcessesNaming(port);
    return found.length >= count ? found : undefined;
  };

/** Those of `seen` still running (a reused pid runs another command line). */
const stillRunning = (seen: Proc[]) => seen.filter((p) => cmdlineOf(p.pid) === p.cmdline);

describe('a git remote that never answers', () => {
  let t: TestService;
  const cleanups: Array<() => Promise<void> | void> = [];

  beforeAll(async () => {
    // Polls every second; a git call may take 10 s (the HTTP low-speed limit is half of it: 5 s).
    t = await startTestService({ FACTORY_POLL_SECONDS: '1', GIT_TIMEOUT_SECONDS: '10' });
    // The healthy factories' webhook names this team secret.
    await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'value');
    await t.service.app.get(ReconcileScheduler).firstPoll;
  });
  afterAll(async () => {
    await t?.stop();
    for (const c of cleanups.reverse()) await c();
  });

  const status = async (uid: string) => (await t.call('GET', `/api/v1/factory/${uid}`)).body;
  const applies = async (uid: string) =>
    (await t.call('GET', `/api/v1/factory/${uid}/applies`)).body.applies as any[];
  const register = async (svc: TestService, name: string, repoUrl: string) =>
    (await svc.service.app
      .get(DefinitionStore)
      .register({ teamId: svc.defaultTeam.id, name, repoUrl, branch: 'main' }))!;

  it('git://: a healthy factory applies while the tarpit hangs; the tarpit records FetchFailed and leaves no git process', async () => {
    const pit = await tarpit('tcp');
    cleanups.push(pit.close);
    const url = `git://127.0.0.1:${pit.port}/repo.git`;
    const stuck = await register(t, 'tarpit', url);
    const hanging = await eventually(gitOn(pit.port), 'a git fetch from the tarpit');

    // Registered while the tarpit's fetch hangs: it applies within its poll all the same.
    const repo = new TestRepo();
    cleanups.push(() => repo.remove());
    const healthy = await register(t, 'healthy', repo.dir);
    const first = repo.commit(baseFactory(), 'initial');
    await eventually(
      async () => (await status(healthy.uid)).last_applied_revision === first,
      'the healthy factory to apply its first commit',
    );
    const second = repo.commit({ 'agents/extra/agent.md': '---\ndescription: extra\n---\nExtra.\n' });
    await eventually(
      async () => (await status(healthy.uid)).last_applied_revision === second,
      'the healthy factory to apply a new commit',
    );

    // The tarpit's fetch is cut by the time limit and recorded as a failed apply a person can act on.
    const failed = await eventually(
      async () => (await applies(stuck.uid)).find((a) => a.result === 'failed'),
      'a failed apply of the tarpit',
    );
    expect(failed.revision).toBeNull();
    expect(failed.errors[0].message).toMatch(
      new RegExp(`^git fetch of branch main from ${url} timed out after 10 s`),
    );
    expect(await status(stuck.uid)).toMatchObject({
      ready: false,
      reason: 'FetchFailed',
      message: failed.errors[0].message,
    });
    // The git processes of the fetch that timed out are gone (polls start new ones meanwhile).
    await eventually(() => stillRunning(hanging).length === 0, 'the timed-out fetch’s git processes to end');
  });

  // Factories may not use plain http:// (docs/security.md), but https:// runs through the same curl
  // limits: these drive the one GitRunner straight at a plain-HTTP tarpit, http allowed for the call.
  const httpFetch = (runner: GitRunner, port: number) => {
    const mirror = mkdtempSync(join(tmpdir(), 'factoryd-git-http-'));
    cleanups.push(() => rmSync(mirror, { recursive: true, force: true }));
    return runner
      .run(['init', '--bare', '--quiet'], mirror)
      .then(() =>
        runner.run(
          ['-c', 'protocol.http.allow=always', 'fetch', `http://127.0.0.1:${port}/repo.git`, 'main'],
          mirror,
        ),
      );
  };

  it('http: a server that accepts the request and sends nothing is cut by the low-speed limit', async () => {
    const pit = await tarpit('http');
    cleanups.push(pit.close);
    const fetching = httpFetch(new GitRunner({ gitTimeoutSeconds: 10 }), pit.port).catch((err: Error) => err);
    // git fetch over HTTP runs helpers (`git remote-http`, `git-remote-http`) beside git itself.
    const hanging = await eventually(gitOn(pit.port, 3), 'git fetch and its HTTP helpers on the tarpit');
    // curl's low-speed limit (5 s here), not the 10 s time limit, ended it.
    const err = await fetching;
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(GitTimedOut);
    expect(String(err)).toMatch(/too slow/i);
    await eventually(() => stillRunning(hanging).length === 0, 'the cut fetch’s git processes to end');
  });

  it('http: a server that sends forever, above the low-speed limit, is cut by the time limit with its helpers', async () => {
    const pit = await tarpit('drip');
    cleanups.push(pit.close);
    const fetching = httpFetch(new GitRunner({ gitTimeoutSeconds: 10 }), pit.port).catch((err: Error) => err);
    const hanging = await eventually(gitOn(pit.port, 3), 'git fetch and its HTTP helpers on the drip');
    expect(String(await fetching)).toMatch(/git fetch timed out after 10 s/);
    // The helpers (which a signal to git alone would leave running) ended with it.
    await eventually(() => stillRunning(hanging).length === 0, 'the timed-out fetch’s git processes to end');
  });

  it('http: a runner shut down mid-fetch leaves no git process behind, helpers included', async () => {
    const pit = await tarpit('drip');
    cleanups.push(pit.close);
    const runner = new GitRunner({ gitTimeoutSeconds: 60 });
    const fetching = httpFetch(runner, pit.port).catch((err: Error) => err);
    await eventually(gitOn(pit.port, 3), 'a git fetch and its HTTP helpers');
    await runner.onApplicationShutdown();
    expect(await fetching).toBeInstanceOf(GitStopped);
    expect(gitProcessesNaming(pit.port)).toEqual([]);
  });

  it('ssh://: a server that accepts and never sends its banner is given up without a prompt', async () => {
    const pit = await tarpit('tcp');
    cleanups.push(pit.close);
    const stuck = await register(t, 'ssh-tarpit', `ssh://git@127.0.0.1:${pit.port}/repo.git`);
    const failed = await eventually(
      async () => (await applies(stuck.uid)).find((a) => a.result === 'failed'),
      'a failed apply of the ssh tarpit',
    );
    // ssh's ConnectTimeout (5 s here: half the time limit) in batch mode, not the 10 s time limit.
    expect(failed.errors[0].message).toMatch(
      /^cannot fetch branch main of ssh:\/\/127\.0\.0\.1:\d+\/repo\.git: .*timed out during banner exchange/,
    );
  });

  it('a repository that answers again: the factory is ready again without a new commit', async () => {
    const repo = new TestRepo();
    cleanups.push(() => repo.remove());
    const f = await register(t, 'comes-back', repo.dir);
    const sha = repo.commit(baseFactory(), 'initial');
    await eventually(async () => (await status(f.uid)).last_applied_revision === sha, 'the first apply');
    renameSync(repo.dir, `${repo.dir}-away`);
    // Gone from its path, the repository is refused (SourceRefused: it does not exist), like a failed fetch.
    await eventually(
      async () => ['FetchFailed', 'SourceRefused'].includes((await status(f.uid)).reason),
      'the source to fail',
    );
    renameSync(`${repo.dir}-away`, repo.dir);
    expect(
      await eventually(async () => {
        const s = await status(f.uid);
        return s.ready && s;
      }, 'the factory to be ready again'),
    ).toMatchObject({ reason: 'Applied', last_applied_revision: sha });
  });

  it('a service that stops mid-fetch leaves no git process behind, helpers included', async () => {
    const pits = [await tarpit('tcp'), await tarpit('tcp')];
    for (const pit of pits) cleanups.push(pit.close);
    // The default time limit (60 s): only the stop can end these fetches in time.
    const t2 = await startTestService({ FACTORY_POLL_SECONDS: '1' });
    try {
      await register(t2, 'tarpit', `git://127.0.0.1:${pits[0].port}/repo.git`);
      await register(t2, 'ssh-tarpit', `ssh://git@127.0.0.1:${pits[1].port}/repo.git`);
      await eventually(gitOn(pits[0].port), 'a git fetch from the tarpit');
      // git fetch and its ssh: the helper outlives a git killed alone.
      await eventually(gitOn(pits[1].port), 'a git fetch over ssh');
    } finally {
      await t2.stop();
    }
    await eventually(
      () => pits.every((pit) => gitProcessesNaming(pit.port).length === 0),
      'no git process naming a tarpit after the stop',
    );
  });
});
