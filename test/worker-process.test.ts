import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../src/common/paths.js';
import { SchemaRegistry } from '../src/common/schema-validator.js';
import { artifactText } from './support/artifacts.js';
import { eventually } from './support/eventually.js';
import { runIn as runInOn, startTestService, type TestService } from './support/service.js';
import { openSse } from './support/sse.js';
import { uniqueSleep } from './support/sleeps.js';

// `factoryd worker` as a real separate process (built code: the test setup builds `dist/`), against
// the test service's database (service-hosted mode) or its HTTP API (self-hosted mode). The service
// itself runs no workers.
let t: TestService;
const children: ChildProcess[] = [];
const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-worker-test-'));
beforeAll(async () => {
  t = await startTestService({ WORKER_LEASE_SECONDS: '3' });
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
afterAll(async () => {
  await t?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

interface Worker extends ChildProcess {
  /** The worker id it printed when it started. */
  id(): Promise<string>;
  /** What it printed so far (for a failure's message). */
  output(): string;
  /**
   * A service-hosted worker's slots started: after it asked each installed agent CLI its version,
   * which takes seconds on a loaded machine (the runs' own waits should not include that).
   */
  slotsStarted(): Promise<unknown>;
  /** What its GET /metrics answers (it was started with --metrics). */
  scrape(): Promise<string>;
}

function worker(args: string[], env: Record<string, string> = {}): Worker {
  const child = spawn(process.execPath, [fromRoot('dist/cli/main.js'), 'worker', ...args], {
    // Workspaces under dataDir: DATA_DIR for service-hosted workers, TMPDIR for self-hosted ones.
    env: {
      ...process.env,
      LOG_LEVEL: 'silent',
      WORKER_LEASE_SECONDS: '3',
      DATA_DIR: dataDir,
      TMPDIR: dataDir,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as Worker;
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  child.on('exit', (code) => {
    if (code && code !== 0) process.stderr.write(`worker exited ${code}: ${err}\n`);
  });
  child.output = () => `stdout: ${out}\nstderr: ${err}`;
  child.id = async () => (await eventually(() => /^factoryd worker (\S+):/.exec(out), 'its worker id'))[1]!;
  child.slotsStarted = () =>
    eventually(() => /service-hosted slot\(s\)/.test(out), 'its slots started', { timeoutMs: 120_000 });
  child.scrape = async () => {
    const url = (await eventually(() => /metrics at (\S+)/.exec(out), 'its metrics address'))[1]!;
    const res = await fetch(url);
    expect(res.status).toBe(200);
    return res.text();
  };
  children.push(child);
  return child;
}

/** A self-hosted worker's arguments, with a worker key for its host. */
const selfHosted = async (host: string, on: TestService = t) => [
  '--worker-host',
  host,
  '--api',
  on.api,
  '--api-key',
  await on.workerKey(host),
];

async function create(body: Record<string, unknown>, key?: string, on: TestService = t): Promise<string> {
  const res = await on.call('POST', '/api/v1/agent/runs', body, key);
  expect(res.status).toBe(200);
  return res.body.run_id;
}

/** The run once it is in one of `states`. */
const runIn = (runId: string, states: string[], key?: string, on: TestService = t): Promise<any> =>
  runInOn(on, runId, states, key);

/**
 * A harness that ignores its input closing (as an agent CLI may): on a prompt with "Long" it starts
 * a `sleep` (a grandchild of the worker), says its pid, and waits for it.
 */
const LONG_SLEEP = uniqueSleep(127).processArgs;
const STUBBORN_HARNESS =
  `read -r prompt; case "$prompt" in *Long*) ${LONG_SLEEP} & echo '{"type":"message","text":"sleeping"}'; wait;; esac; ` +
  `echo '{"type":"result","status":"succeeded","message":"ok"}'`;

const conversationTexts = async (runId: string, on: TestService = t): Promise<string[]> =>
  (await on.call('GET', `/api/v1/agent/runs/${runId}/conversation`)).body.messages.map(
    (m: { text?: string; kind?: string }) => m.text ?? m.kind,
  );

/** The pid of the process whose command line is `command` (words split by single spaces). */
const pidOf = (command: string): number | undefined =>
  readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .find((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ') === command;
      } catch {
        return false;
      }
    });

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('factoryd worker (service-hosted, on the database)', () => {
  it('killed with SIGKILL mid-run: its harness tree is gone at once, the run ends as ERROR once the lease lapses', async () => {
    const w = worker(['--concurrency', '1'], {
      DATABASE_URL: t.service.databaseServer.url,
      HARNESS_COMMAND: STUBBORN_HARNESS,
    });
    await w.slotsStarted();
    const done = await create({ prompt: 'Quick one' });
    expect((await runIn(done, ['SUCCEEDED', 'FAILED'])).state).toBe('SUCCEEDED');

    const id = await create({ prompt: 'Long one' });
    await runIn(id, ['INPROGRESS']);
    // Found by its command line: in a sandbox, the pid a harness sees is its PID namespace's.
    const pid = await eventually(
      async () => ((await conversationTexts(id)).includes('sleeping') ? pidOf(LONG_SLEEP) : undefined),
      "the harness's sleep",
    );
    expect(alive(pid)).toBe(true);
    w.kill('SIGKILL');
    await eventually(() => !alive(pid), `the harness's grandchild ${pid} gone with its worker`);
    // Nothing renews the lease now; the service's reaper ends the run.
    const run = await runIn(id, ['ERROR', 'SUCCEEDED', 'FAILED']);
    expect(run.state).toBe('ERROR');
    expect(run.status_message).toMatchObject({
      reason: 'lease_expired',
      error_code: 'resource_unavailable',
      retryable: true,
    });
    expect(run.status_message.message).toMatch(/stopped renewing its lease/);
  });
  it("a serving replica's live stream shows the runs it changes: it publishes their changes; its /metrics counts them", async () => {
    const w = worker(['--concurrency', '1', '--metrics', '127.0.0.1:0'], {
      DATABASE_URL: t.service.databaseServer.url,
    });
    await w.slotsStarted();
    // A stream on the serving replica, which runs no workers: what it hears of the run after QUEUED
    // comes from the worker process, through NOTIFY.
    const stream = await openSse(`${t.api}/agent/runs/events`, { authorization: `Bearer ${t.adminKey}` });
    try {
      const id = await create({ prompt: 'Watched from a serving replica' });
      const states = () =>
        stream.events.filter((e) => e.event === 'run.state' && e.data.run_id === id).map((e) => e.data.state);
      expect((await runIn(id, ['SUCCEEDED', 'FAILED', 'ERROR'])).state).toBe('SUCCEEDED');
      await eventually(
        () => states().includes('SUCCEEDED'),
        "the serving replica's stream to show SUCCEEDED",
      );
      expect(states()).toEqual(['QUEUED', 'CLAIMED', 'INPROGRESS', 'SUCCEEDED']);
    } finally {
      stream.close();
    }
    // What this process did (its claim, its harness start), and the queue it works from.
    const metrics = await w.scrape();
    expect(metrics).toMatch(/^factoryd_runs_claimed_total\{workers="service"\} 1$/m);
    expect(metrics).toMatch(/^factoryd_harness_starts_total\{harness="oz",outcome="started"\} 1$/m);
    expect(metrics).toMatch(/^factoryd_runs\{state="QUEUED",workers="service"\} \d+$/m);
    expect(metrics).toMatch(/^factoryd_metrics_database_up 1$/m);
  });
});

describe('factoryd worker --worker-host (self-hosted, over HTTP)', () => {
  it("takes only its own host's runs in its own team, and shows up as connected", async () => {
    const other = await t.newTeam('other-team');
    const w = worker([...(await selfHosted('box-a')), '--metrics', '127.0.0.1:0']);
    const mine = await create({ prompt: 'On box a', config: { worker_host: 'box-a' } });
    const elsewhere = await create({ prompt: 'On box b', config: { worker_host: 'box-b' } });
    const serviceHosted = await create({ prompt: 'On the service' });
    const otherTeams = await create(
      { prompt: 'Other team, same host id', config: { worker_host: 'box-a' } },
      other.key,
    );

    const run = await runIn(mine, ['SUCCEEDED', 'FAILED', 'ERROR']);
    expect(run.state).toBe('SUCCEEDED');
    // What it did, a line each, in the terminal it runs in (issue #30, 8).
    await eventually(
      () => w.output().includes(`factoryd worker: run ${mine}: harness ended (exit 0)`),
      'the end said',
    );
    expect(w.output()).toContain(`factoryd worker: run ${mine}: taken, its harness starting`);
    expect(run.execution_location).toBe('REMOTE');
    expect(run.agent_config.worker_host).toBe('box-a');
    expect(
      (await t.call('GET', `/api/v1/agent/runs/${mine}/conversation`)).body.messages.length,
    ).toBeGreaterThan(2);
    // The worker takes its host's runs oldest first: once it took a run queued after the others,
    // it has passed over every one of them it could have taken.
    const later = await create({ prompt: 'Later on box a', config: { worker_host: 'box-a' } });
    expect((await runIn(later, ['SUCCEEDED', 'FAILED', 'ERROR'])).state).toBe('SUCCEEDED');
    for (const id of [elsewhere, serviceHosted])
      expect((await t.call('GET', `/api/v1/agent/runs/${id}`)).body.state).toBe('QUEUED');
    expect((await t.call('GET', `/api/v1/agent/runs/${otherTeams}`, undefined, other.key)).body.state).toBe(
      'QUEUED',
    );

    const connected = await t.call('GET', '/api/v1/agent/connected-self-hosted-workers');
    expect(connected.status).toBe(200);
    expect(connected.body.workers).toEqual([
      {
        worker_host: 'box-a',
        connection_count: 1,
        connected_at: expect.any(String),
        last_seen_at: expect.any(String),
        // Every worker runs harness commands; the agent CLIs it found depend on the machine.
        harnesses: expect.arrayContaining([{ type: 'oz' }]),
      },
    ]);
    expect(new SchemaRegistry().check('ConnectedWorkersResponse', connected.body)).toEqual([]);
    expect(
      (await t.call('GET', '/api/v1/agent/connected-self-hosted-workers', undefined, other.key)).body.workers,
    ).toEqual([]);
    // Its harness starts, counted on its own machine (its claims are the API replica's to count); no
    // depth: it has no database to read them from.
    const metrics = await w.scrape();
    expect(metrics).toMatch(/^factoryd_harness_starts_total\{harness="oz",outcome="started"\} 2$/m);
    expect(metrics).not.toMatch(/^factoryd_runs\{|^factoryd_metrics_database_up/m);
  });

  it('follows a follow-up and a cancel over HTTP, and a restarted worker picks up new runs', async () => {
    const args = await selfHosted('box-c');
    let w = worker(args);
    const asked = await create({ prompt: 'Ask me\n/ask Proceed?', config: { worker_host: 'box-c' } });
    await runIn(asked, ['BLOCKED']);
    await t.call('POST', `/api/v1/agent/runs/${asked}/followups`, { message: 'yes' });
    expect((await runIn(asked, ['SUCCEEDED', 'FAILED'])).state).toBe('SUCCEEDED');

    const sleep = uniqueSleep(200);
    const long = await create({ prompt: `Long\n${sleep.wait}`, config: { worker_host: 'box-c' } });
    await runIn(long, ['INPROGRESS']);
    // Mid-run: the harness is at work (its `sleep` child runs).
    const working = () =>
      execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).includes(sleep.processArgs);
    await eventually(working, "the harness's sleep");
    await t.call('POST', `/api/v1/agent/runs/${long}/cancel`);
    await eventually(() => !working(), 'the cancelled harness gone').catch(async () => {
      // What a person would look at: the processes, the run as the API sees it, the worker's output.
      {
        const ps = execFileSync('ps', ['-eo', 'pid,pgid,ppid,stat,etimes,args'], { encoding: 'utf8' }).split(
          '\n',
        );
        // The `sleep`, every process of its group and its parent, and the worker's harnesses.
        const sleeps = ps.filter((l) => l.includes(sleep.processArgs)).map((l) => l.trim().split(/\s+/));
        const related = new Set(sleeps.flatMap(([pid, pgid, ppid]) => [pid, pgid, ppid]));
        const run = (await t.call('GET', `/api/v1/agent/runs/${long}`)).body;
        throw new Error(
          `the cancelled harness is still running\n${ps
            .filter(
              (l, i) =>
                i === 0 ||
                /agent\.js/.test(l) ||
                l
                  .trim()
                  .split(/\s+/)
                  .slice(0, 3)
                  .some((id) => related.has(id)),
            )
            .join('\n')}\nrun: ${JSON.stringify(run)}\nworker ${w.output()}`,
        );
      }
    });
    expect((await runIn(long, ['CANCELLED'])).state).toBe('CANCELLED');

    await eventually(
      () => w.output().includes(`factoryd worker: run ${long}: stopped: cancelled`),
      'the cancel said',
    );
    w.kill('SIGTERM');
    await new Promise((r) => w.once('exit', r));
    expect(w.output()).toMatch(/factoryd worker: SIGTERM: stopping\nfactoryd worker: stopped\n/);
    w = worker(args);
    const later = await create({ prompt: 'After the restart', config: { worker_host: 'box-c' } });
    expect((await runIn(later, ['SUCCEEDED', 'FAILED'])).state).toBe('SUCCEEDED');
  });

  it('refuses another host id (the reserved one too) and bad worker ids', async () => {
    const key = await t.workerKey('box');
    const res = await t.call(
      'POST',
      '/api/v1/agent/workers/claim',
      { worker_id: 'w1', worker_host: 'warp' },
      key,
    );
    expect(res.status).toBe(403);
    expect(res.body.detail).toMatch(/bound to worker_host "box"/);
    const bad = await t.call(
      'POST',
      '/api/v1/agent/workers/claim',
      { worker_id: 'a b', worker_host: 'box' },
      key,
    );
    expect(bad.status).toBe(400);
    const unauth = await t.call(
      'POST',
      '/api/v1/agent/workers/claim',
      { worker_id: 'w', worker_host: 'box' },
      '',
    );
    expect(unauth.status).toBe(401);
  });
});

describe('factoryd worker --worker-host checks its key when it starts', () => {
  it('refuses a key that is no worker key (an old runs:write key) and says how to issue one', async () => {
    const w = worker(['--worker-host', 'box-old', '--api', t.api, '--api-key', t.adminKey]);
    const code = await new Promise((r) => w.once('exit', r));
    expect(code).not.toBe(0);
    expect(w.output()).toContain(
      '`npx factoryd api-keys create --team default --scopes workers --worker-host box-old`',
    );
    expect(w.output()).toMatch(/lacks the scope workers/);
  });

  it("refuses another host's worker key, naming the host it is bound to", async () => {
    const w = worker(['--worker-host', 'box-y', '--api', t.api, '--api-key', await t.workerKey('box-x')]);
    const code = await new Promise((r) => w.once('exit', r));
    expect(code).not.toBe(0);
    expect(w.output()).toMatch(/bound to worker_host "box-x" and cannot act for "box-y"/);
  });
});

describe('factoryd worker --worker-host keeps its workspaces in a folder of its own user', () => {
  /** A worker started with `tmp` as TMPDIR, once it exited: its code and what it printed. */
  async function startIn(tmp: string): Promise<{ code: unknown; output: string }> {
    const w = worker(await selfHosted('box-folder'), { TMPDIR: tmp });
    const code = await new Promise((r) => w.once('exit', r));
    return { code, output: w.output() };
  }

  it('stops at its start where the folder is a link, naming it, and leaves what it points to as it was', async () => {
    const tmp = mkdtempSync(join(dataDir, 'tmp-link-'));
    const elsewhere = mkdtempSync(join(dataDir, 'elsewhere-'));
    chmodSync(elsewhere, 0o700);
    symlinkSync(elsewhere, join(tmp, `factoryd-workspaces-${process.getuid!()}`));
    const { code, output } = await startIn(tmp);
    expect(code).not.toBe(0);
    expect(output).toContain(`${tmp}/factoryd-workspaces-${process.getuid!()} is a symbolic link`);
    expect(statSync(elsewhere).mode & 0o777).toBe(0o700);
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  const asRoot = process.getuid?.() === 0;
  it.skipIf(!asRoot)(
    `stops at its start where another user made the folder first ${asRoot ? '' : '(skipped: making a folder of another user needs root)'}`,
    async () => {
      const tmp = mkdtempSync(join(dataDir, 'tmp-taken-'));
      const taken = join(tmp, `factoryd-workspaces-${process.getuid!()}`);
      mkdirSync(taken, { mode: 0o777 });
      chownSync(taken, 65534, 65534);
      const { code, output } = await startIn(tmp);
      expect(code).not.toBe(0);
      expect(output).toContain(`${taken} is a folder of uid 65534, not a folder of this user's`);
      expect(readdirSync(taken)).toEqual([]);
    },
  );
});

/** A run for a self-hosted host on `api`, once it ended. */
async function runToEnd(prompt: string, host: string, api: TestService): Promise<any> {
  const id = await create({ prompt, config: { worker_host: host } }, undefined, api);
  return runIn(id, ['SUCCEEDED', 'FAILED', 'ERROR'], undefined, api);
}

describe('restarts', () => {
  it('a self-hosted worker survives an API restart: it reconnects, its live run streams on, follow-ups reach it', async () => {
    // A lease shorter than the outage: the restarted API's reaper waits a lease before reaping.
    const api = await startTestService({ WORKER_LEASE_SECONDS: '4' });
    try {
      const w = worker(await selfHosted('box-r', api), { WORKER_LEASE_SECONDS: '4' });
      const live = await create(
        {
          prompt: 'Wait, then ask\n/wait 2\n/ask Proceed after the restart?',
          config: { worker_host: 'box-r' },
        },
        undefined,
        api,
      );
      await runIn(live, ['INPROGRESS'], undefined, api);
      // And a run held by a worker that never comes back.
      const orphan = await create({ prompt: 'Orphan', config: { worker_host: 'box-gone' } }, undefined, api);
      await api.call(
        'POST',
        '/api/v1/agent/workers/claim',
        { worker_id: 'gone', worker_host: 'box-gone' },
        await api.workerKey('box-gone'),
      );
      // A run for a host nobody serves: each housekeeping pass notes that in its status message.
      const unserved = await create(
        { prompt: 'Nobody', config: { worker_host: 'box-none' } },
        undefined,
        api,
      );
      // Down until both runs' leases have lapsed; the harness asks its question (BLOCKED) while the
      // API is away.
      const db = new pg.Client({ connectionString: api.databaseUrl });
      await db.connect();
      try {
        await api.restart({
          whileDown: () =>
            eventually(
              async () =>
                (
                  await db.query(`SELECT 1 FROM runs WHERE id = ANY($1) AND lease_expires_at < now()`, [
                    [live, orphan],
                  ])
                ).rowCount === 2,
              'both leases lapsed',
            ),
        });
        expect(w.exitCode).toBeNull();
        // The restarted API reaps only a lease after it started, so live workers can renew first: once
        // a housekeeping pass of the restarted API ran (it noted the unserved run again) and the live
        // worker's heartbeat reached it, the orphan (whose lease lapsed too) is still held.
        await db.query(`UPDATE runs SET status_message = NULL WHERE id = $1`, [unserved]);
        const back = new Date().toISOString();
        await eventually(
          async () => (await api.call('GET', `/api/v1/agent/runs/${unserved}`)).body.status_message,
          'a housekeeping pass after the restart',
        );
        await eventually(async () => {
          const { workers } = (await api.call('GET', '/api/v1/agent/connected-self-hosted-workers')).body;
          return workers.some((x: any) => x.worker_host === 'box-r' && x.last_seen_at > back);
        }, "the live worker's heartbeat after the restart");
      } finally {
        await db.end();
      }
      expect((await api.call('GET', `/api/v1/agent/runs/${orphan}`)).body.state).toBe('CLAIMED');
      const blocked = await runIn(live, ['BLOCKED', 'SUCCEEDED', 'FAILED', 'ERROR'], undefined, api);
      expect(blocked.state).toBe('BLOCKED');
      expect(blocked.status_message.message).toBe('Proceed after the restart?');
      await api.call('POST', `/api/v1/agent/runs/${live}/followups`, { message: 'yes, go on' });
      const run = await runIn(live, ['SUCCEEDED', 'FAILED', 'ERROR'], undefined, api);
      expect(run.state).toBe('SUCCEEDED');
      expect(await artifactText(api, run.artifacts[0])).toContain('answered "yes, go on"');
      const texts = await conversationTexts(live, api);
      expect(texts).toContain('Working on: Wait, then ask');
      expect(texts).toContain('Thanks, continuing with: yes, go on');

      expect((await runToEnd('After the API restart', 'box-r', api)).state).toBe('SUCCEEDED');
      const reaped = await runIn(orphan, ['ERROR'], undefined, api);
      expect(reaped.status_message.reason).toBe('lease_expired');
    } finally {
      for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
      await api.stop();
    }
  });

  it('a self-hosted worker killed and restarted: its old run ends ERROR at once, its folder is gone, new runs go to the new one', async () => {
    // A long lease: the old run must end because the new worker reported the old one dead, not by lease.
    const api = await startTestService({ WORKER_LEASE_SECONDS: '60' });
    try {
      const env = { WORKER_LEASE_SECONDS: '60' };
      const args = await selfHosted('box-k', api);
      const first = worker(args, env);
      const firstFolder = join(dataDir, `factoryd-workspaces-${process.getuid!()}`, await first.id());
      const old = await create(
        { prompt: 'Long\n/wait 120', config: { worker_host: 'box-k' } },
        undefined,
        api,
      );
      await runIn(old, ['INPROGRESS'], undefined, api);
      expect(existsSync(firstFolder)).toBe(true);
      first.kill('SIGKILL');
      await new Promise((r) => first.once('exit', r));

      const second = worker(args, env);
      const lost = await runIn(old, ['ERROR', 'SUCCEEDED', 'FAILED'], undefined, api);
      expect(lost.status_message).toMatchObject({ reason: 'worker_lost', retryable: true });
      expect(lost.status_message.message).toMatch(/died while running this run/);
      await eventually(() => !existsSync(firstFolder), "the dead worker's folder removed");

      expect((await runToEnd('After the worker restart', 'box-k', api)).state).toBe('SUCCEEDED');

      // Stopped gracefully: what it held ends ERROR at once, and it leaves no folder behind.
      const held = await create(
        { prompt: 'Long\n/wait 120', config: { worker_host: 'box-k' } },
        undefined,
        api,
      );
      await runIn(held, ['INPROGRESS'], undefined, api);
      const secondFolder = join(dataDir, `factoryd-workspaces-${process.getuid!()}`, await second.id());
      second.kill('SIGTERM');
      await new Promise((r) => second.once('exit', r));
      const stopped = await runIn(held, ['ERROR', 'SUCCEEDED', 'FAILED'], undefined, api);
      expect(stopped.status_message).toMatchObject({ reason: 'worker_lost', retryable: true });
      expect(stopped.status_message.message).toMatch(/shut down while running this run/);
      expect(existsSync(secondFolder)).toBe(false);
    } finally {
      for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
      await api.stop();
    }
  });
});
