import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NotificationDispatcher } from '../src/notifications/notification-dispatcher.js';
import { CLI, runCli } from './support/cli.js';
import { eventually } from './support/eventually.js';
import { NotificationReceiver } from './support/notification-receiver.js';
import { request, startServeProcess } from './support/serve-process.js';
import { startTestService, type TestService } from './support/service.js';

// Dispatchers as processes of their own (`factoryd serve --role notifications`) against the database of
// an API that sends nothing itself (the test service, its dispatcher stopped, as `--role api` leaves
// it). Real PostgreSQL, real HTTP receivers on loopback, a real tarpit socket, a real SIGKILL.
let t: TestService;
const children: ChildProcess[] = [];
const closers: Array<() => Promise<void> | void> = [];
beforeAll(async () => {
  t = await startTestService({ NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true' });
  await t.service.app.get(NotificationDispatcher).stop();
}, 120_000);
/** Each test's dispatchers end with it, whatever its outcome. */
afterEach(async () => {
  const running = children.splice(0).filter((c) => c.exitCode === null && c.signalCode === null);
  for (const c of running) c.kill('SIGKILL');
  await Promise.all(running.map((c) => new Promise((resolve) => c.once('exit', resolve))));
});
afterAll(async () => {
  for (const close of closers) await close();
  await t?.stop();
});

/** What a process of this test needs to share the test service's database and secrets key. */
const sharedEnv = () => ({
  DATABASE_URL: t.databaseUrl,
  DATA_DIR: t.dataDir,
  LOG_LEVEL: 'silent',
  NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true',
});

/**
 * `factoryd serve --role notifications` on the test service's database; resolves once it is up, with
 * the address of its /metrics if `args` asked for one.
 */
function dispatcher(
  env: Record<string, string> = {},
  args: string[] = [],
): Promise<ChildProcess & { metricsUrl?: string }> {
  const child = spawn(process.execPath, [CLI, 'serve', '--role', 'notifications', ...args], {
    env: { ...process.env, ...sharedEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('dispatcher up'))
        resolve(Object.assign(child, { metricsUrl: /metrics at (\S+)/.exec(out)?.[1] }));
    });
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code, signal) => reject(new Error(`dispatcher exited (${code ?? signal}): ${out}`)));
  });
}

/** A receiver that tells which of this test's processes sent each request (`senderPid`). */
async function receiver() {
  const r = new NotificationReceiver();
  r.senders = () => children.map((c) => c.pid);
  const url = await r.start();
  closers.push(() => r.stop());
  return { r, url };
}

/** A team with an endpoint at `url`, subscribed to its runs' events. */
async function subscribedTeam(name: string, url: string) {
  const team = await t.newTeam(`${name}-${Date.now()}`);
  const res = await t.call(
    'POST',
    '/api/v1/notifications/endpoints',
    { name, url, event_types: ['run.queued', 'run.cancelled'] },
    team.key,
  );
  expect(res.status).toBe(201);
  return { ...team, endpointId: res.body.endpoint.id as string, secret: res.body.secret as string };
}

type Call = (
  method: string,
  path: string,
  body: unknown,
  key: string,
) => Promise<{ status: number; body: any }>;

/**
 * `count` runs of the team, each created and then cancelled (two messages, in that order), by a few
 * callers at once; resolves with their ids once every one is cancelled. `onEach` after each run;
 * `call`: the API it goes through (the test service's, or another process's).
 */
async function runsCreatedAndCancelled(
  key: string,
  count: number,
  onEach: () => unknown = () => undefined,
  call: Call = (method, path, body, k) => t.call(method, path, body, k),
) {
  const ids: string[] = [];
  let started = 0;
  const caller = async () => {
    while (started++ < count) {
      const created = await call('POST', '/api/v1/agent/runs', { prompt: 'notify me' }, key);
      expect(created.status).toBe(200);
      ids.push(created.body.run_id);
      expect(
        (await call('POST', `/api/v1/agent/runs/${created.body.run_id}/cancel`, undefined, key)).status,
      ).toBe(200);
      await onEach();
    }
  };
  await Promise.all(Array.from({ length: 6 }, caller));
  return ids;
}

const pendingOf = async (endpointId: string) =>
  (
    await t.service.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM notification_messages WHERE endpoint_id = $1 AND status = 'pending'`,
      [endpointId],
    )
  )[0]!.n;
const messagesOf = (endpointId: string) =>
  t.service.db.query<{ id: string; status: string }>(
    `SELECT id, status FROM notification_messages WHERE endpoint_id = $1`,
    [endpointId],
  );

/** The runs whose messages did not first arrive as `run.queued`, then `run.cancelled`: in order per run. */
function outOfOrder(r: NotificationReceiver, runs: string[]) {
  return runs
    .map((run) => {
      const firsts = r.ofRun(run).filter((x, i, all) => all.findIndex((y) => y.id === x.id) === i);
      return { run, types: firsts.map((x) => x.body.type) };
    })
    .filter(({ types }) => types.join() !== 'run.queued,run.cancelled');
}

describe('dispatchers in processes of their own', () => {
  it('two share the messages: every message sent once, a run’s in order', async () => {
    const { r, url } = await receiver();
    r.delayMs = 2;
    const team = await subscribedTeam('two-dispatchers', url);
    r.secret = team.secret;
    const both = await Promise.all([dispatcher(), dispatcher()]);
    const pids = both.map((c) => c.pid!);
    const sentBy = (pid: number) => r.received.filter((x) => x.senderPid === pid).length;
    // Which process claims the endpoint is up to their polls: rather than count on some number of
    // runs to give each a turn, load goes on, 50 runs at a time, until each has sent some.
    const runs: string[] = [];
    await eventually(
      async () => {
        runs.push(...(await runsCreatedAndCancelled(team.key, 50)));
        return pids.every((pid) => sentBy(pid) > 0);
      },
      'both processes sending',
      { timeoutMs: 90_000 },
    );
    await eventually(async () => (await pendingOf(team.endpointId)) === 0, 'every message delivered', {
      timeoutMs: 60_000,
    });
    const messages = await messagesOf(team.endpointId);
    expect(messages).toHaveLength(2 * runs.length);
    expect(messages.every((m) => m.status === 'delivered')).toBe(true);
    // Once each, signed, and a run's two in the order they happened.
    expect(r.received).toHaveLength(2 * runs.length);
    expect(new Set(r.received.map((x) => x.id)).size).toBe(2 * runs.length);
    expect(r.received.every((x) => x.verified)).toBe(true);
    expect(outOfOrder(r, runs)).toEqual([]);
    // Each sent its share, and nothing came from anywhere else.
    expect(pids.map(sentBy).every((n) => n > 0)).toBe(true);
    expect(pids.map(sentBy).reduce((a, b) => a + b)).toBe(r.received.length);
    // SIGTERM: each stops claiming, finishes what it has in flight, and exits cleanly.
    const exits = both.map((c) => new Promise((resolve) => c.once('exit', (code) => resolve(code))));
    for (const c of both) c.kill('SIGTERM');
    expect(await Promise.all(exits)).toEqual([0, 0]);
  }, 120_000);

  it('`serve --role api` makes no attempt; a `--role notifications` process sends what its runs queued', async () => {
    const { r, url } = await receiver();
    const team = await subscribedTeam('api-role', url);
    r.secret = team.secret;
    const api = await startServeProcess(
      { ...sharedEnv(), WORKER_CONCURRENCY: '0' },
      { args: ['--role', 'api'] },
    );
    children.push(api.child);
    const viaApi: Call = (method, path, body, key) =>
      request(path, `${api.url}${path}`, { method, body, key });
    const runs = await runsCreatedAndCancelled(team.key, 30, undefined, viaApi);
    // Their messages wait, made by the state changes: the API process sends nothing.
    expect(await pendingOf(team.endpointId)).toBe(60);
    expect(r.received).toEqual([]);

    // A dispatcher of its own sends them all, while the API process still runs beside it: every
    // request came from the dispatcher, one attempt per message.
    const sender = await dispatcher({}, ['--metrics', '127.0.0.1:0']);
    await eventually(async () => (await pendingOf(team.endpointId)) === 0, 'every message delivered', {
      timeoutMs: 60_000,
    });
    expect(r.received).toHaveLength(60);
    expect(r.received.filter((x) => x.senderPid !== sender.pid)).toEqual([]);
    const [attempts] = await t.service.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM notification_attempts WHERE endpoint_id = $1`,
      [team.endpointId],
    );
    expect(attempts!.n).toBe(60);
    expect(r.received.every((x) => x.verified)).toBe(true);
    expect(outOfOrder(r, runs)).toEqual([]);

    // Its attempts, counted where they were made, and the depths it works from; nothing of what it
    // does not run (the run queue's depths are an API replica's to show).
    const scrape = await fetch(sender.metricsUrl!);
    expect(scrape.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await scrape.text();
    expect(text).toMatch(/^factoryd_notification_attempts_total\{outcome="delivered"\} 60$/m);
    expect(text).toMatch(/^factoryd_notification_messages_pending \d+$/m);
    expect(text).toMatch(/^factoryd_metrics_database_up 1$/m);
    expect(text).not.toMatch(/^factoryd_runs\{/m);
    expect((await fetch(sender.metricsUrl!.replace('/metrics', '/healthz'))).status).toBe(404);
    expect(await api.stop()).toBe(0);
  }, 120_000);

  it('a SIGKILL of the dispatcher under load loses no message; only those in flight go twice', async () => {
    const { r, url } = await receiver();
    // Each answer takes a moment, so that attempts are in flight when the process dies.
    r.delayMs = 5;
    const team = await subscribedTeam('killed', url);
    r.secret = team.secret;
    // Short attempts, so that the dead process's lease (twice the time limit, and 5 s) lapses soon.
    const quick = { NOTIFICATIONS_TIMEOUT_MS: '2000' };
    const first = await dispatcher(quick);
    let killedAtMs = 0;
    let restarted: Promise<ChildProcess> | undefined;
    // Midway through the load: SIGKILL, and a new dispatcher while the load goes on.
    const runs = await runsCreatedAndCancelled(team.key, 200, () => {
      if (!killedAtMs && r.received.length >= 120) {
        first.kill('SIGKILL');
        killedAtMs = Date.now();
        restarted = dispatcher(quick);
      }
    });
    expect(killedAtMs).toBeGreaterThan(0);
    await restarted;
    await eventually(async () => (await pendingOf(team.endpointId)) === 0, 'every message delivered', {
      timeoutMs: 60_000,
    });
    const messages = await messagesOf(team.endpointId);
    expect(messages).toHaveLength(400);
    expect(messages.every((m) => m.status === 'delivered')).toBe(true);
    // Nothing lost: every message reached the receiver.
    const got = new Map<string, number>();
    for (const x of r.received) got.set(x.id, (got.get(x.id) ?? 0) + 1);
    expect(messages.filter((m) => !got.has(m.id))).toEqual([]);
    // Sent twice: only messages the killed process had sent and not recorded, each at most twice. The
    // receiver knows which process opened each connection: the first copy is never the new process's
    // (the killed one's; unknown when the connection, opened just before the kill, was accepted after
    // it died, so the time it was accepted cannot tell), and the second is the new process's, on a
    // connection opened after the kill — the killed process never sent a message twice itself.
    const twice = [...got].filter(([, n]) => n > 1);
    expect(twice.every(([, n]) => n === 2)).toBe(true);
    const newPid = (await restarted)!.pid;
    const pairs = twice.map(([id]) => r.received.filter((x) => x.id === id));
    expect(pairs.filter(([firstCopy]) => firstCopy!.senderPid === newPid)).toEqual([]);
    expect(
      pairs.filter(([, second]) => second!.senderPid !== newPid || second!.connectedAt < killedAtMs),
    ).toEqual([]);
    expect(r.received).toHaveLength(400 + twice.length);
    expect(r.received.every((x) => x.verified)).toBe(true);
    expect(outOfOrder(r, runs)).toEqual([]);
  }, 120_000);

  it('one team’s tarpit endpoint delays no other team: B’s messages arrive while A’s first attempt hangs', async () => {
    const sockets = new Set<net.Socket>();
    let connections = 0;
    const pit = net.createServer((s) => {
      connections++;
      sockets.add(s);
      s.on('data', () => undefined);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => pit.listen(0, '127.0.0.1', resolve));
    closers.push(() => {
      for (const s of sockets) s.destroy();
      pit.close();
    });
    const a = await subscribedTeam('tarpit', `http://127.0.0.1:${(pit.address() as AddressInfo).port}/hook`);
    const { r, url } = await receiver();
    const b = await subscribedTeam('on-time', url);
    r.secret = b.secret;
    // A minute before an attempt to the tarpit gives up: B's messages must not wait for it.
    await dispatcher({ NOTIFICATIONS_TIMEOUT_MS: '60000' });
    const [, runsB] = await Promise.all([
      runsCreatedAndCancelled(a.key, 100),
      runsCreatedAndCancelled(b.key, 100),
    ]);
    await eventually(() => r.received.length === 200, 'all of B’s messages', { timeoutMs: 30_000 });
    // …while the tarpit holds its one connection: A's first message, never answered, nothing else tried.
    const messagesA = await t.service.db.query(
      `SELECT status, attempts, count(*)::int AS n FROM notification_messages WHERE endpoint_id = $1 GROUP BY 1, 2`,
      [a.endpointId],
    );
    expect({ connections, messagesA }).toMatchObject({ connections: 1 });
    expect(sockets.size).toBe(1);
    const [attempts] = await t.service.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM notification_attempts WHERE endpoint_id = $1`,
      [a.endpointId],
    );
    expect(attempts!.n).toBe(0);
    expect(r.received.every((x) => x.verified)).toBe(true);
    expect(outOfOrder(r, runsB)).toEqual([]);
    // On time: each within seconds of its state change, far below the tarpit's minute.
    const late = r.received.filter((x) => x.at - Date.parse(x.body.timestamp) > 10_000);
    expect(late).toEqual([]);
  }, 120_000);

  it('refuses a role it does not know, and a dispatcher without the API’s database, in one line each', async () => {
    const unknown = await runCli(['serve', '--role', 'dispatcher']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(
      'factoryd: --role must be one of all, api, notifications, got "dispatcher"\n',
    );
    const alone = await runCli(['serve', '--role', 'notifications'], { env: { DATABASE_URL: '' } });
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(
      /^factoryd: --role notifications sends from the database of the API processes: set DATABASE_URL/,
    );
  });

  it('refuses --metrics where it has no place, an address that is none, and one that is taken', async () => {
    const onApi = await runCli(['serve', '--metrics', '9464']);
    expect(onApi.code).toBe(2);
    expect(onApi.stderr).toBe(
      "factoryd: --metrics is for --role notifications, which serves no HTTP; --role all serves GET /metrics on the API's port\n",
    );
    const garbled = await runCli(['serve', '--role', 'notifications', '--metrics', 'localhost:http'], {
      env: sharedEnv(),
    });
    expect(garbled.code).toBe(2);
    expect(garbled.stderr).toBe(
      'factoryd: --metrics takes [host:]port (say 9464, or 0.0.0.0:9464 for every interface), got "localhost:http"\n',
    );
    // Taken: the process says so and ends, having sent nothing.
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => holder.close(() => resolve())));
    const taken = `127.0.0.1:${(holder.address() as AddressInfo).port}`;
    const busy = await runCli(['serve', '--role', 'notifications', '--metrics', taken], { env: sharedEnv() });
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(new RegExp(`^factoryd: --metrics ${taken}: listen EADDRINUSE`));
    expect(busy.stdout).not.toContain('dispatcher up');
  });
});
